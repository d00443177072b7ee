"""The records of a session recording: one pydantic model per ``kind``, and how a line is parsed.

Every line of a recording is one JSON object with a ``kind`` literal. One pydantic
:data:`RECORD_ADAPTER` turns records into JSON and back, and every field after the first
version has a default, so older files keep loading (the schema is in docs/recording.md). A
line of a kind this version does not know loads as an :class:`UnknownRecord`.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from emil import __version__
from emil.backoff import OutageEvent
from emil.context.ladder import TrimRecord
from emil.llm.types import Completion, Timings, ToolCall, Usage
from emil.world.tool import Fate

__all__ = [
    "CONFIRMED_COMMAND",
    "RECORD_ADAPTER",
    "SCHEMA_VERSION",
    "CompletionRecord",
    "EndRecord",
    "ErrorRecord",
    "EventRecord",
    "HeaderRecord",
    "MessageRecord",
    "ObservationRecord",
    "OverflowRecord",
    "Record",
    "RecordedToolCall",
    "RecoveryRecord",
    "RequestRecord",
    "RetryRecord",
    "ServiceRecord",
    "SummaryRecord",
    "ToolResultRecord",
    "TurnRecord",
    "UnknownRecord",
    "legacy_outcome",
    "outage_record",
    "parse_record",
]

SCHEMA_VERSION = 1
"""Bumped when a change is not purely additive; readers still accept every older version."""

class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    t: float = Field(default_factory=time.time)
    """Wall-clock time (unix seconds) when the record was written."""
    turn: int | None = None
    """The agent turn this record belongs to (None outside turns, e.g. the header)."""


class HeaderRecord(_Record):
    """First record of a session: versions, effective settings and the pinned prompt parts."""

    kind: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    emil_version: str = __version__
    session_id: str = ""
    session_key: str | None = None
    """The session header's value sent with every request (``<bot_name>-<session_id>``; the
    header's name is the ``session_header`` setting). None: none sent, or a file from before."""
    settings: dict[str, Any] = Field(default_factory=dict)
    """Effective settings (secrets removed), as ``--print-config`` shows them."""
    model: str | None = None
    tokenizer: str | None = None
    chat_template: str | None = None
    """Chat template source when it came from local files (None: the model family's own)."""
    model_family: str | None = None
    """The model family the session counted with (emil.model.family; None in files written
    before families existed, which were all Qwen3.5/3.6)."""
    window: int | None = None
    """The served window (``max_model_len``)."""
    output_reserve: int | None = None
    prompt_budget: int | None = None
    enable_thinking: bool = False
    preserve_thinking: bool = False
    """``chat_template_kwargs.preserve_thinking`` of the session (False in files written before
    the setting existed, which matches what those sessions sent: nothing)."""
    system_prompt: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """Tool specs exactly as sent in requests."""
    bot_name: str | None = None


class MessageRecord(_Record):
    """A message's full content, written once when it first appears."""

    kind: Literal["message"] = "message"
    ref: str
    """Key that requests use to reference this message (the history id as text, or ``x<n>``)."""
    id: int | None = None
    """History message id, when the message is (or became) part of the history."""
    origin: Literal["history", "system", "memory", "derived"] = "history"
    """``derived`` = a prompt part not recorded otherwise, e.g. a trimmed variant of a message."""
    message_kind: str | None = None
    """History kind: system, observation, chat, assistant, tool_result, memory."""
    event_time: float | None = None
    """Game time (unix seconds) of the oldest event the message carries; for the horizon."""
    openai: dict[str, Any] = Field(default_factory=dict)
    """The message exactly as sent (OpenAI format)."""
    status_full: str | None = None
    """An observation whose status the history shows as a change since the status before it:
    the whole status line (emil.context.status), shown again when a trim removes the ones
    before it. None: the status, if any, is shown whole."""


class EventRecord(_Record):
    """A game event as it arrived from the bot, with the priority perception gave it."""

    kind: Literal["event"] = "event"
    event: dict[str, Any] = Field(default_factory=dict)
    priority: str | None = None
    """urgent | normal | ambient, or echo (the end of an action the loop awaited itself)."""
    npc: bool = False
    """A chat line perception took for an NPC's (listed, another Emil, caught in a loop:
    emil.trust.npc), so replay triages it as live did."""


class ObservationRecord(_Record):
    """A turn's observation message was built (its text is in the message record ``ref``)."""

    kind: Literal["observation"] = "observation"
    ref: str = ""
    reason: str = ""
    """Why the turn started: the trigger events, or an interruption's cause."""
    events: int = 0
    urgent: bool = False
    snapshot: dict[str, Any] | None = None
    shown: int | None = None
    """Events shown verbatim; fewer than ``events`` when a flood was coalesced to fit the cap."""
    notes: list[str] = Field(default_factory=list)
    """What the world did on the turn's words before the model (a command an operator
    confirmed), noted at the top of the observation (docs/trust.md)."""
    recalled: str | None = None
    """The archive's lines recalled at the end of the observation (emil.memory.retrieval), as
    the turn engine appended them: replay gives them back, since the archive is not replayed."""


class RequestRecord(_Record):
    """One chat request, with its messages as references to message records."""

    kind: Literal["request"] = "request"
    step: int = 0
    attempt: int = 0
    """0 for the first try; overflow recoveries count up."""
    refs: list[str] = Field(default_factory=list)
    predicted_tokens: int | None = None
    shared_prefix_tokens: int | None = None
    """Leading prompt tokens shared with the previous request (prefix-cache reuse)."""
    limit: int | None = None
    """A forced smaller prompt limit (overflow recovery), when one was applied."""
    max_completion_tokens: int | None = None
    tool_choice: Any = None
    enable_thinking: bool = False
    horizon_s: float | None = None
    """Memory horizon of this prompt: age of its oldest retained event, in seconds."""


class RecordedToolCall(BaseModel):
    """A tool call as the model wrote it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = ""
    name: str = ""
    raw_arguments: str = ""
    arguments: dict[str, Any] | None = None
    error: str | None = None


class CompletionRecord(_Record):
    """The model's answer to a request."""

    kind: Literal["completion"] = "completion"
    step: int = 0
    attempt: int = 0
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[RecordedToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_s: float | None = None
    first_token_s: float | None = None
    model: str | None = None
    assistant_ref: str | None = None
    """The message record holding the assistant message this completion added to history."""
    dropped_tool_calls: int = 0
    """Tool calls past the cap of one answer: never run, the model told how many."""

    @classmethod
    def from_completion(cls, c: Completion, **fields: Any) -> CompletionRecord:
        """Flatten a :class:`~emil.llm.types.Completion` into a record."""
        u, tm = c.usage, c.timings
        return cls(
            content=c.content,
            reasoning=c.reasoning,
            tool_calls=[RecordedToolCall(**tc.model_dump()) for tc in c.tool_calls],
            finish_reason=c.finish_reason,
            prompt_tokens=u.prompt_tokens if u else None,
            completion_tokens=u.completion_tokens if u else None,
            cached_tokens=u.cached_tokens if u else None,
            reasoning_tokens=u.reasoning_tokens if u else None,
            total_s=tm.total_s if tm else None,
            first_token_s=tm.first_token_s if tm else None,
            model=c.model,
            dropped_tool_calls=c.dropped_tool_calls,
            **fields,
        )

    def to_completion(self) -> Completion:
        """Rebuild the :class:`~emil.llm.types.Completion` (for replay)."""
        usage = None
        if self.prompt_tokens is not None:
            usage = Usage(
                prompt_tokens=self.prompt_tokens,
                completion_tokens=self.completion_tokens or 0,
                cached_tokens=self.cached_tokens,
                reasoning_tokens=self.reasoning_tokens,
            )
        timings = None
        if self.total_s is not None:
            timings = Timings(total_s=self.total_s, first_token_s=self.first_token_s)
        return Completion(
            content=self.content,
            reasoning=self.reasoning,
            tool_calls=[ToolCall(**tc.model_dump()) for tc in self.tool_calls],
            finish_reason=self.finish_reason,
            usage=usage,
            timings=timings,
            model=self.model,
            dropped_tool_calls=self.dropped_tool_calls,
        )


CONFIRMED_COMMAND = "command"
"""The ``name`` of the action record of a server command an operator confirmed: sent at step 0,
before the model, by the guard (not a tool the model called); its ``arguments`` are the
command, the confirmation code and the operator who confirmed it (docs/trust.md, "Audit")."""


class ToolResultRecord(_Record):
    """A tool call's outcome, as the model will read it (or, named :data:`CONFIRMED_COMMAND`,
    a command an operator confirmed, sent before the model)."""

    kind: Literal["tool_result"] = "tool_result"
    step: int = 0
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] | None = None
    ok: bool = False
    text: str = ""
    data: Any = None
    elapsed_ms: float | None = None
    ref: str | None = None
    """The message record holding the tool result message."""
    requested_by: list[str] = Field(default_factory=list)
    """Every player whose words were in the turn (empty: Emil acted on its own): whose request
    the action served (docs/trust.md, "Audit")."""
    rule: str = ""
    """The row of the rule table that allowed or refused it (emil.trust.rules; "" when no guard
    saw the call: a malformed call, a switched-off tool, a recording older than the table)."""
    fate: Fate = "ran"
    """What became of the call (emil.world.tool.Fate): ran, invalid, timed_out, not_run,
    aborted, stopping. Read this, never the text."""
    interrupt: str = ""
    """The interrupt's reason, for ``not_run`` and ``aborted``."""
    note: str = ""
    """What the turn engine added at the end of ``text`` (the calls of the answer dropped past
    its cap); :attr:`answer` is the text without it."""

    @model_validator(mode="before")
    @classmethod
    def _before_fate(cls, data: Any) -> Any:
        """A record written before ``fate`` existed says its outcome only in its text: read it
        there, once, by the wording those versions wrote (:func:`legacy_outcome`)."""
        if isinstance(data, dict) and "fate" not in data:
            return {**data, **legacy_outcome(str(data.get("text", "")), bool(data.get("ok", False)))}
        return data

    @property
    def answer(self) -> str:
        """The world's own answer: the text without the engine's note."""
        return self.text[: len(self.text) - len(self.note)] if self.note else self.text


_LEGACY_NOT_RUN = "not run: interrupted ("
_LEGACY_ABORTED = "aborted: interrupted ("
_LEGACY_STOPPING = "not run: Emil is stopping"
_LEGACY_TIMED_OUT = re.compile(r"error: \S+ timed out after \S+ s and was aborted")
_LEGACY_NOTE = re.compile(r" \(\d+ more tool call\(s\) in that answer were not run: at most \d+ per answer\)\Z")


def legacy_outcome(text: str, ok: bool) -> dict[str, Any]:
    """``fate``, ``interrupt`` and ``note`` of a tool result recorded before they were fields,
    from the words the turn engine of those versions wrote (the reader's only look into a
    result's text; emil.agent.turn renders the same words from the fields today)."""
    match = _LEGACY_NOTE.search(text)
    note = match.group(0) if match else ""
    head = text[: len(text) - len(note)]
    out: dict[str, Any] = {"note": note}
    if ok:
        return {**out, "fate": "ran"}
    if head == _LEGACY_STOPPING:
        return {**out, "fate": "stopping"}
    for prefix, fate in ((_LEGACY_NOT_RUN, "not_run"), (_LEGACY_ABORTED, "aborted")):
        if head.startswith(prefix) and head.endswith(")"):
            return {**out, "fate": fate, "interrupt": head[len(prefix):-1]}
    if _LEGACY_TIMED_OUT.fullmatch(head):
        return {**out, "fate": "timed_out"}
    return {**out, "fate": "invalid" if head.startswith("error: ") else "ran"}


class OverflowRecord(_Record):
    """The server said the request was too large (a 400, or a clamped ``length`` finish)."""

    kind: Literal["overflow"] = "overflow"
    window: int | None = None
    requested_output: int | None = None
    prompt_tokens: int | None = None
    prompt_is_lower_bound: bool = False
    predicted_tokens: int | None = None
    message: str = ""


class RecoveryRecord(_Record):
    """A retry after an overflow, with the strictly smaller limit it used."""

    kind: Literal["recovery"] = "recovery"
    attempt: int = 0
    limit: int | None = None
    predicted_tokens: int | None = None
    detail: str = ""


class ErrorRecord(_Record):
    """Something failed: a turn (server fault, prompt too large, a bug), a world error, or the
    session itself (``fatal``: the cause of the end record that follows)."""

    kind: Literal["error"] = "error"
    error_type: str = ""
    message: str = ""
    fatal: bool = False
    where: str = ""
    """llm, world, snapshot, turn, session, recording..."""
    detail: str = ""
    """More for a developer (a bug's traceback, a server fault's body), never shown to players."""


class RetryRecord(_Record):
    """One failed attempt while a service is away: the same request (or connect) is tried again.

    For the LLM, ``step`` and ``send`` place it: send ``send`` of the request of ``step`` failed.
    """

    kind: Literal["retry"] = "retry"
    service: str = ""
    """"llm endpoint" or "minecraft server"."""
    attempt: int = 0
    """Failed attempts so far in this outage (1 = the first)."""
    error: str = ""
    delay_s: float = 0.0
    """Wait before the next attempt."""
    down_for_s: float = 0.0
    step: int | None = None


class ServiceRecord(_Record):
    """A service changed state: ``down`` (first failure), ``up`` (back), ``gone`` (past patience)."""

    kind: Literal["service"] = "service"
    service: str = ""
    state: Literal["down", "up", "gone"] = "down"
    attempts: int = 0
    """Failed attempts in the outage (for ``up`` and ``gone``)."""
    down_for_s: float = 0.0
    error: str = ""


class SummaryRecord(_Record):
    """One summary request of the ``summarise`` rung (emil.memory.summariser) and its outcome."""

    kind: Literal["summary"] = "summary"
    covers: list[str] = Field(default_factory=list)
    """Keys of the turns it summarises, oldest first (emil.memory.summary.turn_key)."""
    outcome: Literal["ready", "invalid", "failed", "cancelled"] = "ready"
    """ready = checked and kept for the next trim; invalid = answered but unusable; failed = no
    answer (busy, unreachable, too slow); cancelled = a turn started first."""
    reason: str = ""
    lines: list[str] = Field(default_factory=list)
    """The lines the memory note gets when the rung folds those turns."""
    facts: list[dict[str, Any]] = Field(default_factory=list)
    """Facts for the notes store (emil.memory.notes.Fact), grounded in the turns."""
    dropped_facts: int = 0
    """Facts in the answer that the turns do not show (invented), left out."""
    text: str | None = None
    """The model's answer as it came."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    max_tokens: int = 0
    elapsed_s: float = 0.0


class TurnRecord(_Record):
    """Summary of one finished turn: the figures of the per-turn log line."""

    kind: Literal["turn"] = "turn"
    reason: str = ""
    steps: int = 0
    actions: int = 0
    latency_first_action_ms: float | None = None
    """From the triggering event to the first action dispatched."""
    predicted_prompt_tokens: int | None = None
    actual_prompt_tokens: int | None = None
    shared_prefix_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int = 0
    tokens_per_s: float | None = None
    trims: int = 0
    overflow_recoveries: int = 0
    interrupted: bool = False
    interrupted_by: str = ""
    """What interrupted the turn (an urgent event, a stop), when it was."""
    failed: str = ""
    """Why the turn failed (its error record has the details), when it did."""
    duration_s: float = 0.0


class EndRecord(_Record):
    """Last record of a closed session; ``exit_code`` is the process's (docs/reliability.md)."""

    kind: Literal["end"] = "end"
    reason: str = ""
    """Starts with the exit's word: "stopped" (0), "error" (1), "configuration" (2), "gone" (3)."""
    exit_code: int | None = None


class UnknownRecord(_Record):
    """A record kind this reader does not know (a newer writer); kept, never fatal."""

    kind: Literal["unknown"] = "unknown"
    original_kind: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


Record = Annotated[
    HeaderRecord
    | MessageRecord
    | EventRecord
    | ObservationRecord
    | RequestRecord
    | CompletionRecord
    | ToolResultRecord
    | TrimRecord
    | SummaryRecord
    | OverflowRecord
    | RecoveryRecord
    | ErrorRecord
    | RetryRecord
    | ServiceRecord
    | TurnRecord
    | EndRecord
    | UnknownRecord,
    Field(discriminator="kind"),
]

RECORD_ADAPTER: TypeAdapter[Record] = TypeAdapter(Record)

_KNOWN_KINDS = frozenset(
    {
        "header", "message", "event", "observation", "request", "completion", "tool_result",
        "trim", "summary", "overflow", "recovery", "error", "retry", "service", "turn", "end",
    }
)


def parse_record(data: Any) -> Record:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in _KNOWN_KINDS:
        rest = {k: v for k, v in data.items() if k not in ("kind", "t", "turn")}
        keep = {k: data[k] for k in ("t", "turn") if k in data}
        return UnknownRecord(original_kind=str(kind), data=rest, **keep)
    return RECORD_ADAPTER.validate_python(data)


def outage_record(event: OutageEvent, *, turn: int | None = None, step: int | None = None) -> RetryRecord | ServiceRecord:
    """The record of a service's retry (``retry``) or change of state (down, up, gone)."""
    if event.kind == "retry":
        return RetryRecord(turn=turn, step=step, service=event.service, attempt=event.attempt,
                           error=event.error, delay_s=event.delay_s, down_for_s=event.down_for_s)
    return ServiceRecord(turn=turn, service=event.service, state=event.kind, attempts=event.attempt,
                         down_for_s=event.down_for_s, error=event.error)



"""Session recordings: typed JSONL records, an append-only writer and a tolerant reader.

Every line of a recording is one JSON object with a ``kind`` literal. One pydantic
:data:`RECORD_ADAPTER` turns records into JSON and back, and every field after the first
version has a default, so older files keep loading (the schema is in docs/recording.md).

A recording is self-sufficient for replay: each message's full content is written once, as a
``message`` record, when it first appears (history messages carry their history ``id``; other
prompt parts such as the system prompt or a memory note get a ``ref`` of their own), and each
``request`` lists the ``refs`` of the messages it sent, in order. The system prompt and the
tool specs are in the header.

The writer flushes every record, so a killed process loses at most its last, partial line;
:func:`read_recording` stops at the first line it cannot read and says where. A new session
never appends to an existing file unless asked to, and then repairs a torn tail first
(:class:`Recorder`), so a file holding several sessions reads to its end.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Annotated, Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from emil import __version__
from emil.backoff import OutageEvent
from emil.context.ladder import TrimRecord
from emil.exceptions import ConfigurationError, NotARecordingError
from emil.llm.types import Completion, Timings, ToolCall, Usage

__all__ = [
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
    "Recorder",
    "RecordingExists",
    "RecordingRead",
    "RecoveryRecord",
    "RequestRecord",
    "RetryRecord",
    "ServiceRecord",
    "SummaryRecord",
    "ToolResultRecord",
    "TrimRecord",
    "TurnRecord",
    "UnknownRecord",
    "check_recording_file",
    "messages_for_request",
    "outage_record",
    "read_recording",
    "repair_tail",
]

_log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""Bumped when a change is not purely additive; readers still accept every older version."""

_log = logging.getLogger("emil.recording")


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


class EventRecord(_Record):
    """A game event as it arrived from the bot, with the priority perception gave it."""

    kind: Literal["event"] = "event"
    event: dict[str, Any] = Field(default_factory=dict)
    priority: str | None = None
    """urgent | normal | ambient, or echo (the end of an action the loop awaited itself)."""


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
        )


class ToolResultRecord(_Record):
    """A tool call's outcome, as the model will read it."""

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


def _parse_record(data: Any) -> Record:
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


class _MessageLike(Protocol):
    """What the recorder needs of a history message (emil.context.history.Message)."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def event_time(self) -> float | None: ...
    def to_openai(self) -> dict[str, Any]: ...


def _canonical(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class RecordingExists(ConfigurationError):
    """A new session was pointed at an existing recording without asking to append to it."""


def repair_tail(path: Path) -> int:
    """Cut a torn tail (a process killed mid-write) so the file ends on a whole, readable record.

    Lines are cut from the end while they are partial (no newline) or unreadable; returns the
    number of bytes cut (0 when the file was whole). An unreadable line followed by readable
    ones is not a tail: it stays, for the reader to report.
    """
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            start = _line_start(f, keep)
            f.seek(start)
            line = f.read(keep - start)
            if line.endswith(b"\n") and (not line.strip() or _readable(line)):
                break
            keep = start
        if keep < size:
            f.truncate(keep)
        return size - keep


def _line_start(f: IO[bytes], end: int) -> int:
    """Offset of the first byte of the line that ends at ``end`` (its newline included)."""
    f.seek(end - 1)
    hi = end - 1 if f.read(1) == b"\n" else end
    while hi > 0:
        lo = max(0, hi - 65536)
        f.seek(lo)
        newline = f.read(hi - lo).rfind(b"\n")
        if newline >= 0:
            return lo + newline + 1
        hi = lo
    return 0


def _readable(line: bytes) -> bool:
    try:
        _parse_record(json.loads(line))
    except (ValueError, ValidationError):
        return False
    return True


class Recorder:
    """Append-only JSONL writer; every record is flushed as soon as it is written.

    A new recording never appends to an existing file: a non-empty ``path`` raises
    :class:`RecordingExists` unless ``append`` is True, and then a torn tail left by a killed
    process is cut first (and an ``error`` record says how many bytes), so the new session
    starts on a line of its own and the whole file stays readable.

    Besides :meth:`write`, it interns messages: :meth:`message` records a history message once;
    :meth:`request_refs` maps the OpenAI messages of a request to refs, writing a ``message``
    record for any part it has not seen (system prompt, memory note, trimmed variants).
    Observers (:meth:`add_observer`) receive every record after it is written; Emil's metrics
    are fed that way, so the loop makes no metrics calls. Not thread-safe: one recorder per
    agent loop.
    """

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = self.path.exists() and self.path.stat().st_size > 0
        if existing and not append:
            raise RecordingExists(
                f"recording {self.path} already exists; choose another path (--recording) or set "
                "recording_append (--recording-append) to continue it"
            )
        repaired = repair_tail(self.path) if existing else 0
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self._refs: dict[str, str] = {}
        """Canonical JSON of an OpenAI message -> its ref (content-addressed interning)."""
        self._ids: dict[int, str] = {}
        """Message id -> ref, so a request's known messages are found without hashing them."""
        self._derived = 0
        self.records_written = 0
        self._observers: list[Callable[[BaseModel], None]] = []
        if repaired:
            _log.warning("recording %s: cut a torn last line (%d bytes) before appending", self.path, repaired)
            self.write(ErrorRecord(
                error_type="TornTail", where="recording",
                message=f"cut {repaired} bytes of a torn last line before this session appended",
            ))

    def add_observer(self, observer: Callable[[BaseModel], None]) -> None:
        """Call ``observer(record)`` for every record written from now on.

        An observer that raises is reported once in the log and removed: watching a session
        must never end it.
        """
        self._observers.append(observer)

    @property
    def closed(self) -> bool:
        return self._file is None

    def write(self, record: BaseModel) -> None:
        """Append one record and flush it. Writing to a closed recorder is a no-op."""
        if self._file is None:
            return
        line = RECORD_ADAPTER.dump_json(record).decode()  # type: ignore[arg-type]
        self._file.write(line + "\n")
        self._file.flush()
        self.records_written += 1
        for observer in list(self._observers):
            try:
                observer(record)
            except Exception:
                _log.exception("recording observer %r failed; removed", observer)
                self._observers.remove(observer)

    def message(self, msg: _MessageLike, *, turn: int | None = None) -> str:
        """Record a history message's full content once; returns its ref (its id as text)."""
        ref = str(msg.id)
        if msg.id in self._ids:
            return self._ids[msg.id]
        openai = msg.to_openai()
        origin: Literal["history", "system", "memory"] = (
            "system" if msg.kind == "system" else "memory" if msg.kind == "memory" else "history"
        )
        self.write(
            MessageRecord(
                ref=ref, id=msg.id, origin=origin, message_kind=msg.kind,
                event_time=msg.event_time, openai=openai, turn=turn,
            )
        )
        self._ids[msg.id] = ref
        self._refs[_canonical(openai)] = ref
        return ref

    def request_refs(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        turn: int | None = None,
        ids: Sequence[int | None] | None = None,
    ) -> list[str]:
        """Refs of a request's OpenAI messages, recording every part not seen before.

        ``ids`` (parallel to ``messages``) are the messages' immutable ids when known: a known
        id is looked up instead of hashing the message, which keeps a 36k-token prompt cheap.
        """
        refs: list[str] = []
        for i, m in enumerate(messages):
            mid = ids[i] if ids is not None and i < len(ids) else None
            if mid is not None and mid in self._ids:
                refs.append(self._ids[mid])
                continue
            key = _canonical(m)
            ref = self._refs.get(key)
            if ref is None:
                self._derived += 1
                ref = f"x{self._derived}"
                role = m.get("role")
                origin: Literal["system", "derived"] = (
                    "system" if role == "system" and i == 0 else "derived"
                )
                self.write(MessageRecord(ref=ref, id=mid, origin=origin, openai=dict(m), turn=turn))
                self._refs[key] = ref
            if mid is not None:
                self._ids[mid] = ref
            refs.append(ref)
        return refs

    def close(self, reason: str = "closed", *, exit_code: int | None = None) -> None:
        """Write the end record and close the file (idempotent)."""
        if self._file is None:
            return
        self.write(EndRecord(reason=reason, exit_code=exit_code))
        self._file.close()
        self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close("error" if exc[0] is not None else "closed")


class RecordingRead(NamedTuple):
    """What :func:`read_recording` could read."""

    records: list[Record]
    stopped_at_line: int | None
    """1-based line number of the first unreadable line, or None when every line was read."""
    problem: str | None
    """What was wrong with that line (truncated JSON, unknown schema...), or None."""

    @property
    def header(self) -> HeaderRecord | None:
        """The first header, if any."""
        return next((r for r in self.records if isinstance(r, HeaderRecord)), None)

    @property
    def complete(self) -> bool:
        """True when the session was closed cleanly and every line was read."""
        return self.problem is None and bool(self.records) and isinstance(self.records[-1], EndRecord)


def read_recording(path: str | Path) -> RecordingRead:
    """Read a recording, stopping at the first line that is not a valid record.

    A process killed mid-write leaves a partial last line; that is reported in ``problem`` with
    its line number, and every record before it is returned. Blank lines are skipped.
    """
    records: list[Record] = []
    with Path(path).open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            truncated = not raw.endswith(b"\n")
            try:
                records.append(_parse_record(json.loads(raw)))
            except (ValueError, ValidationError) as e:
                what = "truncated last line" if truncated else "unreadable line"
                detail = str(e).splitlines()[0][:200]
                return RecordingRead(records, lineno, f"line {lineno}: {what} ({detail})")
    return RecordingRead(records, None, None)


_HEADER_LINE_LIMIT = 8 << 20
"""Bytes read looking for the end of the first line (a header holds the system prompt and tools)."""


def check_recording_file(path: str | Path) -> None:
    """Refuse, with the reason, a file an operator named as a recording that is not one.

    An Emil recording starts with its header record (the writer puts it first); anything else
    (an empty file, binary data, a README, another program's JSONL) raises
    :class:`~emil.exceptions.NotARecordingError`. :func:`read_recording` stays tolerant: this
    check is for command lines, before any work is done on the file.
    """
    p = Path(path)
    if not p.exists():
        raise NotARecordingError(f"no such recording: {p}")
    if not p.is_file():
        raise NotARecordingError(f"{p} is not an Emil recording (not a regular file); give a .jsonl file written by run_emil.py")
    with p.open("rb") as f:
        first = b""
        while not first.strip():
            first = f.readline(_HEADER_LINE_LIMIT)
            if not first:
                break
    why = _not_a_header(first)
    if why is not None:
        raise NotARecordingError(
            f"{p} is not an Emil recording ({why}); give a .jsonl file written by run_emil.py (live, demo or --recording)"
        )


def _not_a_header(line: bytes) -> str | None:
    if not line.strip():
        return "the file is empty"
    if b"\0" in line:
        return "binary data"
    try:
        data = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return "its first line is not JSON" if line.endswith(b"\n") else "its first line is not a complete JSON record"
    if not isinstance(data, dict) or data.get("kind") != "header":
        return "its first line is not an Emil header record"
    try:
        HeaderRecord.model_validate(data)
    except ValidationError as e:
        return f"its header record does not validate: {str(e).splitlines()[0]}"
    return None


def messages_for_request(records: Iterable[Record]) -> Iterator[tuple[RequestRecord, list[dict[str, Any]]]]:
    """Rebuild every request's OpenAI messages from the message records (for replay)."""
    by_ref: dict[str, dict[str, Any]] = {}
    for r in records:
        if isinstance(r, MessageRecord):
            by_ref[r.ref] = r.openai
        elif isinstance(r, RequestRecord):
            yield r, [by_ref[ref] for ref in r.refs]

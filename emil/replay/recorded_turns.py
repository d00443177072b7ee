"""A recording regrouped into turns and steps, as the agent loop produced them.

A turn is: the events recorded since the previous observation (what perception held when the
turn started), the observation, then steps; a step is one request (first attempt, and the last
one when an overflow forced retries), the completion that answered it, and the tool results of
its calls. A damaged recording yields every turn up to the damage; the last one may be partial.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emil.exceptions import ConfigurationError
from emil.recording import (
    CompletionRecord,
    EventRecord,
    HeaderRecord,
    MessageRecord,
    ObservationRecord,
    OverflowRecord,
    RecordedToolCall,
    RecordingRead,
    RequestRecord,
    SummaryRecord,
    ToolResultRecord,
    TrimRecord,
    TurnRecord,
)

__all__ = ["RecordedSession", "RecordedStep", "RecordedTurn", "pick_session", "sessions_in"]


def sessions_in(read: RecordingRead) -> list[RecordingRead]:
    """The recording cut at each header record: one read per session, oldest first.

    ``recording_append`` continues a file with a new header per run, and turn numbers start
    again in each, so sessions are replayed one at a time. Damage (a torn last line) belongs to
    the last session.
    """
    starts = [i for i, r in enumerate(read.records) if isinstance(r, HeaderRecord)]
    starts = [0, *starts[1:]] if starts else [0]
    ends = [*starts[1:], len(read.records)]
    parts = [RecordingRead(read.records[a:b], None, None) for a, b in zip(starts, ends, strict=True)]
    parts[-1] = RecordingRead(parts[-1].records, read.stopped_at_line, read.problem)
    return parts


def pick_session(read: RecordingRead, session: int | None, *, name: str) -> tuple[RecordingRead, int, int]:
    """Session ``session`` (1-based; None: the last) of ``read``, its number and the count.

    A number the file does not hold raises :class:`~emil.exceptions.ConfigurationError`.
    """
    parts = sessions_in(read)
    n = len(parts) if session is None else session
    if not 1 <= n <= len(parts):
        held = "1 session" if len(parts) == 1 else f"{len(parts)} sessions"
        raise ConfigurationError(f"{name} holds {held}; --session {session} is not one of them (give 1..{len(parts)})")
    return parts[n - 1], n, len(parts)


def _dispatched(call: RecordedToolCall, result: ToolResultRecord | None) -> bool:
    if call.error is not None or call.arguments is None:
        return False
    return result is None or result.fate not in ("not_run", "repeated", "stopping")


@dataclass
class RecordedStep:
    """One model call of a turn, as recorded."""

    turn: int
    step: int
    request: RequestRecord | None = None
    """First attempt."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The first attempt's messages as sent."""
    final_request: RequestRecord | None = None
    """Last attempt (differs from ``request`` after overflow recoveries)."""
    attempts: list[tuple[RequestRecord, list[dict[str, Any]]]] = field(default_factory=list)
    """Every attempt in order (a strictly smaller retry after each overflow), with its messages."""
    completion: CompletionRecord | None = None
    results: list[ToolResultRecord] = field(default_factory=list)
    overflows: list[OverflowRecord] = field(default_factory=list)

    def result_for(self, call_id: str) -> ToolResultRecord | None:
        return next((r for r in self.results if r.call_id == call_id), None)


@dataclass
class RecordedTurn:
    """One turn: its trigger events, observation and steps."""

    turn: int
    events: list[EventRecord]
    observation: ObservationRecord
    observation_message: MessageRecord | None
    steps: list[RecordedStep] = field(default_factory=list)
    summary: TurnRecord | None = None
    timeline_index: int = 0
    """Position of this turn's observation in :attr:`RecordedSession.timeline`."""

    @property
    def observation_text(self) -> str | None:
        if self.observation_message is None:
            return None
        content = self.observation_message.openai.get("content")
        return content if isinstance(content, str) else None


@dataclass
class RecordedSession:
    """The turns of one recording plus its header and where reading stopped."""

    header: HeaderRecord | None
    turns: list[RecordedTurn]
    stopped_at_line: int | None = None
    problem: str | None = None
    records: int = 0
    trims: int = 0
    """Trim-ladder rungs the recorded session fired."""
    timeline: list[EventRecord | str] = field(default_factory=list)
    """Events and dispatched actions (their tool name) in the order they happened: the agent
    loop treats an ``action_finished`` of an action it dispatched and awaited as an echo."""
    summaries: list[SummaryRecord] = field(default_factory=list)
    """The ``summarise`` rung's summary requests and their answers, in order."""

    @property
    def steps(self) -> int:
        return sum(len(t.steps) for t in self.turns)

    @classmethod
    def from_read(cls, read: RecordingRead) -> RecordedSession:
        by_ref: dict[str, MessageRecord] = {}
        turns: list[RecordedTurn] = []
        by_no: dict[int, RecordedTurn] = {}
        pending: list[EventRecord] = []
        timeline: list[EventRecord | str] = []
        trims = 0
        summaries: list[SummaryRecord] = []
        # A call reached the world unless the model got it wrong or an interruption skipped it;
        # the loop dispatches right after the completion, before the result is written.
        outcome = {r.call_id: r for r in read.records if isinstance(r, ToolResultRecord)}
        for r in read.records:
            if isinstance(r, TrimRecord):
                trims += 1
            elif isinstance(r, SummaryRecord):
                summaries.append(r)
            elif isinstance(r, MessageRecord):
                by_ref[r.ref] = r
            elif isinstance(r, EventRecord):
                pending.append(r)
                timeline.append(r)
            elif isinstance(r, ObservationRecord) and r.turn is not None:
                turn = RecordedTurn(r.turn, pending, r, by_ref.get(r.ref), timeline_index=len(timeline))
                pending = []
                turns.append(turn)
                by_no[r.turn] = turn
            elif r.turn is not None and r.turn in by_no:
                if isinstance(r, CompletionRecord):
                    timeline += [c.name for c in r.tool_calls if _dispatched(c, outcome.get(c.id))]
                cls._attach(by_no[r.turn], r, by_ref)
        return cls(
            read.header, turns, read.stopped_at_line, read.problem, len(read.records), trims, timeline, summaries
        )

    @staticmethod
    def _attach(turn: RecordedTurn, r: Any, by_ref: dict[str, MessageRecord]) -> None:
        if isinstance(r, TurnRecord):
            turn.summary = r
            return
        step_no = getattr(r, "step", None)
        if not isinstance(r, RequestRecord | CompletionRecord | ToolResultRecord | OverflowRecord):
            return
        if isinstance(r, OverflowRecord):  # no step field: belongs to the latest step
            if turn.steps:
                turn.steps[-1].overflows.append(r)
            return
        step = next((s for s in turn.steps if s.step == step_no), None)
        if step is None:
            step = RecordedStep(turn.turn, int(step_no or 0))
            turn.steps.append(step)
        if isinstance(r, RequestRecord):
            messages = [by_ref[ref].openai for ref in r.refs if ref in by_ref]
            if r.attempt == 0 or step.request is None:
                step.request = r
                step.messages = messages
            step.final_request = r
            step.attempts.append((r, messages))
        elif isinstance(r, CompletionRecord):
            step.completion = r
        else:
            step.results.append(r)

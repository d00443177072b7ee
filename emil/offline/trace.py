"""A session as the context manager saw it grow: messages in order, and when requests were made.

Two sources: a recording (the history messages it wrote when they entered history, and the
first attempt of every request, timed by the request's wall clock, which is the clock game
events carry too), and any sequence of turns of :class:`~emil.context.history.Message` (the
synthetic session generator), so a long day of play can be swept without recording one.

Messages the live trim ladder derived (elided stubs, memory notes) are not in the trace: the
point of a sweep is to run today's ladder on the untrimmed growth. The pinned notes block
(emil.memory) is: a ``notes`` step each time it changed (a recording: the block its requests
carried; the synthetic day: the block as the notes learned so far render), which the sweep's
``refresh_notes`` rung puts in at the next trim, as live.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from emil.context.history import Kind, Message
from emil.context.status import STATUS_PREFIX
from emil.memory.render import NOTES_HEADER
from emil.memory.retrieval import Topic
from emil.offline.recall import PlantedFact
from emil.recording import (
    HeaderRecord,
    MessageRecord,
    Record,
    RecordingRead,
    RequestRecord,
    messages_for_request,
    read_recording,
)
from emil.replay.recorded_notes import notes_in

__all__ = ["SessionTrace", "Step", "message_from_record", "split_status"]

_TURN_STARTERS = frozenset({"observation", "chat"})
_KINDS = frozenset({"system", "observation", "chat", "assistant", "tool_result", "memory"})
_ROLE_KIND: dict[str, Kind] = {"assistant": "assistant", "tool": "tool_result", "system": "system"}


@dataclass(frozen=True)
class Step:
    """One thing that happened to the history: a turn started, a message was appended, a
    request was assembled at game time ``now`` (unix seconds), or the pinned notes block read
    ``text`` from then on (``notes``; None = no block)."""

    op: Literal["turn", "append", "request", "notes"]
    message: Message | None = None
    now: float | None = None
    text: str | None = None
    topic: Topic | None = None
    """What a turn is about (a synthetic day's turns: a sweep may recall old lines into it)."""


@dataclass(frozen=True)
class SessionTrace:
    """The growth of one session's history, ready to be replayed through a context manager."""

    name: str
    steps: tuple[Step, ...]
    system_prompt: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    enable_thinking: bool = False
    preserve_thinking: bool = False
    """``chat_template_kwargs.preserve_thinking`` the session ran with (recorded in the header;
    earlier turns' reasoning stays in the prompt when on)."""
    window: int | None = None
    """The served window recorded in the header, if any."""
    output_reserve: int | None = None
    prompt_budget: int | None = None
    tokenizer: str | None = None
    chat_template: str | None = None
    model_family: str | None = None
    """The model family the session counted with (see :func:`emil.model.resolve.family_for_recording`)."""
    stopped_at_line: int | None = None
    problem: str | None = None
    header: HeaderRecord | None = None
    """The recording's header (None for synthetic sessions)."""
    planted: tuple[PlantedFact, ...] = ()
    """Facts planted in the session (the synthetic day), for the recall measure."""
    archive: Path | None = None
    """The session's archive file (a synthetic day kept in a data_dir), for a sweep's retrieval."""

    @property
    def requests(self) -> int:
        return sum(1 for s in self.steps if s.op == "request")

    @property
    def messages(self) -> int:
        return sum(1 for s in self.steps if s.op in ("turn", "append"))

    @property
    def span_s(self) -> float:
        """Game time from the first to the last request."""
        times = [s.now for s in self.steps if s.op == "request" and s.now is not None]
        return max(times) - min(times) if times else 0.0

    @classmethod
    def from_recording(cls, path: str | Path) -> SessionTrace:
        """Read a recording (up to any damage, which is kept in ``problem``)."""
        read = read_recording(path)
        return cls.from_records(read, name=str(path))

    @classmethod
    def from_records(cls, read: RecordingRead | Sequence[Record], *, name: str = "") -> SessionTrace:
        records = read.records if isinstance(read, RecordingRead) else list(read)
        header = next((r for r in records if isinstance(r, HeaderRecord)), None)
        steps: list[Step] = []
        seen: set[str] = set()
        blocks = _notes_blocks(records)
        block: str | None = None
        for r in records:
            if isinstance(r, RequestRecord) and r.attempt == 0 and blocks.get(id(r), block) != block:
                block = blocks[id(r)]
                steps.append(Step("notes", now=r.t, text=block))
            if isinstance(r, MessageRecord):
                if r.origin != "history" or r.ref in seen:
                    continue
                seen.add(r.ref)
                message = message_from_record(r)
                starts = message.kind in _TURN_STARTERS or not steps
                steps.append(Step("turn" if starts else "append", message))
            elif isinstance(r, RequestRecord) and r.attempt == 0 and steps:
                steps.append(Step("request", now=r.t))
        extra: dict[str, Any] = {}
        if header is not None:
            extra = {
                "system_prompt": header.system_prompt,
                "tools": list(header.tools),
                "enable_thinking": header.enable_thinking,
                "preserve_thinking": header.preserve_thinking,
                "window": header.window,
                "output_reserve": header.output_reserve,
                "prompt_budget": header.prompt_budget,
                "tokenizer": header.tokenizer,
                "chat_template": header.chat_template,
                "model_family": header.model_family,
                "header": header,
            }
        problem = read.problem if isinstance(read, RecordingRead) else None
        stopped = read.stopped_at_line if isinstance(read, RecordingRead) else None
        return cls(name, tuple(steps), stopped_at_line=stopped, problem=problem, **extra)

    @classmethod
    def from_turns(
        cls,
        turns: Iterable[Sequence[Message]],
        *,
        name: str = "synthetic",
        system_prompt: str = "",
        tools: Sequence[dict[str, Any]] = (),
        enable_thinking: bool = False,
        preserve_thinking: bool = False,
        turn_seconds: float = 10.0,
        start: float = 0.0,
        model_family: str | None = None,
        notes: Sequence[tuple[float, str | None]] = (),
        planted: Sequence[PlantedFact] = (),
        topics: Sequence[Topic | None] = (),
        archive: Path | None = None,
    ) -> SessionTrace:
        """A trace from turns of messages: a request before each assistant message and after
        the last message of a turn that ends on a tool result (the loop asks again then).

        Game time is the turn's first ``event_time`` when it has one, else ``start`` plus
        ``turn_seconds`` per turn. ``notes``: the pinned notes block as it changed, ``(game
        time, text)`` in order; each goes in before the first turn that starts after it.
        ``topics``: what each turn is about, and ``archive`` the file of the session's archived
        lines (a sweep with retrieval recalls from it into each turn).
        """
        steps: list[Step] = []
        pending = list(notes)
        for index, turn in enumerate(turns):
            if not turn:
                continue
            first = turn[0]
            now = first.event_time if first.event_time is not None else start + index * turn_seconds
            while pending and pending[0][0] <= now:
                t, text = pending.pop(0)
                steps.append(Step("notes", now=t, text=text))
            topic = topics[index] if index < len(topics) else None
            for position, message in enumerate(turn):
                if message.role == "assistant":
                    steps.append(Step("request", now=now))
                steps.append(Step("turn", message, topic=topic) if position == 0 else Step("append", message))
            if turn[-1].role != "assistant":
                steps.append(Step("request", now=now))
        return cls(
            name, tuple(steps), system_prompt=system_prompt, tools=list(tools),
            enable_thinking=enable_thinking, preserve_thinking=preserve_thinking,
            model_family=model_family, planted=tuple(planted), archive=archive,
        )


def _notes_blocks(records: Sequence[Record]) -> dict[int, str | None]:
    """The pinned notes block each first-attempt request carried, by the request record's id()."""
    if not any(isinstance(r, MessageRecord) and str(r.openai.get("content") or "").startswith(NOTES_HEADER) for r in records):
        return {}  # a session without notes: nothing to resolve
    return {
        id(request): notes_in(messages)
        for request, messages in messages_for_request(records)
        if request.attempt == 0
    }


def _history_call(call: dict[str, Any]) -> dict[str, str]:
    function = call.get("function") or {}
    args = function.get("arguments", call.get("arguments", "{}"))
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return {"id": str(call.get("id", "")), "name": str(function.get("name", call.get("name", ""))), "arguments": args}


def split_status(text: str) -> tuple[str | None, str | None]:
    """Observation text -> (events part, status line).

    The agent keeps the live status apart from the events (it rides on the newest message and
    the ladder collapses superseded ones); a recording holds the rendered text, where the
    status is the last paragraph, starting ``[status]``.
    """
    head, sep, tail = text.rpartition("\n\n")
    if sep and tail.startswith(STATUS_PREFIX) and "\n" not in tail:
        return head, tail
    if text.startswith(STATUS_PREFIX) and "\n" not in text:
        return None, text
    return text, None


def message_from_record(record: MessageRecord) -> Message:
    """The history message a ``message`` record holds (an observation's status split off)."""
    m = record.openai
    role = m.get("role", "user")
    kind: Kind = _ROLE_KIND.get(role, "observation")
    if record.message_kind in _KINDS:
        kind = cast(Kind, record.message_kind)
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    reasoning = m.get("reasoning") or m.get("reasoning_content")
    status = None
    if kind == "observation" and isinstance(content, str):
        content, status = split_status(content)
    return Message(
        role=role,
        content=content,
        status=status,
        status_full=record.status_full if status is not None else None,
        kind=kind,
        tool_calls=tuple(_history_call(c) for c in m.get("tool_calls") or ()),
        tool_call_id=m.get("tool_call_id"),
        name=m.get("name"),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        event_time=record.event_time,
    )

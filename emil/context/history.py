"""Immutable conversation history grouped into turns, with the game-time of what it carries.

A turn is what one trigger produced: the observation or chat message that started it, the
assistant's tool calls, their results, and any follow-up assistant messages. Messages never
change once created (the per-message token cache relies on it); trims build new histories.

``horizon(now)`` is the memory horizon: the age of the oldest game event still in the history
verbatim. The field notes' two-minute horizon is the number this makes visible.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from emil.context.status import status_change

__all__ = ["History", "Kind", "Message", "Role", "Turn"]

Role = Literal["system", "user", "assistant", "tool"]
Kind = Literal["system", "observation", "chat", "assistant", "tool_result", "memory"]

_ids = itertools.count(1)
_ROLE_KIND: dict[str, Kind] = {"system": "system", "assistant": "assistant", "tool": "tool_result"}


def _next_id() -> int:
    return next(_ids)


@dataclass(frozen=True, eq=False)
class Message:
    """One message, immutable; ``to_openai()`` is what goes on the wire.

    ``tool_calls`` items are ``{"id", "name", "arguments"}`` with ``arguments`` a JSON string.
    ``status`` (an Emil extension of the contract) is the live status snapshot riding on an
    observation: rendered after the content, and dropped by the ladder once a newer snapshot
    supersedes it. A history shows a new turn's status as the change since the status before it
    (:mod:`emil.context.status`); ``status_full`` is then the whole line (None: ``status`` is
    whole), shown again when the statuses before it leave (:meth:`History.status_based`). ``event_time`` is the unix time of the game event the message carries.
    ``kind`` defaults from the role (user -> "observation").
    """

    role: Role
    content: str | None = None
    kind: Kind = "observation"
    tool_calls: tuple[dict[str, str], ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    event_time: float | None = None
    id: int = field(default_factory=_next_id)
    status: str | None = None
    status_full: str | None = None
    _wire: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.role in _ROLE_KIND and self.kind == "observation":
            object.__setattr__(self, "kind", _ROLE_KIND[self.role])
        # Callers may pass a list; the message must stay immutable.
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    # Content equality (ids differ between equal messages built twice); the fingerprint holds
    # every field the wire form is built from, plus kind and time, so it is also the
    # token-cache key. repr of a tuple of strings, numbers and None is unambiguous, and half
    # the cost of JSON (no escaping of the quotes in JSON tool results).
    @cached_property  # a plain attribute read once computed: every request reads it per message
    def fingerprint(self) -> str:
        """Exact content key: equal fingerprints render and count identically."""
        calls = tuple((c["id"], c["name"], c["arguments"]) for c in self.tool_calls)
        key = (
            self.role, self.to_openai()["content"], self.reasoning, calls, self.tool_call_id,
            self.name, self.kind, self.event_time,
        )
        return repr(key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    @property
    def text(self) -> str:
        """Content plus the status snapshot, as rendered."""
        body = self.content or ""
        if self.status:
            return f"{body}\n\n{self.status}" if body else self.status
        return body

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-format dict for this message (built once; treat it as read-only)."""
        if self._wire is None:
            object.__setattr__(self, "_wire", self._build_wire())
        assert self._wire is not None
        return self._wire

    def _build_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.text}
        if self.role == "assistant":
            if not self.content and self.tool_calls:
                out["content"] = None
            if self.reasoning:
                out["reasoning"] = self.reasoning
            if self.tool_calls:
                out["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in self.tool_calls
                ]
        if self.role == "tool" and self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    def with_changes(self, **changes: Any) -> Message:
        """A new message (new id) with some fields replaced."""
        changes.setdefault("id", _next_id())
        return replace(self, **changes)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content, kind="system")

    @classmethod
    def observation(cls, content: str, *, event_time: float | None = None, status: str | None = None) -> Message:
        return cls("user", content, kind="observation", event_time=event_time, status=status)

    @classmethod
    def chat(cls, content: str, *, event_time: float | None = None) -> Message:
        return cls("user", content, kind="chat", event_time=event_time)

    @classmethod
    def assistant(
        cls, content: str | None = None, *, tool_calls: Iterable[dict[str, str]] = (),
        reasoning: str | None = None, event_time: float | None = None,
    ) -> Message:
        return cls("assistant", content, kind="assistant", tool_calls=tuple(tool_calls),
                   reasoning=reasoning, event_time=event_time)

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str, *, event_time: float | None = None) -> Message:
        return cls("tool", content, kind="tool_result", tool_call_id=tool_call_id, event_time=event_time)

    @classmethod
    def memory(cls, content: str, *, event_time: float | None = None) -> Message:
        return cls("user", content, kind="memory", event_time=event_time)


Turn = tuple[Message, ...]


@dataclass(frozen=True)
class History:
    """Turns of messages plus the rolling memory note; every change returns a new History.

    ``memory`` is the digest of folded turns (kind "memory"); the manager renders it right
    after the system prompt so the system+tools prefix stays cached across trims. ``notes`` is
    the pinned notes block (what Emil remembers across restarts, emil.memory), rendered before
    the memory note; only the ``refresh_notes`` rung changes it, so only at trims.
    """

    turns: tuple[Turn, ...] = ()
    memory: Message | None = None
    notes: Message | None = None

    def append(self, message: Message) -> History:
        """Add a message to the newest turn (starting one if there is none); a status it
        carries is shown as the change since the newest status held (:meth:`start_turn`)."""
        if not self.turns:
            return self.start_turn(message)
        return replace(self, turns=(*self.turns[:-1], (*self.turns[-1], self._as_change(message))))

    def start_turn(self, message: Message) -> History:
        """Begin a new turn with this message (an observation or chat). Its status, when it has
        one, is shown as the change since the newest status the history holds
        (:func:`emil.context.status.status_change`; the whole line kept as ``status_full``);
        the message as held is ``turns[-1][0]``."""
        return replace(self, turns=(*self.turns, (self._as_change(message),)))

    def latest_status(self) -> str | None:
        """The whole line of the newest status held (None: none)."""
        for turn in reversed(self.turns):
            for m in reversed(turn):
                if m.status:
                    return m.status_full or m.status
        return None

    def _as_change(self, message: Message) -> Message:
        if not message.status or message.status_full is not None:
            return message
        shown = status_change(self.latest_status(), message.status)
        if shown == message.status:
            return message
        return message.with_changes(status=shown, status_full=message.status, id=message.id)

    def status_based(self) -> History:
        """This history with its oldest status shown whole: the statuses before it, which its
        change was read against, have left (a trim; only the ladder calls this)."""
        for i, turn in enumerate(self.turns):
            for j, m in enumerate(turn):
                if m.status:
                    if m.status_full is None:
                        return self
                    whole = m.with_changes(status=m.status_full, status_full=None)
                    return replace(self, turns=(*self.turns[:i], (*turn[:j], whole, *turn[j + 1 :]), *self.turns[i + 1 :]))
        return self

    def extend(self, messages: Iterable[Message]) -> History:
        """:meth:`append` each message in turn."""
        history = self
        for message in messages:
            history = history.append(message)
        return history

    def messages(self) -> list[Message]:
        """Every message, oldest first (the memory note and the notes are not included)."""
        return [message for turn in self.turns for message in turn]

    def __len__(self) -> int:
        return sum(len(turn) for turn in self.turns)

    def oldest_event_time(self) -> float | None:
        """Game time of the oldest event still held verbatim (the memory note not included)."""
        times = (m.event_time for turn in self.turns for m in turn if m.event_time is not None)
        return min(times, default=None)

    def horizon(self, now: float) -> float | None:
        """Seconds since the oldest game event still held verbatim; None if none is timed."""
        oldest = self.oldest_event_time()
        return None if oldest is None else max(0.0, now - oldest)

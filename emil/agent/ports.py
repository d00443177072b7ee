"""What the agent loop and the turn engine need from the world, the context window, the model,
the recording and the clock.

The loop depends on these small protocols only (and on the world's, :class:`emil.world.port.WorldPort`,
the one protocol of Emil's body that every driver's world implements);
adapters (:mod:`emil.agent.context_port`, :mod:`emil.agent.world_port`, the completer bound in
:mod:`emil.agent.startup`) build them from the real parts (the context manager, the mineflayer
bridge, the recovering LLM client), and tests drive the loop with doubles of them. Keeping the
seam here means a change in one area's API touches one adapter, not the loop.

The turn engine (:mod:`emil.agent.turn`) is handed what differs between its drivers (live,
replay, the synthetic day) through the same kind of seam: the world (a
:class:`~emil.world.port.WorldPort`), :class:`TurnRecorder` (or :data:`NULL_RECORDER`), :class:`Clock`, and the :data:`Recall`,
:data:`Interruption` and :data:`Stopping` callables; :class:`Interrupted` is how a driver's model
or world says an interrupt cut the turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from emil.context.history import Message
from emil.context.ladder import TrimRecord
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.types import Completion, ToolCall
from emil.world.events import GameEvent

__all__ = [
    "NULL_RECORDER",
    "AssemblyView",
    "Clock",
    "Completer",
    "ContextPort",
    "Interrupted",
    "Interruption",
    "Recall",
    "Stopping",
    "TurnRecorder",
]


class AssemblyView(Protocol):
    """What the loop reads from one assembled prompt."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...
    @property
    def predicted_tokens(self) -> int: ...
    @property
    def trims(self) -> Sequence[TrimRecord]: ...
    @property
    def shared_prefix_tokens(self) -> int: ...
    @property
    def horizon_s(self) -> float | None: ...
    @property
    def message_ids(self) -> Sequence[int | None] | None:
        """Immutable ids of ``messages`` when known (lets the recorder skip hashing them)."""
        ...


class ContextPort(Protocol):
    """The conversation: history plus the budgeted prompt assembly."""

    system_prompt: str
    tools: list[dict[str, Any]]

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        """Append to history (``new_turn`` starts a turn group); returns the message as stored
        (the history's own :class:`~emil.context.history.Message`: one type from loop to
        recording)."""
        ...

    def assemble(self, limit: int | None = None) -> AssemblyView:
        """Build the prompt within budget (or within ``limit``); trims persist in history."""
        ...

    def observe_usage(self, predicted: int, actual: int) -> None:
        """Feed the server's prompt count back into calibration."""
        ...

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` as the served model counts it (sizes an observation to its cap)."""
        ...

    async def prepare(self) -> None:
        """Between turns, off the hot path: the trim ladder's preparation (e.g. a summary the
        model writes for the next trim). The loop cancels it when a turn starts."""
        ...


Completer = Callable[[Assembler, Callable[[RecoveryEvent], None]], Awaitable[Completion]]
"""Sends one step's request with recovery (``complete_with_recovery`` bound to an LLM and the
endpoint's Patience): ``await completer(assemble, on_event)`` where ``assemble(limit)`` builds
the request and ``on_event`` receives the recovery events (overflow, retry, recovered,
transient, server_fault, gave_up...). It waits out outages itself; what it raises fails the
turn (or, for configuration errors, the session)."""


class Interrupted(Exception):
    """The turn was interrupted: raised by a driver's model (a model call cancelled) or world (an
    action aborted); ``reason`` is what the tool result and the turn record say."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TurnRecorder(Protocol):
    """Where a turn's records go (:class:`emil.recording.Recorder`, or :data:`NULL_RECORDER`)."""

    def write(self, record: Any) -> None: ...
    def message(self, msg: Message, *, turn: int | None = None) -> str: ...
    def request_refs(
        self, messages: list[dict[str, Any]], *, turn: int | None = None, ids: Any = None
    ) -> list[str]: ...


class _NullRecorder:
    """Records nothing (replay and the synthetic day keep no recording of their own)."""

    def write(self, record: Any) -> None:
        pass

    def message(self, msg: Message, *, turn: int | None = None) -> str:
        return ""

    def request_refs(
        self, messages: list[dict[str, Any]], *, turn: int | None = None, ids: Any = None
    ) -> list[str]:
        return []


NULL_RECORDER: TurnRecorder = _NullRecorder()


def _wall() -> float:
    return time.time()


def _monotonic() -> float:
    return time.monotonic()


@dataclass(frozen=True)
class Clock:
    """Wall time (unix seconds: an observation without events is dated by it) and monotonic
    time (the turn's figures); live, the process's clocks, read at each call."""

    wall: Callable[[], float] = _wall
    monotonic: Callable[[], float] = _monotonic


Recall = Callable[[list[GameEvent], Mapping[str, Any] | None], str | None]
"""The turn's recalled lines from its events and status snapshot (None: nothing to add)."""

Interruption = Callable[[ToolCall], str | None]
"""Before a call runs: the reason an interrupt is pending (None: none). Asked once per turn
until one is; every later call of the turn is not run either."""
Stopping = Callable[[ToolCall | None], bool]
"""Before a call runs: True when Emil is stopping (the call is not run, and the turn ends);
asked with None after a step's calls: is Emil stopping now (the turn ends there)?"""

"""What the agent loop needs from the world, the context window and the model.

The loop depends on these small protocols only; adapters (:mod:`emil.agent.context_port`,
:mod:`emil.agent.world_port`, the completer bound in :mod:`emil.agent.startup`) build them from
the real parts (the context manager, the mineflayer bridge, the recovering LLM client), and
tests drive the loop with doubles of them. Keeping the seam here means a change in
one area's API touches one adapter, not the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from emil.context.history import Message
from emil.context.ladder import TrimRecord
from emil.events import GameEvent
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.world.tool import Outcome  # the one tool-result type; the loop reads and makes them

__all__ = [
    "AssemblyView",
    "Completer",
    "ContextPort",
    "Message",
    "Outcome",
    "TrimRecord",
    "WorldPort",
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

    async def prepare(self) -> None:
        """Between turns, off the hot path: the trim ladder's preparation (e.g. a summary the
        model writes for the next trim). The loop cancels it when a turn starts."""
        ...


class WorldPort(Protocol):
    """Emil's body: events in, snapshot, tools out."""

    def events(self) -> AsyncIterator[GameEvent]:
        """Game events until the world goes away for good."""
        ...

    async def snapshot(self) -> Mapping[str, Any]:
        """Status for the observation (position, health, inventory, nearby...)."""
        ...

    async def run_tool(self, call: ToolCall, *, limit_s: float, requesters: frozenset[str] = frozenset()) -> Outcome:
        """Validate and run one tool call; model mistakes come back as ``ok=False`` text.

        ``requesters``: every player whose words are in the turn (operator-only acts need all
        of them to be operators).
        """
        ...

    async def abort(self) -> None:
        """Abort whatever action is running (idempotent)."""
        ...


Completer = Callable[
    [Callable[[int | None], ChatRequest], Callable[[Any], None]], Awaitable[Completion]
]
"""Sends one step's request with overflow recovery (``complete_with_recovery`` bound to an
LLM): ``await completer(assemble, on_event)`` where ``assemble(limit)`` builds the request and
``on_event`` receives the recovery events (overflow, retry, recovered, gave_up...)."""

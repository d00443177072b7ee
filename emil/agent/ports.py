"""What the agent loop needs from the world, the context window and the model.

The loop depends on these small protocols only; adapters in :mod:`emil.agent.wiring` build
them from the real parts (the mineflayer bridge, the context manager, the recovering LLM
client), and tests drive the loop with doubles of them. Keeping the seam here means a change in
one area's API touches one adapter, not the loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from emil.events import GameEvent
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.world.tool import Outcome  # the one tool-result type; the loop reads and makes them

__all__ = [
    "AssemblyView",
    "Completer",
    "ContextPort",
    "NewMessage",
    "Outcome",
    "StoredMessage",
    "TrimView",
    "WorldPort",
]

MessageKind = Literal["observation", "chat", "assistant", "tool_result", "memory"]


@dataclass(frozen=True)
class NewMessage:
    """A message the loop adds to history (the context adapter assigns its id)."""

    role: Literal["user", "assistant", "tool"]
    kind: MessageKind
    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Items are ``{"id", "name", "arguments": <JSON string>}``."""
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    event_time: float | None = None
    """Unix time of the oldest game event this message carries (memory horizon)."""
    status: str | None = None
    """The live status line riding on an observation (rendered after the content; the trim
    ladder drops it once a newer observation supersedes it)."""


class StoredMessage(Protocol):
    """A message once in history (emil.context.history.Message satisfies this)."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def event_time(self) -> float | None: ...
    def to_openai(self) -> dict[str, Any]: ...


class TrimView(Protocol):
    """One trim the context manager made (emil.context TrimRecord satisfies this)."""

    @property
    def rung(self) -> str: ...
    @property
    def messages_touched(self) -> int: ...
    @property
    def tokens_freed(self) -> int: ...
    @property
    def horizon_after_s(self) -> float | None: ...
    @property
    def tokens_before(self) -> int: ...
    @property
    def tokens_after(self) -> int: ...


class AssemblyView(Protocol):
    """What the loop reads from one assembled prompt."""

    @property
    def messages(self) -> list[dict[str, Any]]: ...
    @property
    def predicted_tokens(self) -> int: ...
    @property
    def trims(self) -> Sequence[TrimView]: ...
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

    def add(self, message: NewMessage, *, new_turn: bool = False) -> StoredMessage:
        """Append to history (``new_turn`` starts a turn group) and return the stored message."""
        ...

    def assemble(self, limit: int | None = None) -> AssemblyView:
        """Build the prompt within budget (or within ``limit``); trims persist in history."""
        ...

    def observe_usage(self, predicted: int, actual: int) -> None:
        """Feed the server's prompt count back into calibration."""
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

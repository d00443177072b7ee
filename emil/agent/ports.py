"""What the agent loop needs from the world, the context window and the model.

The loop depends on these small protocols only (and on the world's, :class:`emil.world.port.WorldPort`);
adapters (:mod:`emil.agent.context_port`, :mod:`emil.agent.world_port`, the completer bound in
:mod:`emil.agent.startup`) build them from the real parts (the context manager, the mineflayer
bridge, the recovering LLM client), and tests drive the loop with doubles of them. Keeping the seam here means a change in
one area's API touches one adapter, not the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from emil.context.history import Message
from emil.context.ladder import TrimRecord
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.types import Completion

__all__ = ["AssemblyView", "Completer", "ContextPort"]


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

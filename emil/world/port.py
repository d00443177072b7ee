"""What the agent needs from Emil's body: the world port.

The live body is the mineflayer bridge (:class:`emil.agent.world_port.BotWorld`); memory wraps
any port to learn from what passes through (:class:`emil.memory.world.RememberingWorld`); tests
and the offline tools have their own. Declared here, in the world package, so that every layer
above the world can name it without depending on the agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from emil.events import GameEvent
from emil.llm.types import ToolCall
from emil.trust.authority import Authority
from emil.world.tool import Outcome

__all__ = ["TurnWords", "WorldPort"]


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


@runtime_checkable
class TurnWords(Protocol):
    """A world that is told each turn's words before its first call (the live body: its guard
    decides whose words may order what, emil.world.guard). Worlds without a guard (tests, the
    offline tools) need not be."""

    async def begin_turn(self, words: Authority) -> Sequence[Outcome]:
        """The turn's chat lines (who said what); returns what the world did on them before
        the model (commands operators confirmed), for the turn's record and observation."""
        ...

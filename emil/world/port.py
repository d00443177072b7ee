"""Emil's body as everything above the world sees it: one protocol and one per-turn context.

:class:`WorldPort` is the one way to run a tool call as Emil: ``run_tool(call, turn)``, with the
same signature at every layer. Behaviour is added by wrapping, each wrapper a ``WorldPort``
holding the next one (as httpx transports or pydantic-ai's wrapper toolsets stack): live, the
loop's action scope (:class:`emil.agent.loop.LiveWorld`: the time limit, the abort, the
interrupt) around memory (:class:`emil.memory.world.RememberingWorld`: notes and the archive)
around the body (:class:`emil.world.actions.BotWorld`: the tool, its trust rows through the
guard, the bot). Replay and the synthetic day implement the same protocol. Nothing a wrapper
needs from below is recovered by ``isinstance`` or attribute forwarding: it is in the protocol,
or handed to it when it is built.

:class:`TurnContext` is what one turn is, made once by the turn engine and passed down
unchanged: the turn's words (who said what; the requesters are their speakers) and the time
limit of one action. The guard learns who spoke from it once, at :meth:`WorldPort.begin_turn`.
Declared here, in the world package, so every layer above the world can name them.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from emil.llm.types import ToolCall
from emil.trust.authority import Authority, Line
from emil.world.events import GameEvent
from emil.world.tool import Outcome

__all__ = ["TurnContext", "WorldPort"]


@dataclass(frozen=True)
class TurnContext:
    """One turn as Emil's body sees it (made once per turn by the turn engine)."""

    words: Authority = field(default_factory=Authority)
    """The turn's chat lines as the server attributed them: who said what (none: Emil acts on
    its own)."""
    limit_s: float = math.inf
    """The time limit of one action of the turn (live: ``action_timeout_s``; the bridge has
    each tool's own)."""
    turn: int | None = None
    """The turn's number in its session (None: outside any turn)."""

    @property
    def requesters(self) -> frozenset[str]:
        """Every player whose words are in the turn (operator-only acts need all of them to
        be operators)."""
        return self.words.requesters

    @classmethod
    def of(cls, *requesters: str, limit_s: float = math.inf) -> TurnContext:
        """A turn on these players' words, their text unknown (so no command is in them): for
        callers outside the turn engine (tests, staging, tools)."""
        return cls(Authority(tuple(Line(name, "") for name in sorted(requesters))), limit_s)


class WorldPort(Protocol):
    """Emil's body: events in, snapshot, the turn's words, tools out."""

    def events(self) -> AsyncIterator[GameEvent]:
        """Game events until the world goes away for good."""
        ...

    async def snapshot(self) -> Mapping[str, Any] | None:
        """Status for the observation (position, health, inventory, nearby...); None: no
        status this turn (replay: the recording has none)."""
        ...

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        """A turn starts on ``turn``'s words, before its observation; returns what the world
        did on them before the model (commands operators confirmed), for the turn's record and
        observation. A world without a guard returns nothing."""
        ...

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        """Run one call of ``turn``; model mistakes, refusals and failed actions come back as
        ``ok=False`` text, never exceptions. Live, :class:`emil.agent.ports.Interrupted` when
        an interrupt aborted it."""
        ...

    async def abort(self) -> None:
        """Abort whatever action is running (idempotent)."""
        ...

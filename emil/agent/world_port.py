"""The world port over a body the tools act on: the mineflayer bridge live, the simulated body of
the synthetic day (emil.offline.sim_world): events, snapshot, tools, abort.

Live, every tool call passes the guard (emil.world.guard: the rule table of docs/trust.md) with
the words of the turn; the guard sees every event (chests placed and removed, players met) and
every snapshot (what Emil carries) on the way through, and keeps its ownership ledger in
``data_dir/ownership.json``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from emil.config import Settings
from emil.events import GameEvent
from emil.llm.types import ToolCall
from emil.trust.authority import Authority, Line
from emil.trust.ledger import Ledger
from emil.world.actions import dispatch
from emil.world.guard import Guard
from emil.world.tool import ActionPolicy, BotLike, MemoryPort, Outcome

__all__ = ["OWNERSHIP_FILE", "Body", "BotWorld", "action_policy", "guard_for"]

OWNERSHIP_FILE = "ownership.json"
"""The ownership ledger's file in ``data_dir`` (emil.trust.ledger)."""


class Body(BotLike, Protocol):
    """What the world port needs of a body: the tools' interface, its events, an abort."""

    @property
    def events(self) -> AsyncIterable[GameEvent]: ...

    async def abort(self) -> object:
        """Abort the running job (what it returns is the body's own business)."""
        ...


def action_policy(s: Settings) -> ActionPolicy:
    """What the operator allows, from the settings (each turn adds its requesters)."""
    return ActionPolicy(settings=s)


def guard_for(settings: Settings, ledger: Ledger | None = None) -> Guard:
    """The guard the settings describe (the ledger in data_dir unless given)."""
    return Guard(settings, ledger if ledger is not None else Ledger.open(settings.data_dir / OWNERSHIP_FILE))


class BotWorld:
    """Emil's body through the tools: the agent loop's :class:`~emil.world.port.WorldPort`.

    With a ``guard`` (live: :func:`guard_for`), every call passes it with the turn's words;
    without one (the synthetic day's scripted people), each call gets a guard made from the
    policy and its requesters (no words known, so no command is in them)."""

    def __init__(self, bot: Body, policy: ActionPolicy, *, guard: Guard | None = None,
                 memory: MemoryPort | None = None) -> None:
        self.bot = bot
        self.policy = policy
        self.guard = guard
        self.memory = memory
        """The session's archive and notes, for the memory tools (None: no memory)."""

    async def events(self) -> AsyncIterator[GameEvent]:
        async for event in self.bot.events:
            if self.guard is not None:
                self.guard.observe(event)
            yield event

    async def snapshot(self) -> Mapping[str, Any]:
        snap: Any = await self.bot.snapshot()
        data = snap.model_dump(mode="json") if isinstance(snap, BaseModel) else dict(snap)
        if self.guard is not None:
            self.guard.observe_snapshot(data)
        return data

    async def begin_turn(self, words: Authority) -> Sequence[Outcome]:
        """A turn starts on these words: the guard's per-turn caps start over, and the commands
        operators confirmed in them are sent (what the world did, for the turn's record)."""
        if self.guard is None:
            return ()
        self.guard.begin_turn(words)
        return await self.guard.run_confirmed(self.bot)

    async def run_tool(self, call: ToolCall, *, limit_s: float, requesters: frozenset[str] = frozenset()) -> Outcome:
        # Each tool has its own time limit in the bridge; limit_s is the loop's backstop.
        policy = self.policy.model_copy(update={"requesters": requesters})
        if self.guard is None:
            return await dispatch(self.bot, call, policy, memory=self.memory)
        if requesters != self.guard.requesters():  # a caller that did not begin the turn: no words known
            self.guard.begin_turn(Authority(tuple(Line(name, "") for name in sorted(requesters))))
        return await dispatch(self.bot, call, policy, self.guard, memory=self.memory)

    async def abort(self) -> None:
        await self.bot.abort()

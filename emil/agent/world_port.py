"""The world port over a body the tools act on: the mineflayer bridge live, the simulated body of
the synthetic day (emil.offline.sim_world): events, snapshot, tools, abort."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Protocol

from pydantic import BaseModel

from emil.config import Settings
from emil.events import GameEvent
from emil.llm.types import ToolCall
from emil.world.actions import dispatch
from emil.world.tool import ActionPolicy, BotLike, MemoryPort, Outcome

__all__ = ["Body", "BotWorld", "action_policy"]


class Body(BotLike, Protocol):
    """What the world port needs of a body: the tools' interface, its events, an abort."""

    @property
    def events(self) -> AsyncIterable[GameEvent]: ...

    async def abort(self) -> object:
        """Abort the running job (what it returns is the body's own business)."""
        ...


def action_policy(s: Settings) -> ActionPolicy:
    """What the operator allows, from the settings (each turn adds its requesters)."""
    return ActionPolicy(allow_commands=s.allow_commands, operators=frozenset(s.operators),
                        disabled=frozenset(s.disabled_tools))


class BotWorld:
    """Emil's body through the tools: the agent loop's :class:`~emil.world.port.WorldPort`."""

    def __init__(self, bot: Body, policy: ActionPolicy, *, memory: MemoryPort | None = None) -> None:
        self.bot = bot
        self.policy = policy
        self.memory = memory
        """The session's archive and notes, for the memory tools (None: no memory)."""

    async def events(self) -> AsyncIterator[GameEvent]:
        async for event in self.bot.events:
            yield event

    async def snapshot(self) -> Mapping[str, Any]:
        snap: Any = await self.bot.snapshot()
        if isinstance(snap, BaseModel):
            return snap.model_dump(mode="json")
        return dict(snap)

    async def run_tool(self, call: ToolCall, *, limit_s: float, requesters: frozenset[str] = frozenset()) -> Outcome:
        # Each tool has its own time limit in the bridge; limit_s is the loop's backstop.
        return await dispatch(self.bot, call, self.policy.model_copy(update={"requesters": requesters}), memory=self.memory)

    async def abort(self) -> None:
        await self.bot.abort()

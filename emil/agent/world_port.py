"""The world port over the real mineflayer bridge (emil.world): events, snapshot, tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic import BaseModel

from emil.config import Settings
from emil.events import GameEvent
from emil.llm.types import ToolCall
from emil.world.actions import dispatch
from emil.world.bridge import Bot
from emil.world.tool import ActionPolicy, MemoryPort, Outcome

__all__ = ["BotWorld"]


class BotWorld:
    """Emil's body through the bridge: the agent loop's :class:`~emil.world.port.WorldPort`."""

    def __init__(self, bot: Bot, settings: Settings, *, memory: MemoryPort | None = None) -> None:
        self.bot = bot
        self.memory = memory
        """The session's archive and notes, for the memory tools."""
        self.policy = ActionPolicy(allow_commands=settings.allow_commands, operators=frozenset(settings.operators),
                                   disabled=frozenset(settings.disabled_tools))

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

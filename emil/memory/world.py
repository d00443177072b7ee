"""Emil's body with a memory: a :class:`~emil.world.port.WorldPort` that learns as it goes.

It forwards everything to the world it wraps and hands what passes through to the
:class:`~emil.memory.learn.Learner`: every game event (before the loop sees it), every status
snapshot, and every tool call with its outcome. The agent loop does not change; memory is
switched on by wrapping the world at start (:func:`emil.memory.session.open_memory`).

A note that cannot be written (disk full, database gone) must not cost Emil its turn: the
failure is logged once per kind and play goes on without that note.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from emil.events import GameEvent
from emil.llm.types import ToolCall
from emil.memory.learn import Learner
from emil.world.port import WorldPort
from emil.world.tool import Outcome

__all__ = ["RememberingWorld"]

_log = logging.getLogger("emil.memory")


class RememberingWorld:
    """``world`` plus a :class:`Learner` that writes notes from what passes through."""

    def __init__(self, world: WorldPort, learner: Learner) -> None:
        self.world = world
        self.learner = learner
        self._failed: set[str] = set()

    def _safely(self, what: str, learn: Callable[..., Any], *args: Any) -> Any:
        try:
            return learn(*args)
        except (sqlite3.Error, OSError) as e:
            if what not in self._failed:
                self._failed.add(what)
                _log.error("memory: could not write a note (%s: %s); playing on without it", what, e)
            return None

    async def events(self) -> AsyncIterator[GameEvent]:
        async for event in self.world.events():
            self._safely("event", self.learner.observe, event)
            yield event

    async def snapshot(self) -> Mapping[str, Any]:
        snap = await self.world.snapshot()
        self._safely("snapshot", self.learner.observe_snapshot, snap)
        return snap

    async def run_tool(self, call: ToolCall, *, limit_s: float, requesters: frozenset[str] = frozenset()) -> Outcome:
        valid = call.error is None and call.arguments is not None
        goal = self._safely("goal", self.learner.job_started, call.name, call.arguments, requesters) if valid else None
        status = "interrupted"
        try:
            outcome = await self.world.run_tool(call, limit_s=limit_s, requesters=requesters)
            status = "done" if outcome.ok else "failed"
        finally:
            # Cancelled (an urgent event aborted the action): "interrupted" is written here,
            # synchronously, before the cancellation goes on.
            self._safely("goal", self.learner.job_ended, goal, status)
        if valid:
            self._safely("tool", self.learner.tool_done, call.name, call.arguments, outcome.ok, requesters)
        return outcome

    async def abort(self) -> None:
        await self.world.abort()

    def __getattr__(self, name: str) -> Any:
        # Anything else (e.g. BotWorld.bot) is the wrapped world's: the wrapper is transparent.
        return getattr(self.world, name)

"""Emil's body with a memory: a :class:`~emil.world.port.WorldPort` that learns as it goes.

A wrapper: it holds the world below (the body, :class:`emil.world.actions.BotWorld`), passes
every call of the protocol to it unchanged and hands what passes through to the
:class:`~emil.memory.learn.Learner` and the :class:`~emil.memory.archivist.Archivist`: every
game event (before the loop sees it), every status snapshot, and every tool call with its
outcome. The agent loop does not change; memory is
switched on by wrapping the world at start (:func:`emil.memory.wiring.open_memory`).

A note that cannot be written (disk full, data_dir turned read-only) must not cost Emil its
turn: the first failure of an outage is one warning (:class:`~emil.memory.dbfile.Trouble`,
shared with the archive), and play goes on without that note.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from emil.llm.types import ToolCall
from emil.memory.archivist import Archivist
from emil.memory.dbfile import Trouble
from emil.memory.learn import Learner
from emil.world.events import GameEvent
from emil.world.port import TurnContext, WorldPort
from emil.world.tool import Outcome

__all__ = ["RememberingWorld"]

_log = logging.getLogger("emil.memory")


class RememberingWorld:
    """``world`` plus a :class:`Learner` that writes notes and an :class:`Archivist` that
    archives lines from what passes through; ``check`` runs at each turn's snapshot (the
    databases' between-turns check)."""

    def __init__(self, world: WorldPort, learner: Learner, archivist: Archivist | None = None,
                 *, check: Callable[[], None] | None = None, trouble: Trouble | None = None) -> None:
        self.world = world
        self.learner = learner
        self.archivist = archivist
        self._check = check
        self.trouble = trouble or (archivist.archive.trouble if archivist is not None else Trouble(learner.store.path.parent))
        """Where a failing write is said: one warning per outage of the disk."""

    def _safely(self, what: str, learn: Callable[..., Any], *args: Any) -> Any:
        try:
            return learn(*args)
        except (sqlite3.Error, OSError) as e:
            self.trouble.failed(what, e)
            return None

    async def events(self) -> AsyncIterator[GameEvent]:
        async for event in self.world.events():
            self._safely("event", self.learner.observe, event)
            if self.archivist is not None:
                self._safely("archive", self.archivist.observe, event)
            yield event

    async def snapshot(self) -> Mapping[str, Any] | None:
        if self._check is not None:
            self._safely("check", self._check)
        snap = await self.world.snapshot()
        if snap is not None:
            self._safely("snapshot", self.learner.observe_snapshot, snap)
        return snap

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return await self.world.begin_turn(turn)

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        requesters = turn.requesters
        valid = call.error is None and call.arguments is not None
        goal = self._safely("goal", self.learner.job_started, call.name, call.arguments, requesters) if valid else None
        status = "interrupted"
        try:
            outcome = await self.world.run_tool(call, turn)
            status = "done" if outcome.ok else "failed"
        finally:
            # Cancelled (an urgent event aborted the action): "interrupted" is written here,
            # synchronously, before the cancellation goes on.
            self._safely("goal", self.learner.job_ended, goal, status)
        if valid:
            self._safely("tool", self.learner.tool_done, call.name, call.arguments, outcome.ok, requesters)
            if self.archivist is not None:
                self._safely("archive", self.archivist.tool_done, call.name, call.arguments, outcome.ok, outcome.text)
        return outcome

    async def abort(self) -> None:
        await self.world.abort()

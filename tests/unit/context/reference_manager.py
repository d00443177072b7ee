"""The context manager as it was before the per-turn caches: the slow reference the fast path
must match exactly (tests only).

``ReferenceContextManager`` runs the same ``assemble`` but measures every prompt by walking
every message (no per-turn cache; every ladder candidate is measured whole), builds the wire list message by message, finds the shared
prefix key by key, and forgets the ladder's rewrite memo before every assembly (within one
assembly a rung tries each turn once, so the memo is never hit: the ladder then rewrites and
measures every candidate from scratch, as it used to). ``naive_oldest_event_time`` is the old
horizon walk.
"""

from __future__ import annotations

from typing import Any

from emil.context.history import History
from emil.context.incremental import BlockLayout
from emil.context.ladder import LadderState, Measure, Measurer
from emil.context.manager import Assembly, ContextManager

__all__ = ["ReferenceContextManager", "naive_oldest_event_time"]


def naive_oldest_event_time(history: History) -> float | None:
    times = [m.event_time for m in history.messages() if m.event_time is not None]
    return min(times) if times else None


class ReferenceContextManager(ContextManager):
    """A ContextManager with every fast path replaced by the plain one."""

    def _measure_all(self, history: History) -> tuple[int, BlockLayout]:
        head = [self.system] if history.memory is None else [self.system, history.memory]
        total, counts, keys = self.incremental.measure_turns_reference(head, history.turns, self.tools)
        return total, BlockLayout.flat(counts, keys)

    def _measure(self, state: LadderState) -> int:
        head = [self.system] if state.memory is None else [self.system, state.memory]
        return self.incremental.measure_turns_reference(head, state.turns, self.tools)[0]

    def _ladder_sizes(self) -> Measure | Measurer:
        return self._measure

    def _messages(self, history: History) -> list[dict[str, Any]]:
        return [dict(m.to_openai()) for m in self._sequence(history.turns, history.memory)]

    def _shared_prefix(self, layout: BlockLayout) -> tuple[int, bool]:
        previous = [] if self._previous_layout is None else self._previous_layout.keys()
        shared = 0
        same = 0
        for old, new, tokens in zip(previous, layout.keys(), layout.counts(), strict=False):
            if old != new:
                break
            shared += tokens
            same += 1
        extends = bool(previous) and same == len(previous)
        return shared, extends

    def assemble(
        self, history: History, *, limit: int | None = None, now: float | None = None
    ) -> Assembly:
        self.ladder._memo.clear()
        return super().assemble(history, limit=limit, now=now)

"""The summarise rung during replay: the summaries the recorded session made, never a model's.

A session's ``summarise`` rung folds turns into lines the served model wrote between turns; a
``summary`` record keeps each answer with the keys of the turns it covers. Replay serves those
lines to today's rung, so a trim that folded a summary live folds the same lines again and the
replayed requests match the recorded ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from emil.context.history import Turn
from emil.context.ladder import Preparation
from emil.memory.summary import note_lines, turn_key
from emil.recording import SummaryRecord

__all__ = ["RecordedSummaries"]


class RecordedSummaries:
    """A :class:`~emil.context.rungs.SummarySource` answering from ``summary`` records."""

    def __init__(self, records: Iterable[SummaryRecord]) -> None:
        self._by_first: dict[str, list[SummaryRecord]] = {}
        for r in records:
            if r.outcome == "ready" and r.covers and r.lines:
                self._by_first.setdefault(r.covers[0], []).append(r)

    async def prepare(self, preparation: Preparation) -> None:
        """Nothing to ask: the recording holds the answers."""

    def ready(self, turns: Sequence[Turn]) -> tuple[int, Sequence[str]] | None:
        if not turns:
            return None
        for r in reversed(self._by_first.get(turn_key(turns[0]), [])):
            n = len(r.covers)
            if n <= len(turns) and [turn_key(t) for t in turns[:n]] == r.covers:
                return n, note_lines(r.lines)
        return None

    def used(self, count: int) -> None:
        """Nothing to write: the facts went to the recorded session's notes."""

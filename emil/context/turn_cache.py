"""Per-turn values for a whole turn sequence, computed once per turn object.

The manager asks about every turn on every request (its block counts, its wire dicts, its
oldest event time), and the trim ladder asks about hundreds of candidate sequences that each
differ from the last one in a turn or two. Turns are immutable tuples that histories share, so a
value is computed once per turn object; a lookup diffs the sequence against the previous one by
identity (``operator.is_not`` mapped in C) and only touches the turns that changed, so a request
that appends to the newest turn costs O(changed turns), not O(history), in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress
from operator import is_not
from typing import Any, Generic, TypeVar

__all__ = ["PerTurn"]

T = TypeVar("T")
Turn = tuple[Any, ...]
"""A turn of messages (history.Turn; kept generic so history can use this module)."""


class PerTurn(Generic[T]):
    """``values(turns)`` = ``[compute(t) for t in turns]``, reusing the previous call's values for
    turns that are the very same objects at the same positions."""

    def __init__(self, compute: Callable[[Turn], T]) -> None:
        self._compute = compute
        # The previous sequence (held, so identities stay unique) and its values, replaced in
        # one assignment so that a concurrent caller always reads a matching pair.
        self._last: tuple[list[Turn], list[T]] = ([], [])

    def values(self, turns: Sequence[Turn]) -> list[T]:
        compute = self._compute
        n = len(turns)
        previous, last_values = self._last
        shift = 0
        # The ladder folds/evicts the oldest turns one by one: the sequence shifts left.
        if n and previous and turns[0] is not previous[0]:
            for k in range(1, min(4, len(previous))):
                if previous[k] is turns[0]:
                    shift = k
                    break
        values = last_values[shift : shift + n]
        for index in compress(range(n), map(is_not, turns, previous[shift:])):
            values[index] = compute(turns[index])
        values.extend(compute(turns[index]) for index in range(len(values), n))
        self._last = (list(turns), values)
        return list(values)

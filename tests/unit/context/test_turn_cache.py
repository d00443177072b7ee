"""PerTurn: per-turn values reused by identity, recomputed for every turn that changed."""

from __future__ import annotations

from typing import Any

from emil.context.turn_cache import PerTurn


def _turns(n: int) -> list[tuple[Any, ...]]:
    return [(f"turn {i}",) for i in range(n)]


def test_values_equal_computing_every_turn_and_only_changed_turns_are_computed() -> None:
    seen: list[tuple[Any, ...]] = []

    def compute(turn: tuple[Any, ...]) -> str:
        seen.append(turn)
        return str(turn[0]).upper()

    cache = PerTurn(compute)
    turns = _turns(6)
    assert cache.values(turns) == [compute(t) for t in turns]
    seen.clear()
    grown = [*turns, ("turn 6",)]
    assert cache.values(grown) == [
        "TURN 0",
        "TURN 1",
        "TURN 2",
        "TURN 3",
        "TURN 4",
        "TURN 5",
        "TURN 6",
    ]
    assert seen == [grown[-1]]
    seen.clear()
    replaced = list(grown)
    replaced[2] = ("other",)  # an equal-looking but new turn in the middle
    assert cache.values(replaced)[2] == "OTHER"
    assert seen == [replaced[2]]
    seen.clear()
    folded = replaced[2:]  # the oldest two turns folded: the sequence shifts left
    assert cache.values(folded) == ["OTHER", "TURN 3", "TURN 4", "TURN 5", "TURN 6"]
    assert seen == []
    shrunk = folded[:2]
    assert cache.values(shrunk) == ["OTHER", "TURN 3"]
    # A copy of a turn is another object: computed again (identity, not equality).
    copy = [tuple(list(t)) for t in shrunk]
    seen.clear()
    assert cache.values(copy) == ["OTHER", "TURN 3"]
    assert [t is c for t, c in zip(seen, copy, strict=True)] == [True, True]


def test_returned_lists_are_the_callers_own() -> None:
    cache = PerTurn(lambda turn: len(turn))
    turns = _turns(3)
    first = cache.values(turns)
    first[0] = 99
    assert cache.values(turns) == [1, 1, 1]

"""The manager's fast paths give exactly what plain counting gives.

Two shortcuts are left in the manager: block counts cached per message and summed (checked
against whole renders of the prompt, and the shared prefix against the real token prefix), and
the trim ladder's one-turn steps sized from the two turns involved (checked against a run in
which every ladder candidate is counted in full). Over synthetic play that trims often, both
runs must give the same Assembly request by request: messages, predicted tokens, trim records,
shared prefix, horizon, block counts and the trimmed history (compared by content; message ids
are fresh on both sides).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.manager import Assembly, ContextManager
from emil.context.tokens import get_token_counter
from emil.offline.budget_sweep import BudgetPoint, simulate
from emil.offline.piece_counter import CachedCounter
from emil.offline.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_trace,
    synthetic_turns,
)
from tests.unit.context.reference import PlainSizes

COUNTER = CachedCounter(get_token_counter("qwen3.6"))
TOOLS = emil_tool_specs()


def _steps(seed: int, turns: int) -> Iterator[tuple[bool, list[Message]]]:
    for turn in itertools.islice(synthetic_turns(seed), turns):
        yield from request_steps(turn)


def _content(history: History) -> tuple[list[str], str | None]:
    memory = None if history.memory is None else history.memory.fingerprint
    return [m.fingerprint for m in history.messages()], memory


def _view(a: Assembly) -> tuple[object, ...]:
    return (
        a.messages, a.predicted_tokens, a.trims, a.shared_prefix_tokens, a.extends_previous,
        a.horizon_s, a.prompt_budget, a.block_tokens, _content(a.history),
    )


def _play(seed: int, preserve: bool, window: int, *, check: bool) -> list[tuple[object, ...]]:
    budget = Budget(window, output_reserve=6144)
    manager = ContextManager(COUNTER, budget, SYSTEM_PROMPT, TOOLS, preserve_thinking=preserve)
    history = History()
    views: list[tuple[object, ...]] = []
    previous: list[int] = []
    for index, (new_turn, messages) in enumerate(_steps(seed, 90)):
        history = grow(history, new_turn, messages)
        # Now and then an overflow-recovery request with a forced smaller limit.
        limit = budget.prompt_budget - 3000 if index % 37 == 36 else None
        a = manager.assemble(history, limit=limit, now=2e9 + index)
        if check and index % 10 == 0:  # the cached sum and the prefix figure against renders
            text = manager.incremental.render(a.sequence, TOOLS)
            assert a.predicted_tokens == manager.incremental.count_whole(a.sequence, TOOLS)
            tokens = COUNTER.encode(text)
            common = next(
                (i for i, (x, y) in enumerate(zip(previous, tokens, strict=False)) if x != y),
                min(len(previous), len(tokens)),
            )
            assert a.shared_prefix_tokens <= common
        if check:
            previous = COUNTER.encode(manager.incremental.render(a.sequence, TOOLS))
        history = a.history
        views.append(_view(a))
    return views


@pytest.mark.parametrize(
    ("seed", "preserve", "window"), [(0, False, 22000), (1, True, 22000), (2, False, 14000)]
)
def test_assemblies_equal_the_reference_over_synthetic_play(
    seed: int, preserve: bool, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _play(seed, preserve, window, check=True)
    monkeypatch.setattr("emil.context.manager._Sizes", PlainSizes)
    slow = _play(seed, preserve, window, check=False)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow, strict=True):
        assert a == b
    # The session must exercise the ladder, repeatedly, or this proves little.
    assert sum(bool(v[2]) for v in fast) >= 5


@pytest.mark.parametrize("preserve", [True, False])
def test_a_sweep_point_is_the_same_with_the_reference_sizes(
    preserve: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = synthetic_trace(hours=1.0, seed=3, preserve_thinking=preserve)
    budget = Budget(window=24000, output_reserve=6144)

    def point() -> BudgetPoint:
        return replace(simulate(trace, budget, COUNTER), seconds=0.0)

    fast = point()
    monkeypatch.setattr("emil.context.manager._Sizes", PlainSizes)
    slow = point()
    assert fast.trims >= 5
    assert fast == slow

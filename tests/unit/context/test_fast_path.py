"""The manager's one shortcut, block counts cached per message and summed, is exact.

Over synthetic play that trims often (with and without ``preserve_thinking``, and overflow
recoveries that force a smaller limit), every prediction equals a whole render of the prompt,
the block counts add up to it, and the shared-prefix figure never claims more than the real
common token prefix with the previous prompt. A sweep point is the same whether or not the
sweep's managers share one counter.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from emil.context.budget import Budget
from emil.context.history import History
from emil.context.manager import ContextManager
from emil.model.cached import CachedCounter
from emil.model.family import family_by_name
from emil.model.resolve import get_token_counter
from emil.offline.simulate import SharedCaches, simulate
from emil.offline.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_trace,
    synthetic_turns,
)

QWEN36 = family_by_name("qwen3.6")
COUNTER = CachedCounter(get_token_counter("qwen3.6"))
TOOLS = emil_tool_specs()


# Windows sized for the pinned prompt with the 25 tools of issue #21 (about 4,000 tokens with
# the limit of a simulated recovery taking 3,000 more).
@pytest.mark.parametrize(
    ("seed", "preserve", "window"), [(0, False, 13800), (1, True, 13800), (2, False, 14800)]
)
def test_every_prediction_is_a_whole_render_over_synthetic_play(seed: int, preserve: bool, window: int) -> None:
    budget = Budget(window, output_reserve=6144)
    manager = ContextManager(COUNTER, budget, SYSTEM_PROMPT, TOOLS, preserve_thinking=preserve, family=QWEN36)
    history = History()
    previous: list[int] = []
    trims = previous_messages = 0
    steps = (s for t in itertools.islice(synthetic_turns(seed), 90) for s in request_steps(t))
    for index, (new_turn, messages) in enumerate(steps):
        history = grow(history, new_turn, messages)
        limit = budget.prompt_budget - 3000 if index % 37 == 36 else None  # an overflow recovery
        a = manager.assemble(history, limit=limit, now=2e9 + index)
        tokens = COUNTER.encode(manager.incremental.render(a.sequence, TOOLS))
        assert a.predicted_tokens == len(tokens)
        assert sum(a.block_tokens) + manager.incremental.generation_tokens() == a.predicted_tokens
        common = next(
            (i for i, (x, y) in enumerate(zip(previous, tokens, strict=False)) if x != y),
            min(len(previous), len(tokens)),
        )
        assert a.shared_prefix_tokens <= common
        assert not a.extends_previous or a.shared_prefix_tokens == sum(a.block_tokens[:previous_messages])
        previous, previous_messages = tokens, len(a.sequence)
        history = a.history
        trims += bool(a.trims)
    # The session must exercise the ladder, repeatedly, or this proves little.
    assert trims >= 5


@pytest.mark.parametrize("preserve", [True, False])
def test_a_sweep_point_is_the_same_with_shared_or_fresh_counters(preserve: bool) -> None:
    trace = synthetic_trace(hours=1.0, seed=3, preserve_thinking=preserve)
    budget = Budget(window=12000, output_reserve=6144)
    shared = SharedCaches()
    simulate(trace, Budget(window=14000, output_reserve=6144), COUNTER, shared=shared)  # warm
    warm = simulate(trace, budget, COUNTER, shared=shared)
    fresh = simulate(trace, budget, get_token_counter("qwen3.6"))
    assert warm.trims >= 5
    assert replace(warm, seconds=0.0) == replace(fresh, seconds=0.0)

"""The fast assembly path (per-turn caches, rewrite memo) gives exactly what the plain path gives.

Same histories in, the same Assembly out, request after request over synthetic play that trims
often: messages, predicted tokens, trim records, shared prefix, horizon, block counts, and the
trimmed history itself (compared by content; message ids are fresh on both sides).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

import pytest

from emil.context.budget import Budget
from emil.context.family import family_by_name
from emil.context.history import History, Message
from emil.context.manager import Assembly, ContextManager
from emil.context.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_turns,
)
from emil.context.tokens import get_token_counter
from emil.offline.budget_sweep import simulate
from emil.offline.piece_counter import CachedCounter
from emil.offline.synthetic import synthetic_trace
from emil.offline.trace import SessionTrace
from tests.unit.context.reference_manager import ReferenceContextManager, naive_oldest_event_time

QWEN36 = family_by_name("qwen3.6")
COUNTER = CachedCounter(get_token_counter("qwen3.6"))
TOOLS = emil_tool_specs()


def _steps(seed: int, turns: int) -> Iterator[tuple[bool, list[Message]]]:
    for turn in itertools.islice(synthetic_turns(seed), turns):
        yield from request_steps(turn)


def _content(history: History) -> tuple[list[str], str | None]:
    memory = None if history.memory is None else history.memory.fingerprint
    return [m.fingerprint for m in history.messages()], memory


def _same(fast: Assembly, slow: Assembly) -> None:
    assert fast.messages == slow.messages
    assert fast.predicted_tokens == slow.predicted_tokens
    assert fast.trims == slow.trims
    assert fast.shared_prefix_tokens == slow.shared_prefix_tokens
    assert fast.extends_previous == slow.extends_previous
    assert fast.horizon_s == slow.horizon_s
    assert fast.prompt_budget == slow.prompt_budget
    assert fast.block_tokens == slow.block_tokens
    assert _content(fast.history) == _content(slow.history)


@pytest.mark.parametrize(
    ("seed", "preserve", "window"), [(0, False, 22000), (1, True, 22000), (2, False, 14000)]
)
def test_fast_assemblies_equal_the_reference_over_synthetic_play(
    seed: int, preserve: bool, window: int
) -> None:
    budget = Budget(window, output_reserve=6144)
    fast = ContextManager(COUNTER, budget, SYSTEM_PROMPT, TOOLS, preserve_thinking=preserve, family=QWEN36)
    slow = ReferenceContextManager(
        COUNTER, budget, SYSTEM_PROMPT, TOOLS, preserve_thinking=preserve, family=QWEN36
    )
    fast_history = slow_history = History()
    requests = trims = 0
    for index, (new_turn, messages) in enumerate(_steps(seed, 90)):
        fast_history = grow(fast_history, new_turn, messages)
        slow_history = grow(slow_history, new_turn, messages)
        now = 2e9 + index
        # Now and then an overflow-recovery request with a forced smaller limit.
        limit = budget.prompt_budget - 3000 if index % 37 == 36 else None
        a = fast.assemble(fast_history, limit=limit, now=now)
        b = slow.assemble(slow_history, limit=limit, now=now)
        _same(a, b)
        if index % 10 == 0:  # and both equal the whole render (slow: every tenth request)
            head = [fast.system, *([a.history.memory] if a.history.memory else [])]
            whole = fast.incremental.count_whole([*head, *a.history.messages()], TOOLS)
            assert a.predicted_tokens == whole
        assert a.history.oldest_event_time() == naive_oldest_event_time(a.history)
        fast_history, slow_history = a.history, b.history
        requests += 1
        trims += bool(a.trims)
    # The session must exercise the ladder, repeatedly, or this proves little.
    assert trims >= 5, (requests, trims)


@pytest.mark.parametrize("preserve", [True, False])
def test_a_sweep_point_is_the_same_with_the_reference_manager(preserve: bool) -> None:
    trace: SessionTrace = synthetic_trace(hours=1.0, seed=3, preserve_thinking=preserve)
    budget = Budget(window=24000, output_reserve=6144)

    def reference(b: Budget, t: SessionTrace) -> ContextManager:
        return ReferenceContextManager(
            COUNTER, b, t.system_prompt, t.tools, t.enable_thinking,
            preserve_thinking=t.preserve_thinking, family=QWEN36,
        )

    fast = simulate(trace, budget, COUNTER)
    slow = simulate(trace, budget, COUNTER, manager_factory=reference)
    assert fast.trims >= 5
    assert replace(fast, seconds=0.0) == replace(slow, seconds=0.0)

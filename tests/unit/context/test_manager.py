"""ContextManager: exact counts, append-only prompts, batched trims, named budget errors."""

from __future__ import annotations

import itertools

import pytest

from emil.context.budget import Budget, Calibration
from emil.context.history import History, Message
from emil.context.manager import ContextManager
from emil.exceptions import BudgetError
from emil.model.family import family_by_name
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate
from emil.offline.synthetic import SYSTEM_PROMPT, emil_tool_specs, history_of, synthetic_turns

QWEN36 = family_by_name("qwen3.6")
COUNTER = get_token_counter("qwen3.6")
TOOLS = emil_tool_specs()


def _manager(window: int = 65536, **kwargs: object) -> ContextManager:
    return ContextManager(
        COUNTER, Budget(window, output_reserve=2048, margin=0), SYSTEM_PROMPT, TOOLS, **kwargs, family=QWEN36
    )  # type: ignore[arg-type]


def _history(turns: int, seed: int = 0) -> History:
    return history_of(list(itertools.islice(synthetic_turns(seed), turns)))


def test_prediction_is_the_exact_whole_render_count() -> None:
    manager = _manager()
    history = _history(12)
    assembly = manager.assemble(history, now=2e9)
    assert assembly.predicted_tokens == COUNTER.count(
        manager.incremental.render(assembly.messages, TOOLS)
    )
    assert assembly.trims == []
    assert assembly.history is history
    assert assembly.messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert (
        sum(assembly.block_tokens) + manager.incremental.generation_tokens()
        == assembly.predicted_tokens
    )


def test_appending_extends_the_previous_prompt() -> None:
    manager = _manager(preserve_thinking=True)
    history = _history(5)
    first = manager.assemble(history)
    assert first.shared_prefix_tokens == 0 and not first.extends_previous
    history = history.start_turn(Message.observation("Steve: hi", event_time=2e9))
    second = manager.assemble(history)
    assert second.extends_previous
    previous_blocks = sum(first.block_tokens)
    assert second.shared_prefix_tokens == previous_blocks
    # the block-granular figure never claims more than the real common token prefix
    a = COUNTER.encode(manager.incremental.render(first.messages, TOOLS))
    b = COUNTER.encode(manager.incremental.render(second.messages, TOOLS))
    common = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    assert second.shared_prefix_tokens <= common


def test_without_preserved_thinking_a_new_query_rewrites_the_last_turn() -> None:
    # Qwen's template renders <think> blocks only after the last user query, so the previous
    # turn's assistant messages change when the next observation arrives: the shared prefix
    # ends at the previous turn's first assistant message, and the manager says so.
    manager = _manager()
    history = _history(5)
    first = manager.assemble(history)
    second = manager.assemble(history.start_turn(Message.observation("Steve: hi")))
    assert not second.extends_previous
    last_turn = len(history.turns[-1])
    assert second.shared_prefix_tokens == sum(
        first.block_tokens[: len(first.block_tokens) - last_turn + 1]
    )


def test_over_budget_trims_to_the_low_water_mark_and_persists() -> None:
    manager = _manager(window=16384, preserve_thinking=True)
    budget = manager.effective_budget()
    history = _history(80)
    assert manager.count(history) > budget
    assembly = manager.assemble(history, now=2e9)
    assert assembly.trims
    assert assembly.predicted_tokens <= int(budget * manager.budget.low_water)
    assert assembly.predicted_tokens == COUNTER.count(
        manager.incremental.render(assembly.messages, TOOLS)
    )
    assert assembly.horizon_s is not None
    # the next turn extends the trimmed history without trimming again
    nxt = assembly.history.start_turn(Message.observation("next", event_time=2e9))
    again = manager.assemble(nxt, now=2e9)
    assert again.trims == []
    assert again.extends_previous


def test_pinned_parts_that_cannot_fit_raise_with_every_number() -> None:
    manager = ContextManager(
        COUNTER, Budget(6000, output_reserve=2048, margin=0), "x " * 3000, TOOLS, family=QWEN36
    )
    with pytest.raises(BudgetError) as info:
        manager.assemble(_history(1))
    text = str(info.value)
    for part in (
        "prompt budget 3952",
        "window 6000",
        "output reserve 2048",
        "margin 0",
        "system",
        "tools",
        "current turn opening",
    ):
        assert part in text


def test_limit_forces_a_smaller_prompt() -> None:
    manager = _manager()
    history = _history(30)
    full = manager.assemble(history).predicted_tokens
    limited = manager.assemble(history, limit=full // 2)
    assert limited.predicted_tokens <= full // 2
    assert limited.prompt_budget == full // 2


def test_calibration_disagreement_shrinks_the_budget() -> None:
    manager = ContextManager(
        COUNTER, Budget(65536, margin=100), SYSTEM_PROMPT, TOOLS, calibration=Calibration(100), family=QWEN36
    )
    before = manager.effective_budget()
    manager.observe_usage(10_000, 10_400)
    assert manager.effective_budget() == before - 600
    assert manager.calibration_report().worst_under == 400


def test_empty_history_is_refused() -> None:
    with pytest.raises(ValueError, match="empty history"):
        _manager().assemble(History())


def test_overflow_limit_keeps_the_action_the_current_turn_already_took() -> None:
    # An overflow recovery at step 2 forces a limit the prompt fits once old turns are gone,
    # though not down to the low-water mark. The say call and its result in the current turn
    # must stay, or the model no longer knows it answered and answers again.
    manager = _manager()
    call = {"id": "c1", "name": "say", "arguments": '{"text": "I heard you, alex"}'}
    newest = (
        Message.observation('[events]\n- alex says: "Emil, line 9"', event_time=2e9),
        Message.assistant(None, tool_calls=[call], event_time=2e9),
        Message.tool_result("c1", "said: 'I heard you, alex'", event_time=2e9),
    )
    history = History((*_history(30).turns, newest))
    alone = manager.count(History((newest,)))
    limit = alone + 10
    assert alone > int(limit * manager.budget.low_water)
    assembly = manager.assemble(history, limit=limit, now=2e9)
    assert assembly.predicted_tokens <= limit
    assert assembly.history.turns[-1] == newest
    assert "cut_newest" not in [t.rung for t in assembly.trims]


def test_a_template_that_is_not_additive_still_trims_exactly() -> None:
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    manager = ContextManager(
        COUNTER, Budget(2600, output_reserve=1024, margin=0), "You are Emil.", None,
        template=ChatTemplate.from_source(source),
    )
    history = _history(25)
    assembly = manager.assemble(history, now=2e9)
    assert manager.incremental.mode == "whole" and assembly.trims
    assert assembly.predicted_tokens == manager.incremental.count_whole(assembly.sequence)
    assert assembly.predicted_tokens <= manager.effective_budget()

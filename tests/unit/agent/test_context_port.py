"""The context port over the real context manager: a turn too big for the budget fails the turn
(a limit), never the session (a configuration error); the start-up check still stops Emil."""

from __future__ import annotations

import pytest

from emil.agent.context_port import ManagedContext
from emil.context.budget import Budget
from emil.context.history import Message
from emil.context.manager import ContextManager
from emil.exceptions import BudgetError, ConfigurationError, ContextOverflowError


def _context(window: int, reserve: int) -> ManagedContext:
    manager = ContextManager("qwen3.6", Budget(window, output_reserve=reserve), "You are Emil.", None, False)
    return ManagedContext(manager, "You are Emil.", [])


def test_an_observation_that_cannot_fit_fails_the_turn_not_the_session() -> None:
    ctx = _context(4096, 1024)
    ctx.check_fits()  # the pinned prompt fits: Emil starts
    ctx.add(Message(role="user", kind="observation", content="hello " * 5000), new_turn=True)
    with pytest.raises(ContextOverflowError, match="this turn cannot fit") as err:
        ctx.assemble()
    assert not isinstance(err.value, ConfigurationError)
    assert isinstance(err.value.__cause__, BudgetError)
    # the next turn fits again: the unfittable one is an old turn now, and old turns can go
    ctx.add(Message(role="user", kind="observation", content="hi Emil"), new_turn=True)
    assert ctx.assemble().predicted_tokens <= ctx.prompt_budget


def test_the_start_check_still_stops_a_budget_that_cannot_work() -> None:
    manager = ContextManager("qwen3.6", Budget(2048, output_reserve=1024), "You are Emil. " * 400, None, False)
    with pytest.raises(BudgetError, match="pinned"):
        ManagedContext(manager, manager.system_prompt, []).check_fits()


def test_the_start_check_warns_when_the_pinned_parts_crowd_out_the_conversation() -> None:
    # window 4096 - reserve 1024 - margin 256: a prompt budget of 2816; a trim frees 564 (20%)
    ctx = _context(4096, 1024)
    assert ctx.check_fits(notes_bound=1000) is None  # about 1,770 left: more than two trims' worth
    warning = ctx.check_fits(notes_bound=1500, recall_bound=200)
    assert warning is not None
    pinned = ctx.prompt_budget - int(warning.split("leaving ")[1].split(" ")[0])
    assert f"take {pinned}," in warning and "memory notes 1500 + recalled lines 200" in warning
    assert "a trim frees 564" in warning and "lower output_reserve, memory_tokens or recall_tokens" in warning
    assert 2816 - pinned < 2 * 564 <= 2816 - (pinned - 500)  # the boundary: 500 fewer notes would not warn


def test_count_text_counts_what_would_be_sent() -> None:
    ctx = _context(4096, 1024)
    assert ctx.count_text("<|im_start|>") > 1  # neutralised first: never one control token
    assert ctx.count_text("hello") == 1

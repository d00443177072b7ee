"""Property tests of the context manager over random histories.

Histories mix huge JSON tool results, unicode chat, reasoning, many small turns and one giant
turn. For every one: the assembled prompt's exact count (a whole render, tokenized) fits the
budget; no tool call lacks its result and no result lacks its call; the system prompt and the
current turn's opening message are intact; and assembling twice gives the same prompt.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.manager import Assembly, ContextManager
from emil.exceptions import BudgetError
from emil.model.family import family_by_name
from emil.model.resolve import get_token_counter
from emil.offline.synthetic import emil_tool_specs

QWEN36 = family_by_name("qwen3.6")
COUNTER = get_token_counter("qwen3.6")
TOOLS = emil_tool_specs()[:6]
SYSTEM = "You are Emil, a villager NPC. Be brief."

unicode_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=0, max_size=80
)
words = st.sampled_from(
    ["oak_log", "stone", "creeper", "Steve", "ça va ?", "日本語", "🙂", "(12, -64, 30)", "iron_ore"]
)


@st.composite
def json_result(draw: st.DrawFn, huge: bool) -> str:
    n = draw(st.integers(200, 900)) if huge else draw(st.integers(0, 6))
    blocks = [
        {"name": draw(words), "pos": [draw(st.integers(-3000, 3000)) for _ in range(3)]}
        for _ in range(min(n, 8))
    ]
    # Repeat a drawn sample to reach the size cheaply (drawing 900 items is slow).
    payload = {"ok": draw(st.booleans()), "blocks": blocks * max(1, n // 8)}
    return json.dumps(payload, ensure_ascii=False)


@st.composite
def turn(draw: st.DrawFn, index: int, giant: bool) -> tuple[Message, ...]:
    t = 1_800_000_000.0 + 20 * index
    text = draw(unicode_text) + " " + " ".join(draw(st.lists(words, max_size=12)))
    status = draw(st.none() | st.just(json.dumps({"hp": 20, "pos": [index, 64, -index]})))
    messages: list[Message] = [Message.observation(f"[t={t}] {text}", event_time=t, status=status)]
    for step in range(draw(st.integers(0, 4 if giant else 2))):
        calls = [
            {
                "id": f"c{index}_{step}_{k}",
                "name": draw(st.sampled_from([t["function"]["name"] for t in TOOLS])),
                "arguments": json.dumps(
                    {"x": draw(st.integers()), "block": draw(words)}, ensure_ascii=False
                ),
            }
            for k in range(draw(st.integers(1, 2)))
        ]
        reasoning = draw(st.none() | unicode_text.map(lambda s: s * 20))
        messages.append(
            Message.assistant(
                draw(st.none() | unicode_text), tool_calls=calls, reasoning=reasoning, event_time=t
            )
        )
        for call in calls:
            huge = giant or draw(st.integers(0, 9)) == 0
            messages.append(Message.tool_result(call["id"], draw(json_result(huge)), event_time=t))
    if draw(st.booleans()):
        messages.append(Message.assistant(draw(unicode_text), event_time=t))
    return tuple(messages)


@st.composite
def histories(draw: st.DrawFn) -> History:
    shape = draw(st.sampled_from(["mixed", "many_small", "one_giant"]))
    count = {
        "mixed": draw(st.integers(1, 25)),
        "many_small": draw(st.integers(30, 120)),
        "one_giant": 1,
    }[shape]
    turns = []
    for index in range(count):
        giant = shape == "one_giant" or (
            shape == "mixed" and index == count - 1 and draw(st.booleans())
        )
        if shape == "many_small":
            t = 1_800_000_000.0 + 5 * index
            turns.append((Message.chat(draw(words) + " " + draw(unicode_text), event_time=t),))
        else:
            turns.append(draw(turn(index, giant)))
    return History(tuple(turns))


def _orphans(messages: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    calls = {c["id"] for m in messages for c in (m.get("tool_calls") or [])}
    results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return calls - results, results - calls


def _manager(window: int) -> ContextManager:
    return ContextManager(COUNTER, Budget(window, output_reserve=1024, margin=64), SYSTEM, TOOLS, family=QWEN36)


def _check(assembly: Assembly, manager: ContextManager, history: History) -> None:
    exact = COUNTER.count(manager.incremental.render(assembly.messages, TOOLS))
    assert exact == assembly.predicted_tokens
    assert exact <= assembly.prompt_budget
    missing_results, missing_calls = _orphans(assembly.messages)
    assert not missing_results and not missing_calls
    assert assembly.messages[0] == {"role": "system", "content": SYSTEM}
    opening = history.turns[-1][0]
    assert opening.to_openai() in assembly.messages
    assert assembly.history.turns[-1][0] == opening


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=histories(), window=st.sampled_from([4096, 8192, 16384]))
def test_assembled_prompts_fit_and_keep_their_invariants(history: History, window: int) -> None:
    manager = _manager(window)
    try:
        assembly = manager.assemble(history, now=1_800_010_000.0)
    except BudgetError:
        # Only allowed when the pinned part alone does not fit.
        pinned = manager.incremental.count([manager.system, history.turns[-1][0]], TOOLS)
        assert pinned > manager.effective_budget()
        event("pinned part does not fit")
        return
    event("trimmed" if assembly.trims else "fits untrimmed")
    _check(assembly, manager, history)
    again = _manager(window).assemble(history, now=1_800_010_000.0)
    assert again.messages == assembly.messages
    assert again.trims == assembly.trims


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=histories())
def test_trimmed_history_keeps_fitting_as_turns_arrive(history: History) -> None:
    manager = _manager(8192)
    now = 1_800_010_000.0
    try:
        assembly = manager.assemble(history, now=now)
    except BudgetError:
        return
    current = assembly.history
    for k in range(3):
        current = current.start_turn(Message.observation(f"tick {k}", event_time=now + k))
        step = manager.assemble(current, now=now + k)
        _check(step, manager, current)
        current = step.history

"""Additivity: the cached per-message sum equals a whole render, position variants included."""

from __future__ import annotations

import itertools
import json
import logging
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emil.context.family import family_by_name
from emil.context.history import Message
from emil.context.incremental import IncrementalCounter, _flat_shared
from emil.context.ladder import LadderConfig, drop_reasoning, elide_results
from emil.context.template import ChatTemplate, TemplateError
from emil.context.tokens import get_token_counter

QWEN36 = family_by_name("qwen3.6")
COUNTER = get_token_counter("qwen3.6")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "dig",
            "description": "Dig a block <x,y,z>.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "say",
            "description": "Chat — à tous.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        },
    },
]

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60
) | st.sampled_from(
    [
        "",
        " ",
        "\n",
        "<think>x</think>",
        "<|im_end|>",
        "<tool_response>\nz\n</tool_response>",
        '{"pos": [1, -64, 3]}',
    ]
)


query = text.filter(lambda s: "<tool_response>" not in s)


@st.composite
def messages(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system(draw(text)))
    out.append(Message.observation(draw(query), status=draw(st.none() | query)))
    for _ in range(draw(st.integers(0, 8))):
        choice = draw(st.sampled_from(["user", "assistant", "calls", "tool"]))
        if choice == "user":
            out.append(Message.chat(draw(text)))
        elif choice == "assistant":
            out.append(Message.assistant(draw(text), reasoning=draw(st.none() | text)))
        elif choice == "calls":
            n = draw(st.integers(1, 3))
            calls = [
                {
                    "id": f"c{i}",
                    "name": draw(st.sampled_from(["dig", "say"])),
                    "arguments": json.dumps(
                        draw(
                            st.dictionaries(
                                st.sampled_from(["x", "text", "pos"]),
                                st.integers() | text | st.lists(st.integers(), max_size=3),
                                max_size=3,
                            )
                        ),
                        ensure_ascii=False,
                    ),
                }
                for i in range(n)
            ]
            out.append(
                Message.assistant(
                    draw(st.none() | text), tool_calls=calls, reasoning=draw(st.none() | text)
                )
            )
            for call in calls:
                out.append(Message.tool_result(call["id"], draw(text)))
        else:
            out.append(Message.tool_result("x", draw(text)))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=messages(),
    with_tools=st.booleans(),
    thinking=st.booleans(),
    preserve=st.booleans(),
    agp=st.booleans(),
)
def test_block_sum_equals_whole_render(
    msgs: list[Message], with_tools: bool, thinking: bool, preserve: bool, agp: bool
) -> None:
    tools = TOOLS if with_tools else None
    inc = IncrementalCounter(
        COUNTER, enable_thinking=thinking, preserve_thinking=preserve, add_generation_prompt=agp, family=QWEN36
    )
    whole = inc.count_whole(msgs, tools)
    block_sum = sum(inc.block_counts(msgs, tools)) + (inc._constant("gen") if agp else 0)
    assert block_sum == whole
    assert inc.count(msgs, tools) == whole
    assert inc.mode == "incremental"


def test_reasoning_variant_follows_the_last_query() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    thought = Message.assistant("done", reasoning="a long chain of thought " * 20)
    first = [Message.observation("go"), thought]
    later = [*first, Message.observation("next")]
    assert inc.count(first) == inc.count_whole(first)
    assert inc.count(later) == inc.count_whole(later)
    blocks_first = inc.block_counts(first)
    blocks_later = inc.block_counts(later)
    # after the last query the reasoning is rendered; once a new query arrives it is not
    assert blocks_first[1] > blocks_later[1] + 100


def test_cache_hits_on_the_second_count() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    msgs = [Message.system("sys"), Message.observation("hello"), Message.assistant("hi")]
    inc.count(msgs)
    misses = inc.stats["misses"]
    inc.count(msgs)
    assert inc.stats["misses"] == misses == 2  # the observation and the assistant; system is a head


def test_dict_messages_are_counted_too() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "hey"},
        {"role": "assistant", "content": "yo"},
    ]
    assert inc.count(msgs, TOOLS) == inc.count_whole(msgs, TOOLS)


def test_non_additive_template_falls_back_to_whole_render(caplog: pytest.LogCaptureFixture) -> None:
    # No special tokens between messages: text merges across blocks, so sums are wrong.
    source = "{% for m in messages %}{{ m.content }}{% endfor %}"
    inc = IncrementalCounter(COUNTER, ChatTemplate.from_source(source), family=QWEN36)
    msgs = [{"role": "user", "content": "ab"}, {"role": "user", "content": "cd"}]
    with caplog.at_level(logging.WARNING):
        assert inc.count(msgs) == COUNTER.count("abcd")
    assert inc.mode == "whole"
    assert "not additive" in caplog.text
    assert inc.count(msgs) == COUNTER.count("abcd")


def test_no_user_query_is_refused() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    with pytest.raises(TemplateError):
        inc.count([Message.system("only a system prompt")])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=messages(), preserve=st.booleans(), with_tools=st.booleans())
def test_turn_cached_count_equals_the_flat_count(
    msgs: list[Message], preserve: bool, with_tools: bool
) -> None:
    tools = TOOLS if with_tools else None
    inc = IncrementalCounter(COUNTER, preserve_thinking=preserve, family=QWEN36)
    head = [msgs[0]] if msgs[0].role == "system" else []
    body = msgs[len(head) :]
    # Turns as the history builds them: a new turn at every user message.
    turns: list[tuple[Message, ...]] = []
    for message in body:
        if message.role == "user" or not turns:
            turns.append((message,))
        else:
            turns[-1] = (*turns[-1], message)
    flat = inc.count_whole(msgs, tools)
    assert inc.count(msgs, tools) == flat
    assert inc.count_turns(head, turns, tools) == flat
    assert inc.count_turns(head, turns, tools) == flat  # cached turns
    # blocks and prefix keys come out identical to the flat walk, position by position
    assert inc.measure_turns(head, turns, tools) == inc.measure(msgs, tools)


def _synthetic_play(turns: int, seed: int = 3) -> tuple[list[Message], list[tuple[Message, ...]]]:
    from emil.context.synthetic import synthetic_turns

    played = [t.messages for t in itertools.islice(synthetic_turns(seed), turns)]
    return [Message.system("You are Emil.")], played


def test_swapping_or_dropping_an_old_turn_is_sized_by_the_turn_totals() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    head, played = _synthetic_play(12)
    turns = tuple(played)
    inc.count_turns(head, turns, TOOLS)  # the first count verifies the block sums, whole
    before = inc.count_turns(head, turns, TOOLS)
    freed: list[int] = []
    for index in (0, 4, 10):
        config = LadderConfig(elide_over_tokens=20, tokens_of=COUNTER.count)
        lighter = elide_results(turns[index], config) or drop_reasoning(turns[index])
        assert lighter is not None
        swapped, delta = inc.swap_turn(turns, index, lighter)
        assert delta is not None
        assert swapped == (*turns[:index], lighter, *turns[index + 1 :])
        # the candidate is known too (the ladder may keep it and swap again from there)
        back, undo = inc.swap_turn(swapped, index, turns[index])
        assert back == turns and undo == -delta
        assert inc.count_turns(head, swapped, TOOLS) == before + delta
        turns, before = swapped, before + delta
        freed.append(-delta)
    assert max(freed) > 0
    rest, dropped = inc.drop_oldest(turns)
    assert dropped is not None and rest == turns[1:]
    assert inc.count_turns(head, rest, TOOLS) == before + dropped


def test_turn_steps_it_cannot_size_are_left_to_a_full_count() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    head, played = _synthetic_play(6)
    turns = tuple(played)
    inc.count_turns(head, turns, TOOLS)
    inc.count_turns(head, turns, TOOLS)
    # the newest turn holds the last query: its blocks depend on it
    assert inc.swap_turn(turns, len(turns) - 1, turns[-1][:1])[1] is None
    # a sequence it never measured
    unknown = tuple(tuple(t) for t in reversed(turns))
    assert inc.swap_turn(unknown, 0, turns[0])[1] is None
    assert inc.drop_oldest(unknown)[1] is None
    # a replacement opening with a tool result would take its framing from the turn before
    tool_first = tuple(m for m in turns[1] if m.role != "user")
    assert tool_first[0].role == "assistant"
    assert inc.swap_turn(turns, 1, tool_first[1:])[1] is None


def test_layout_prefix_equals_the_flat_key_walk() -> None:
    inc = IncrementalCounter(COUNTER, family=QWEN36)
    head, played = _synthetic_play(30, seed=5)
    rng = random.Random(5)
    previous = None
    turns: tuple[tuple[Message, ...], ...] = ()
    memory: Message | None = None
    for turn in played:
        for size in range(1, len(turn) + 1):  # the newest turn grows message by message
            turns = (*turns[:-1], turn[:size]) if size > 1 else (*turns, turn[:1])
            roll = rng.random()
            if roll < 0.1 and len(turns) > 2:  # a fold: oldest turn out, note changed
                memory = Message.memory(f"[memory] note {rng.random()}")
                turns = turns[1:]
            elif roll < 0.2 and len(turns) > 2:  # a rewrite of an old turn
                i = rng.randrange(len(turns) - 1)
                turns = (*turns[:i], drop_reasoning(turns[i]) or turns[i], *turns[i + 1 :])
            h = head if memory is None else [*head, memory]
            total, layout = inc.measure_layout(h, turns, TOOLS)
            flat = inc.measure([*h, *(m for t in turns for m in t)], TOOLS)
            assert (total, layout.counts(), layout.keys()) == flat
            if previous is not None:
                assert layout.shared_prefix(previous) == _flat_shared(
                    previous.keys(), layout.keys(), layout.counts()
                )
            previous = layout

"""Additivity: the cached per-message sum equals a whole render, position variants included."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emil.context.history import Message
from emil.context.incremental import IncrementalCounter
from emil.model.family import family_by_name
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate, TemplateError

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

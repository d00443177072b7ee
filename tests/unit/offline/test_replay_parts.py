"""Replay's parts: recorded completions as an LLM, tool-call validity against the specs."""

from __future__ import annotations

import json

import pytest

from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.replay import RecordedLLM, ReplayExhausted, tool_call_problem
from tests.unit.offline.crafted import LOOK_AND_SAY_TOOLS as TOOLS


async def test_recorded_llm_answers_in_recorded_order_then_says_it_ran_out() -> None:
    answers = [Completion(content="one"), Completion(content="two")]
    llm = RecordedLLM(answers)
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    assert (await llm.complete(request)).content == "one"
    assert (await llm.complete(request)).content == "two"
    with pytest.raises(ReplayExhausted, match="request 3"):
        await llm.complete(request)
    assert len(llm.requests) == 3


@pytest.mark.parametrize(
    ("name", "raw", "problem"),
    [
        ("look_around", '{"radius": 8}', None),
        ("fly", "{}", "unknown tool"),
        ("look_around", "{radius: 8", "not JSON"),
        ("look_around", "[1]", "not a JSON object"),
        ("look_around", "{}", "missing required"),
        ("look_around", '{"radius": 8, "x": 1}', "unknown argument"),
        ("look_around", '{"radius": "far"}', "should be integer"),
        ("look_around", '{"radius": true}', "should be integer"),
        ("say", '{"text": "hi", "extra": 1}', None),
    ],
)
def test_tool_call_validity_against_the_specs(name: str, raw: str, problem: str | None) -> None:
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    call = ToolCall(id="c", name=name, raw_arguments=raw, arguments=parsed if isinstance(parsed, dict) else None)
    got = tool_call_problem(call, TOOLS)
    assert (got is None) if problem is None else (got is not None and problem in got)

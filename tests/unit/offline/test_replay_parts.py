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


def test_a_live_answer_is_set_beside_the_recorded_one() -> None:
    from emil.llm.types import Timings, Usage
    from emil.replay.engine import ReplayReport
    from emil.replay.live import compare_live
    from emil.replay.report import format_report

    recorded = Completion(
        tool_calls=[ToolCall(id="a", name="look_around", raw_arguments='{"radius": 8}', arguments={"radius": 8})],
        usage=Usage(prompt_tokens=900, completion_tokens=12), timings=Timings(total_s=0.8),
    )
    live = Completion(
        tool_calls=[ToolCall(id="b", name="say", raw_arguments="{}", arguments={})],
        usage=Usage(prompt_tokens=900, completion_tokens=30),
    )
    step = compare_live(3, 1, recorded, live, TOOLS, elapsed_s=0.25)
    assert step.recorded_calls == ("look_around",) and step.live_calls == ("say",)
    assert not step.same_calls and step.live_invalid == ("say: missing required argument(s) text",)
    assert (step.recorded_latency_s, step.live_latency_s) == (0.8, 0.25)
    down = compare_live(3, 2, recorded, None, TOOLS, elapsed_s=1.0, error="EndpointUnavailable: refused")
    report = ReplayReport(path="x", turns_total=1, steps_total=2, live=[step, down])
    text = format_report(report)
    assert "1/2 steps answered, 1 tool calls, 0/1 valid" in text
    assert "invalid: say: missing required argument(s) text" in text and "error: EndpointUnavailable" in text

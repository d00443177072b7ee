"""Replay's parts: recorded completions as an LLM, a live call judged by the one validation."""

from __future__ import annotations

import pytest

from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.replay import RecordedLLM, ReplayExhausted


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
        ("say", '{"text": "hi"}', None),
        ("fly", "{}", "unknown tool"),
        ("say", "{text: 1", "not valid JSON"),
        ("say", "[1]", "must be a JSON object"),
        ("say", "{}", "text: Field required"),
        ("say", '{"text": "hi", "x": 1}', "x: Extra inputs are not permitted"),
        ("give", '{"player": "alex", "item": "bread", "count": "many"}', "count: Input should be a valid integer"),
    ],
)
def test_a_live_call_is_judged_by_the_one_validation(name: str, raw: str, problem: str | None) -> None:
    """A live model's call is valid when Emil's tool classes say so, as in live play."""
    from emil.llm.client import parse_tool_call
    from emil.replay.live import compare_live

    live = Completion(tool_calls=[parse_tool_call("c", name, raw)])
    step = compare_live(1, 1, Completion(), live, elapsed_s=0.1)
    assert step.live_invalid == () if problem is None else problem in step.live_invalid[0]


def test_a_live_answer_is_set_beside_the_recorded_one() -> None:
    from emil.llm.types import Timings, Usage
    from emil.replay.live import compare_live
    from emil.replay.report import ReplayReport, format_report

    recorded = Completion(
        tool_calls=[ToolCall(id="a", name="look_around", raw_arguments='{"radius": 8}', arguments={"radius": 8})],
        usage=Usage(prompt_tokens=900, completion_tokens=12), timings=Timings(total_s=0.8),
    )
    live = Completion(
        tool_calls=[ToolCall(id="b", name="say", raw_arguments="{}", arguments={})],
        usage=Usage(prompt_tokens=900, completion_tokens=30),
    )
    step = compare_live(3, 1, recorded, live, elapsed_s=0.25)
    assert step.recorded_calls == ("look_around",) and step.live_calls == ("say",)
    assert not step.same_calls and step.live_invalid == ("say: invalid arguments for say: text: Field required",)
    assert (step.recorded_latency_s, step.live_latency_s) == (0.8, 0.25)
    down = compare_live(3, 2, recorded, None, elapsed_s=1.0, error="EndpointUnavailable: refused")
    report = ReplayReport(path="x", turns_total=1, steps_total=2, live=[step, down])
    text = format_report(report)
    assert "1/2 steps answered, 1 tool calls, 0/1 valid" in text
    assert "invalid: say: invalid arguments for say: text: Field required" in text and "error: EndpointUnavailable" in text

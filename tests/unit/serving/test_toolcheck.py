"""The tool-call gate's judging and counting, with an in-process scripted LLM (not a model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from emil.exceptions import ConfigurationError, EndpointUnavailable
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.serving.toolcheck import (
    LiveDecoding,
    Situation,
    load_situations,
    run_tool_check,
    situations_from_messages,
)


class _Say(BaseModel):
    text: str


class _Follow(BaseModel):
    player: str


MODELS: dict[str, type[BaseModel]] = {"say": _Say, "follow": _Follow}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in MODELS]


def validate(call: ToolCall) -> ToolCall:
    """A validator shaped like emil.world.actions.validate_tool_call (fills ``error``)."""
    model = MODELS.get(call.name)
    if model is None:
        return call.model_copy(update={"error": f"unknown tool {call.name!r}"})
    if call.arguments is None:
        return call.model_copy(update={"error": "arguments are not a JSON object"})
    try:
        model.model_validate(call.arguments)
    except ValidationError as exc:
        return call.model_copy(update={"error": str(exc).splitlines()[0]})
    return call


def _call(name: str, raw: str) -> ToolCall:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    return ToolCall(
        id="c", name=name, raw_arguments=raw, arguments=parsed if isinstance(parsed, dict) else None
    )


class ScriptedLLM:
    """Answers from a list, in order (scripted; records the requests)."""

    def __init__(self, answers: list[Completion | Exception]) -> None:
        self.answers = answers
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _completion(
    *calls: ToolCall, finish: str = "tool_calls", content: str | None = None
) -> Completion:
    return Completion(tool_calls=list(calls), finish_reason=finish, content=content)


SITUATION = Situation("greeting", ({"role": "user", "content": "Steve says: hi"},), expect=("say",))


async def test_all_valid_passes_and_sends_live_settings() -> None:
    llm = ScriptedLLM([_completion(_call("say", '{"text": "hi"}')) for _ in range(3)])
    decoding = LiveDecoding(temperature=0.7, enable_thinking=False, max_completion_tokens=6144)
    report = await run_tool_check(
        llm,
        system_prompt="You are Emil.",
        tools=TOOLS,
        situations=[SITUATION],
        validate=validate,
        repeats=3,
        decoding=decoding,
    )
    assert report.passed and report.valid == 3
    assert report.tool_calls == {"say": (3, 3)}
    request = llm.requests[0]
    assert request.messages[0] == {"role": "system", "content": "You are Emil."}
    assert request.tools == TOOLS and request.tool_choice is None
    assert request.temperature == 0.7 and request.max_completion_tokens == 6144
    assert all(a.chose_expected for a in report.attempts)


async def test_each_failure_kind_is_named_and_one_failure_fails_the_gate() -> None:
    llm = ScriptedLLM(
        [
            _completion(_call("say", '{"text": "hi"}')),
            _completion(_call("say", '{"text": "hi"')),  # broken JSON (the MTP failure mode)
            _completion(_call("dance", "{}")),
            _completion(_call("follow", '{"who": "Steve"}')),
            _completion(_call("say", '{"text": "hel'), finish="length"),
            _completion(content="I will say hi"),
            EndpointUnavailable("connection refused"),
        ]
    )
    report = await run_tool_check(
        llm, system_prompt="s", tools=TOOLS, situations=[SITUATION], validate=validate, repeats=7
    )
    assert [a.outcome for a in report.attempts] == [
        "valid",
        "invalid_json",
        "unknown_tool",
        "invalid_args",
        "truncated",
        "no_call",
        "error",
    ]
    assert not report.passed
    assert report.tool_calls["say"] == (1, 3)
    assert report.tool_calls["follow"] == (0, 1)
    text = report.format()
    assert "greeting" in text and "1/7" in text and "FAIL" in text
    assert "dance" in text
    data = report.to_dict()
    assert data["outcomes"]["invalid_json"] == 1 and data["valid"] == 1


async def test_threshold_below_one_and_allowed_plain_answers() -> None:
    relaxed = Situation("idle", ({"role": "user", "content": "[events] none"},), allow_no_call=True)
    llm = ScriptedLLM(
        [_completion(content="nothing to do")]
        + [_completion(_call("say", '{"text": "x"}')) for _ in range(3)]
        + [_completion(_call("say", "{"))]
    )
    report = await run_tool_check(
        llm,
        system_prompt="s",
        tools=TOOLS,
        situations=[relaxed, SITUATION],
        validate=validate,
        repeats=1,
        threshold=0.5,
    )
    assert report.attempts[0].outcome == "valid"  # plain answer allowed here
    assert report.passed  # 2/2 at threshold 0.5
    llm2 = ScriptedLLM([_completion(_call("say", '{"text": "x"}')), _completion(_call("say", "{"))])
    report2 = await run_tool_check(
        llm2,
        system_prompt="s",
        tools=TOOLS,
        situations=[SITUATION],
        validate=validate,
        repeats=2,
        threshold=0.9,
    )
    assert not report2.passed  # 1/2 < 0.9


def test_load_situations(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "situations": [
                    {"name": "a", "observation": "hello", "expect": ["say"]},
                    {
                        "name": "b",
                        "messages": [{"role": "user", "content": "x"}],
                        "allow_no_call": True,
                    },
                ]
            }
        )
    )
    a, b = load_situations(path)
    assert a.messages == ({"role": "user", "content": "hello"},) and a.expect == ("say",)
    assert b.allow_no_call
    path.write_text(
        json.dumps(
            {"situations": [{"name": "c", "messages": [{"role": "assistant", "content": "x"}]}]}
        )
    )
    with pytest.raises(ConfigurationError, match="must end with a user/tool message"):
        load_situations(path)
    path.write_text("{}")
    with pytest.raises(ConfigurationError, match="no situations"):
        load_situations(path)


def test_shipped_situations_load() -> None:
    shipped = Path(__file__).resolve().parents[3] / "prompts" / "tool_check_situations.json"
    situations = load_situations(shipped)
    assert len(situations) >= 6
    assert all(s.messages[-1]["role"] == "user" for s in situations)


def test_situations_from_recorded_requests_drop_system_and_sample() -> None:
    requests: list[tuple[str, list[dict[str, Any]]]] = [
        (
            f"r{i}",
            [{"role": "system", "content": "old prompt"}, {"role": "user", "content": str(i)}],
        )
        for i in range(10)
    ]
    requests.append(("bad", [{"role": "system", "content": "s"}]))
    situations = situations_from_messages(requests, limit=5)
    assert [s.name for s in situations] == ["r0", "r2", "r4", "r6", "r8"]
    assert all(s.messages[0]["role"] == "user" for s in situations)

"""The tool-call gate over real HTTP: the live client against the vLLM-dialect DOUBLE."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from emil.llm.client import OpenAIClient
from emil.llm.types import ToolCall
from emil.serving.toolcheck import LiveDecoding, Situation, run_tool_check
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow


class _Say(BaseModel):
    text: str


TOOLS = [
    {
        "type": "function",
        "function": {"name": "say", "description": "Say", "parameters": _Say.model_json_schema()},
    }
]


def _validate(call: ToolCall) -> ToolCall:
    if call.error is not None:
        return call
    if call.name != "say":
        return call.model_copy(update={"error": f"unknown tool {call.name}"})
    try:
        _Say.model_validate(call.arguments or {})
    except ValidationError as exc:
        return call.model_copy(update={"error": str(exc).splitlines()[0]})
    return call


def _scripted(request: ScriptRequest) -> Reply:
    """SCRIPTED: greet with a valid call; in the 'storm' situation emit broken JSON."""
    text = str(request.messages[-1].get("content"))
    if "storm" in text:
        return Reply(tool_calls=(ScriptedCall("say", '{"text": "run'),))
    if "idle" in text:
        return Reply(content="[scripted] nothing to do")
    return Reply(tool_calls=(ScriptedCall("say", {"text": "[scripted] hello"}),))


async def test_gate_over_http_counts_broken_json_and_sends_live_settings() -> None:
    situations = [
        Situation("greeting", ({"role": "user", "content": "Steve says: hi"},), expect=("say",)),
        Situation("storm", ({"role": "user", "content": "a storm"},)),
        Situation("idle", ({"role": "user", "content": "idle"},)),
    ]
    async with VLLMDouble(_scripted, window=65536) as double:
        async with OpenAIClient(double.base_url) as llm:
            report = await run_tool_check(
                llm,
                system_prompt="You are Emil.",
                tools=TOOLS,
                situations=situations,
                validate=_validate,
                repeats=3,
                decoding=LiveDecoding(temperature=0.6, max_completion_tokens=6144),
            )
        bodies = double.requests
    assert len(bodies) == 9
    body = bodies[0]
    assert body["messages"][0] == {"role": "system", "content": "You are Emil."}
    assert body["tools"] == TOOLS and "tool_choice" not in body  # as the live agent sends
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["temperature"] == 0.6
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 6144

    assert report.per_situation() == {"greeting": (3, 3), "storm": (0, 3), "idle": (0, 3)}
    assert {a.outcome for a in report.attempts if a.situation == "storm"} == {"invalid_json"}
    assert {a.outcome for a in report.attempts if a.situation == "idle"} == {"no_call"}
    assert report.tool_calls == {"say": (3, 6)}
    assert not report.passed

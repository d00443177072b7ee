"""The turn engine's plain parts: the request's shape, the observation cap, calls as history
keeps them, and the interrupt's reason (the engine's turns are tested through the loop)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from emil.agent.ports import Interrupted
from emil.agent.request_shape import RequestShape
from emil.agent.turn import history_call, observation_cap
from emil.llm.types import ToolCall

TOOLS = [{"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}]


@dataclass(frozen=True)
class _Settings:
    output_reserve: int = 512
    temperature: float | None = 0.7
    stream: bool = True
    enable_thinking: bool = True
    tool_choice: str = "auto"


def test_the_shape_carries_every_setting_into_each_request() -> None:
    shape = RequestShape.of(_Settings(), preserve_thinking=True, tools=TOOLS)
    request = shape.request([{"role": "user", "content": "hi"}], predicted_tokens=42)
    assert request.tools == TOOLS
    assert request.max_completion_tokens == 512
    assert request.temperature == 0.7
    assert request.stream is True
    assert request.enable_thinking is True
    assert request.preserve_thinking is True
    assert request.predicted_prompt_tokens == 42
    assert request.messages == [{"role": "user", "content": "hi"}]


def test_the_shape_sends_no_tools_when_there_are_none_and_each_setting_as_given() -> None:
    shape = RequestShape.of(
        _Settings(output_reserve=64, temperature=None, stream=False, enable_thinking=False),
        preserve_thinking=False, tools=[],
    )
    assert shape.tools is None  # an empty list is no tools, not "tools": []
    request = shape.request([], predicted_tokens=None)
    assert (request.max_completion_tokens, request.temperature, request.stream) == (64, None, False)
    assert (request.enable_thinking, request.preserve_thinking, request.predicted_prompt_tokens) == (False, False, None)


@pytest.mark.parametrize(
    ("setting", "prompt_budget", "cap"),
    [(None, None, None), (300, None, 300), (300, 40000, 300), (None, 40000, 10000), (None, 800, 256), (None, 1027, 256),
     (None, 1028, 257)],
)
def test_the_observation_cap_is_the_setting_else_a_quarter_of_the_budget_at_least_256(
    setting: int | None, prompt_budget: int | None, cap: int | None
) -> None:
    assert observation_cap(setting, prompt_budget) == cap


def test_history_keeps_a_call_as_written_or_empty_arguments_when_they_are_not_an_object() -> None:
    good = ToolCall(id="c1", name="say", raw_arguments='{"text": "hi"}', arguments={"text": "hi"})
    assert history_call(good) == {"id": "c1", "name": "say", "arguments": '{"text": "hi"}'}
    bad = ToolCall(id="c2", name="say", raw_arguments='["hi"]', arguments=None, error="not an object")
    assert history_call(bad) == {"id": "c2", "name": "say", "arguments": "{}"}


def test_an_interrupt_carries_its_reason() -> None:
    e = Interrupted("alex hit Emil")
    assert e.reason == "alex hit Emil"
    assert str(e) == "alex hit Emil"

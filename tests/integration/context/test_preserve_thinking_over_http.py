"""preserve_thinking end to end against the shipped vLLM-dialect DOUBLE (not vLLM) over real HTTP.

Qwen3.5/3.6's template strips earlier turns' reasoning unless ``preserve_thinking`` is true; the
double renders with the kwarg the request carries, so Emil's prediction must follow the same
setting in both modes, and the two modes must count differently on a history with reasoning.
"""

from __future__ import annotations

import itertools

import pytest

from emil.context import Budget, ContextManager
from emil.llm.client import OpenAIClient
from emil.llm.tokenize import ServerTokenizeCounter
from emil.llm.types import ChatRequest
from emil.offline.synthetic import SYSTEM_PROMPT, emil_tool_specs, history_of, synthetic_turns
from emil.testing.brains import echo_brain
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow


async def test_prediction_matches_the_double_with_and_without_preserve_thinking() -> None:
    tools = emil_tool_specs()
    history = history_of(list(itertools.islice(synthetic_turns(7), 12)))
    assert any(m.reasoning for m in history.messages())  # the modes can only differ with reasoning
    served_counts: dict[bool, int] = {}
    async with (
        VLLMDouble(echo_brain, window=32768) as double,
        OpenAIClient(double.base_url) as client,
    ):
        served = await client.discover()
        for preserve in (True, False):
            manager = ContextManager(
                served.id, Budget(served.max_model_len, output_reserve=2048), SYSTEM_PROMPT, tools,
                True, preserve_thinking=preserve,
            )
            assembly = manager.assemble(history)
            assert not assembly.trims  # the same messages go out in both modes
            counter = ServerTokenizeCounter(double.base_url, served.id)
            tokenized = await counter.count_prompt(
                assembly.messages, tools, enable_thinking=True, preserve_thinking=preserve
            )
            completion = await client.complete(
                ChatRequest(
                    messages=assembly.messages, tools=tools, max_completion_tokens=64,
                    enable_thinking=True, preserve_thinking=preserve,
                    predicted_prompt_tokens=assembly.predicted_tokens,
                )
            )
            assert double.requests[-1]["chat_template_kwargs"] == {
                "enable_thinking": True, "preserve_thinking": preserve,
            }
            assert completion.usage is not None
            assert completion.usage.prompt_tokens == tokenized == assembly.predicted_tokens
            served_counts[preserve] = completion.usage.prompt_tokens
        # Same messages, different rendering: kept reasoning costs tokens.
        assert served_counts[True] > served_counts[False]
        assert double.requests[0]["messages"] == double.requests[1]["messages"]

"""The context manager against a real HTTP server: the shipped vLLM-dialect DOUBLE (not vLLM).

The double counts prompts with the project's template and tokenizer, so these tests check the
plumbing end to end (the /tokenize path and payload, the window from /v1/models, usage fed back
into calibration), not the template against a real checkpoint's.
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


async def test_prediction_equals_the_servers_counts() -> None:
    tools = emil_tool_specs()
    history = history_of(list(itertools.islice(synthetic_turns(4), 140)))
    async with (
        VLLMDouble(echo_brain, window=32768) as double,
        OpenAIClient(double.base_url) as client,
    ):
        served = await client.discover()
        manager = ContextManager(
            served.id, Budget(served.max_model_len, output_reserve=2048), SYSTEM_PROMPT, tools
        )
        assembly = manager.assemble(history)
        assert assembly.trims  # 140 turns do not fit 32k: the window really came from the server
        counter = ServerTokenizeCounter(double.base_url, served.id)
        assert await counter.count_prompt(assembly.messages, tools) == assembly.predicted_tokens
        completion = await client.complete(
            ChatRequest(
                messages=assembly.messages,
                tools=tools,
                max_completion_tokens=64,
                predicted_prompt_tokens=assembly.predicted_tokens,
            )
        )
        assert completion.usage is not None
        manager.observe_usage(assembly.predicted_tokens, completion.usage.prompt_tokens)
        report = manager.calibration_report()
        assert (report.samples, report.exact) == (1, 1)
        assert manager.effective_budget() == served.max_model_len - 2048 - 256

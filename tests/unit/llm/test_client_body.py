"""The client sends its own body with ``AsyncOpenAI.post``: the same bytes ``create()`` sent.

The reference is the SDK's ``chat.completions.create`` (the path the client used before; it runs
the per-message TypedDict transform, ~300 ms on a 36k-token prompt). Both go through an httpx2
MockTransport (an in-process double of the server) that records every request, so this compares
what would reach the wire, headers included, and what each path parses out of the same answer.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from openai import AsyncOpenAI

from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest, Completion
from emil.testing.sdk_stream import SdkChunks

_TOOLS = [{"type": "function", "function": {
    "name": "say", "description": "Say something in chat.",
    "parameters": {"type": "object", "properties": {"message": {"type": "string"}},
                   "required": ["message"]}}}]

_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are Emil."},
    {"role": "user", "content": "さくら: Emil, viens ici 😀"},
    {"role": "assistant", "content": None, "reasoning": "She asked me to come.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "say", "arguments": "{\"message\": \"j'arrive\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
]

_ANSWER = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning": "Going there.",
        "tool_calls": [{"id": "c2", "type": "function",
                        "function": {"name": "say", "arguments": "{\"message\": \"ok\"}"}}]}}],
    "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57,
              "prompt_tokens_details": {"cached_tokens": 32}},
}


def _sse() -> bytes:
    base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                    "reasoning_content": "Hmm. "}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "On my way"}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "id": "c3", "type": "function",
            "function": {"name": "follow", "arguments": "{\"player\":"}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [{
            "index": 0, "function": {"arguments": " \"Mira\"}"}}]},
                              "finish_reason": "tool_calls"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 9,
                                          "total_tokens": 59}},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


class _Recorder:
    """Answers like vLLM would and keeps every request as it would have left the client."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if json.loads(request.content).get("stream"):
            return httpx2.Response(200, content=_sse(),
                                   headers={"content-type": "text/event-stream"})
        return httpx2.Response(200, json=_ANSWER)


def _client(recorder: _Recorder, **kwargs: Any) -> OpenAIClient:
    client = OpenAIClient("http://127.0.0.1:9/v1", model="m", api_key="k", **kwargs)
    client._client = AsyncOpenAI(
        base_url=client.base_url, api_key="k", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(recorder)),
    )
    return client


async def _via_create(client: OpenAIClient, request: ChatRequest) -> None:
    """The pre-change send: ``create(**kwargs)`` with the extra body beside the typed params."""
    kwargs: dict[str, Any] = {"model": client.model, "messages": request.messages,
                              "max_completion_tokens": request.max_completion_tokens,
                              "extra_body": client._body(request)}
    if request.tools:
        kwargs["tools"] = request.tools
    for name in ("tool_choice", "temperature", "top_p"):
        if getattr(request, name) is not None:
            kwargs[name] = getattr(request, name)
    create: Any = client._client.chat.completions.create
    if request.stream:
        stream = await create(**kwargs, stream=True, stream_options={"include_usage": True})
        async with stream:
            async for _ in stream:
                pass
    else:
        await create(**kwargs)


def _without_timings(completion: Completion) -> Completion:
    return completion.model_copy(update={"timings": None})


REQUESTS = {
    "defaults": ChatRequest(messages=_MESSAGES),
    "every option": ChatRequest(
        messages=_MESSAGES, tools=_TOOLS, tool_choice={"type": "function",
                                                       "function": {"name": "say"}},
        max_completion_tokens=512, temperature=0.7, top_p=0.8, top_k=20, enable_thinking=True,
        extra_body={"ignore_eos": True, "chat_template_kwargs": {"x": 1}}),
    "extra body overrides a typed field": ChatRequest(
        messages=_MESSAGES, tools=_TOOLS, tool_choice="required",
        extra_body={"max_completion_tokens": 99, "temperature": 0.0}),
}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", list(REQUESTS))
async def test_same_bytes_and_headers_as_create(name: str, stream: bool) -> None:
    request = REQUESTS[name].model_copy(update={"stream": stream})
    recorder = _Recorder()
    client = _client(recorder, extra_body={"min_tokens": 1})
    mine = await client.complete(request)
    await _via_create(client, request)
    await client.aclose()
    new, old = recorder.requests
    assert new.content == old.content
    assert new.url == old.url and new.method == old.method == "POST"
    assert dict(new.headers) == dict(old.headers)
    assert new.headers["authorization"] == "Bearer k"
    # and what came back parses into the same completion
    assert mine.model == "m"
    if stream:
        assert mine.content == "On my way" and mine.reasoning == "Hmm. "
        assert mine.tool_calls[0].arguments == {"player": "Mira"}
        assert mine.usage is not None and mine.usage.completion_tokens == 9
        assert mine.timings is not None and mine.timings.first_token_s is not None
    else:
        assert mine.reasoning == "Going there." and mine.finish_reason == "tool_calls"
        assert mine.tool_calls[0].arguments == {"message": "ok"}
        assert mine.usage is not None and mine.usage.cached_tokens == 32
    # the time the answer took, measured here: milliseconds against the recorder, not a clock
    assert mine.timings is not None and 0 <= mine.timings.total_s < 60


async def test_unset_options_are_absent_not_null() -> None:
    recorder = _Recorder()
    client = _client(recorder)
    await client.complete(ChatRequest(messages=_MESSAGES))
    await client.aclose()
    body = json.loads(recorder.requests[0].content)
    assert list(body) == ["model", "messages", "max_completion_tokens", "chat_template_kwargs"]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    # None inside messages is the caller's and is sent as given (vLLM accepts null content)
    assert body["messages"] == _MESSAGES and body["messages"][2]["content"] is None


async def test_both_paths_parse_the_same_answer() -> None:
    for stream in (False, True):
        request = ChatRequest(messages=_MESSAGES, tools=_TOOLS, stream=stream)
        recorder = _Recorder()
        client = _client(recorder)
        mine = await client.complete(request)

        class _ViaCreate(OpenAIClient):
            async def _post(self, request: ChatRequest) -> Any:
                kwargs = {"model": self.model, "messages": request.messages, "tools": request.tools,
                          "max_completion_tokens": request.max_completion_tokens,
                          "extra_body": self._body(request)}
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
                return raw.content

            async def _post_streaming(self, request: ChatRequest) -> Any:
                kwargs = {"model": self.model, "messages": request.messages, "tools": request.tools,
                          "max_completion_tokens": request.max_completion_tokens,
                          "extra_body": self._body(request)}
                return SdkChunks(await self._client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}))

        reference = _ViaCreate("http://127.0.0.1:9/v1", model="m", api_key="k")
        reference._client = client._client
        theirs = await reference.complete(request)
        await client.aclose()
        assert _without_timings(mine) == _without_timings(theirs)
        assert recorder.requests[0].content == recorder.requests[1].content


@pytest.mark.parametrize("preserve", [True, False])
async def test_both_template_kwargs_are_sent(preserve: bool) -> None:
    recorder = _Recorder()
    client = _client(recorder)
    await client.complete(ChatRequest(messages=_MESSAGES, enable_thinking=True,
                                      preserve_thinking=preserve))
    await client.aclose()
    body = json.loads(recorder.requests[0].content)
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "preserve_thinking": preserve}


def test_a_request_recorded_before_preserve_thinking_loads() -> None:
    old = ChatRequest.model_validate({"messages": _MESSAGES, "enable_thinking": True})
    assert old.preserve_thinking is None

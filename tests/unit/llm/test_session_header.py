"""The session key: one header (``session_header``, default ``X-Session-ID``) with the same value
on every request of a session (chat plain and streamed, ``/models``, ``/tokenize`` both async
and sync), beside the API key, never in place of it; its name checked at start.

The requests go through httpx MockTransports (in-process doubles of the server) that keep each
request as it would leave the client.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
from openai import AsyncOpenAI

from emil.agent.startup import new_client, new_session_id, session_headers
from emil.config import Settings, load_settings
from emil.exceptions import ConfigurationError
from emil.llm.client import OpenAIClient
from emil.llm.tokenize import ServerCounting, ServerTokenizeCounter
from emil.llm.types import ChatRequest

KEY = {"X-Session-ID": "Emil-0123456789ab"}
_ANSWER = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "hi"}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}
_SSE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}\n\ndata: [DONE]\n\n'
)
_MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "root": "r",
                                       "max_model_len": 4096}]}


def _answer(request: httpx2.Request) -> httpx2.Response:
    if request.url.path.endswith("/models"):
        return httpx2.Response(200, json=_MODELS)
    if json.loads(request.content).get("stream"):
        return httpx2.Response(200, content=_SSE, headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, json=_ANSWER)


def _client(seen: list[httpx2.Request], headers: dict[str, str] | None) -> OpenAIClient:
    client = OpenAIClient("http://127.0.0.1:9/v1", model="m", api_key="k", headers=headers)

    def keep(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return _answer(request)

    # the same SDK client the constructor made, on an in-process transport
    client._client = client._client.with_options(
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(keep))
    )
    assert isinstance(client._client, AsyncOpenAI)
    return client


async def test_every_chat_request_and_the_model_listing_carry_the_key() -> None:
    seen: list[httpx2.Request] = []
    client = _client(seen, KEY)
    await client.discover()
    await client.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    await client.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], stream=True))
    await client.aclose()
    assert [r.url.path for r in seen] == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
    for request in seen:
        assert request.headers["x-session-id"] == "Emil-0123456789ab"
        assert request.headers["authorization"] == "Bearer k"  # the key sits beside the API key
    # the body does not change: the key is a header only
    assert "user" not in json.loads(seen[1].content)


async def test_each_chat_request_has_its_own_request_id() -> None:
    """vLLM takes X-Request-Id as its request id (``chatcmpl-<id>`` in its log): numbered per
    request, every attempt counting, so no two requests of a session share one."""
    seen: list[httpx2.Request] = []
    client = _client(seen, KEY)
    client.request_id_prefix = "Emil-0123456789ab"
    for stream in (False, True, False):
        await client.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}], stream=stream))
    await client.aclose()
    assert [r.headers["x-request-id"] for r in seen] == [f"Emil-0123456789ab-{n}" for n in (1, 2, 3)]
    assert client.requests_sent == 3


async def test_no_headers_no_key() -> None:
    seen: list[httpx2.Request] = []
    client = _client(seen, None)
    await client.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    await client.aclose()
    assert "x-session-id" not in seen[0].headers and "x-request-id" not in seen[0].headers


async def test_tokenize_carries_the_key_async_and_sync() -> None:
    seen: list[httpx.Request] = []

    def keep(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"count": 3, "max_model_len": 4096, "tokens": [1, 2, 3]})

    async with httpx.AsyncClient(transport=httpx.MockTransport(keep)) as http:
        counter = ServerTokenizeCounter("http://127.0.0.1:9/v1", "m", client=http, api_key="k",
                                        headers=KEY)
        assert await counter.count_prompt([{"role": "user", "content": "hi"}]) == 3
        assert await counter.count("hi") == 3
    sync = ServerCounting("http://127.0.0.1:9/v1", "m", api_key="k", headers=KEY)
    sync._client = httpx.Client(transport=httpx.MockTransport(keep), headers=sync._client.headers)
    assert sync.count("hello there") == 3
    assert [r.url.path for r in seen] == ["/tokenize"] * 3
    for request in seen:
        assert request.headers["x-session-id"] == "Emil-0123456789ab"
        assert request.headers["authorization"] == "Bearer k"


async def test_the_clients_tokenize_fallback_sends_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class Spy(ServerTokenizeCounter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(kwargs)
            super().__init__(*args, **kwargs)

        async def count_prompt(self, *args: Any, **kwargs: Any) -> int:
            return 7

    monkeypatch.setattr("emil.llm.client.ServerTokenizeCounter", Spy)
    client = OpenAIClient("http://127.0.0.1:9/v1", model="m", headers=KEY)
    assert await client.count_prompt_tokens(ChatRequest(messages=[])) == 7
    await client.aclose()
    assert made[0]["headers"] == KEY


def test_the_key_is_the_bot_and_the_session() -> None:
    s = Settings(bot_name="Emil_2")
    sid = new_session_id()
    assert len(sid) == 12 and sid != new_session_id()
    assert session_headers(s, sid) == {"X-Session-ID": f"Emil_2-{sid}"}
    other = Settings(bot_name="Emil_2", session_header="X-User-ID")
    assert session_headers(other, sid) == {"X-User-ID": f"Emil_2-{sid}"}
    assert session_headers(Settings(session_header="off"), sid) == {}
    # a name a header value cannot hold as it is (a configured bot name is not checked as a
    # Minecraft name here) is reduced to what it can
    assert session_headers(Settings(bot_name="Émil bot\r\n"), sid) == {"X-Session-ID": f"_mil_bot__-{sid}"}


async def test_new_client_sends_the_sessions_key() -> None:
    client = new_client(Settings(bot_name="Mira"), session_id="abcdef012345")
    assert client.headers == {"X-Session-ID": "Mira-abcdef012345"}
    assert client.request_id_prefix == "Mira-abcdef012345"
    await client.aclose()
    fresh = new_client(Settings(bot_name="Mira"))
    assert fresh.headers["X-Session-ID"].startswith("Mira-")
    await fresh.aclose()


@pytest.mark.parametrize("value", ["off", "OFF", "none", ""])
def test_off_sends_none(value: str) -> None:
    assert load_settings(env={"EMIL_SESSION_HEADER": value}).settings.session_header == "off"


@pytest.mark.parametrize(("value", "why"), [
    ("X Session", "not an HTTP header name"),
    ("X-Session-ID:", "not an HTTP header name"),
    ("Authorization", "a header the client sends itself"),
    ("content-type", "a header the client sends itself"),
    ("X-Request-Id", "a header the client sends itself"),
])
def test_a_bad_header_name_stops_at_start(value: str, why: str) -> None:
    with pytest.raises(ConfigurationError, match="session_header") as e:
        load_settings(env={"EMIL_SESSION_HEADER": value})
    assert why in str(e.value)

"""The live client's discovery, /tokenize and error paths through an in-process transport double
(httpx2 MockTransport answering like vLLM; unit tests of the client only)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
import pytest
from openai import AsyncOpenAI

from emil.exceptions import (
    EndpointConfigError,
    EndpointUnavailable,
    ModelNotServedError,
    ServerFault,
)
from emil.llm.client import OpenAIClient, _is_transport_error, _map_error, _status_message
from emil.llm.types import ChatRequest

Handler = Callable[[httpx2.Request], httpx2.Response]


def _client(handler: Handler, **kwargs: Any) -> OpenAIClient:
    client = OpenAIClient("http://127.0.0.1:9/v1", api_key="k", **kwargs)
    client._client = AsyncOpenAI(base_url=client.base_url, api_key="k", max_retries=0,
                                 http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    return client


def _models(*entries: dict[str, Any]) -> Handler:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/models" and request.headers["authorization"] == "Bearer k"
        return httpx2.Response(200, json={"object": "list", "data": list(entries)})

    return handler


A = {"id": "a", "root": "org/a", "max_model_len": 4096}
B = {"id": "b", "root": "org/b", "max_model_len": 8192}


async def test_auto_takes_the_one_served_model(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="emil.llm.client")
    llm = _client(_models(A))
    served = await llm.discover()
    assert (served.id, served.root, served.max_model_len) == ("a", "org/a", 4096)
    assert llm.model == "a" and llm.served == served
    assert caplog.messages == ["llm: http://127.0.0.1:9/v1 serves a (root org/a), window 4096 tokens"]


@pytest.mark.parametrize("name", ["b", "org/b"])
async def test_a_configured_model_is_found_by_id_or_root(name: str) -> None:
    llm = _client(_models(A, B), model=name)
    assert (await llm.discover()).id == "b" and llm.model == "b"


async def test_what_is_not_served_says_what_is() -> None:
    with pytest.raises(ModelNotServedError) as err:
        await _client(_models(A, B), model="c").discover()
    assert str(err.value) == (
        "model 'c' is not served at http://127.0.0.1:9/v1; it serves: a (root org/a, window 4096), "
        "b (root org/b, window 8192). Set model (EMIL_MODEL / --model) to one of these ids or 'auto'.")
    with pytest.raises(ModelNotServedError) as err:
        await _client(_models(A, B)).discover()
    assert str(err.value) == (
        "model is 'auto' but http://127.0.0.1:9/v1 serves several: a (root org/a, window 4096), "
        "b (root org/b, window 8192). Set model (EMIL_MODEL / --model) to one of these ids.")
    with pytest.raises(ModelNotServedError, match=r"^http://127.0.0.1:9/v1/models lists no models at all$"):
        await _client(_models()).discover()


async def test_a_garbled_models_list_is_a_server_fault() -> None:
    llm = _client(lambda r: httpx2.Response(200, text="<html>"))
    with pytest.raises(ServerFault, match="model list"):
        await llm.discover()


@pytest.mark.parametrize(("status", "error"), [(503, EndpointUnavailable), (401, EndpointConfigError)])
async def test_models_list_failures_are_classified(status: int, error: type[Exception]) -> None:
    llm = _client(lambda r: httpx2.Response(status, json={"message": "no"}))
    with pytest.raises(error):
        await llm.list_models()


async def test_complete_discovers_first_when_the_model_is_auto() -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        if request.url.path == "/v1/models":
            return httpx2.Response(200, json={"data": [A]})
        assert json.loads(request.content)["model"] == "a"
        return httpx2.Response(200, json={"model": "a", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]})

    out = await _client(handler).complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))
    assert out.content == "hi" and seen == ["/v1/models", "/v1/chat/completions"]


async def test_count_prompt_tokens_asks_the_servers_tokenize_with_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[httpx.Request] = []
    real = httpx.AsyncClient

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"count": 1234, "max_model_len": 4096, "tokens": []})

    monkeypatch.setattr(httpx, "AsyncClient", lambda **kw: real(transport=httpx.MockTransport(answer), **kw))
    llm = OpenAIClient("http://127.0.0.1:9/v1", model="m", api_key="secret")
    request = ChatRequest(messages=[{"role": "user", "content": "x"}], enable_thinking=True, preserve_thinking=False)
    assert await llm.count_prompt_tokens(request) == 1234
    body = json.loads(sent[0].content)
    assert str(sent[0].url) == "http://127.0.0.1:9/tokenize" and sent[0].headers["authorization"] == "Bearer secret"
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "preserve_thinking": False}
    assert await OpenAIClient("http://127.0.0.1:9/v1", model="auto").count_prompt_tokens(request) is None


async def test_a_failing_tokenize_keeps_the_lower_bound(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    real = httpx.AsyncClient
    monkeypatch.setattr(httpx, "AsyncClient",
                        lambda **kw: real(transport=httpx.MockTransport(lambda r: httpx.Response(500)), **kw))
    llm = OpenAIClient("http://127.0.0.1:9/v1", model="m")
    with caplog.at_level(logging.WARNING, logger="emil.llm.client"):
        assert await llm.count_prompt_tokens(ChatRequest(messages=[])) is None
    assert caplog.messages[0].startswith("llm: /tokenize failed, keeping the lower bound: POST")


def _status_error(status: int, body: object, message: str = "") -> Any:
    import openai

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx2.Response(status, request=request)
    return openai.APIStatusError(message or f"Error code: {status} - {body}", response=response, body=body)


def test_status_messages_are_read_from_every_body_shape() -> None:
    assert _status_message(_status_error(400, {"message": "flat"})) == "flat"
    assert _status_message(_status_error(400, '{"error": {"message": "nested"}}')) == "nested"
    assert _status_message(_status_error(400, None, "Error code: 400 - {'error': {'message': 'repr'}}")) == "repr"
    assert _status_message(_status_error(400, {"message": 5}, "Error code: 400 - plain")) == "Error code: 400 - plain"


def test_transport_errors_are_recognised_by_their_library() -> None:
    assert _is_transport_error(httpx2.RemoteProtocolError("peer closed"))
    assert _is_transport_error(httpx.ReadError("reset"))
    assert not _is_transport_error(ValueError("a bug"))
    assert not _is_transport_error(KeyError("a bug"))


def test_error_mapping_keeps_status_and_server_message() -> None:
    down = _map_error(_status_error(503, {"message": "busy"}), model="m")
    assert isinstance(down, EndpointUnavailable) and down.status == 503
    assert str(down) == "LLM server answered HTTP 503: busy"
    config = _map_error(_status_error(400, {"message": "bad top_k"}), model="m")
    assert isinstance(config, EndpointConfigError) and config.server_message == "bad top_k" and config.status == 400
    refused = _map_error(httpx.ConnectError("refused"), model=None)
    assert isinstance(refused, EndpointUnavailable) and str(refused) == "LLM server unreachable: ConnectError: refused"

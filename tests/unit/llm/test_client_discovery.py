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
    RequestRejected,
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


@pytest.mark.parametrize("model", [None, "auto"])
async def test_complete_discovers_first_when_the_model_is_auto(model: str | None) -> None:
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        if request.url.path == "/v1/models":
            return httpx2.Response(200, json={"data": [A]})
        assert json.loads(request.content)["model"] == "a"
        return httpx2.Response(200, json={"model": "a", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]})

    out = await _client(handler, model=model).complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))
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
    assert body["messages"] == request.messages and body["model"] == "m" and "tools" not in body
    assert str(sent[0].url) == "http://127.0.0.1:9/tokenize" and sent[0].headers["authorization"] == "Bearer secret"
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "preserve_thinking": False}
    assert await OpenAIClient("http://127.0.0.1:9/v1", model="auto").count_prompt_tokens(request) is None


async def test_count_prompt_tokens_sends_the_tools_within_the_clients_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[httpx.Request] = []
    timeouts: list[object] = []
    real = httpx.AsyncClient

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"count": 77, "max_model_len": 4096, "tokens": []})

    def client(**kw: Any) -> httpx.AsyncClient:
        timeouts.append(kw.get("timeout"))
        return real(transport=httpx.MockTransport(answer), **kw)

    monkeypatch.setattr(httpx, "AsyncClient", client)
    tools = [{"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}]
    llm = OpenAIClient("http://127.0.0.1:9/v1/", model="m", timeout=7.5)  # a trailing slash too
    request = ChatRequest(messages=[{"role": "user", "content": "x"}], tools=tools)
    assert await llm.count_prompt_tokens(request) == 77
    assert json.loads(sent[0].content)["tools"] == tools  # tools are part of the prompt
    assert timeouts == [7.5] and str(sent[0].url) == "http://127.0.0.1:9/tokenize"


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
    rejected = _map_error(_status_error(400, {"message": "bad top_k"}), model="m")
    assert isinstance(rejected, RequestRejected) and rejected.server_message == "bad top_k" and rejected.status == 400
    assert str(rejected) == "the LLM server rejected this request (HTTP 400): bad top_k"
    config = _map_error(_status_error(401, {"message": "bad key"}), model="m")
    assert isinstance(config, EndpointConfigError) and config.server_message == "bad key" and config.status == 401
    refused = _map_error(httpx.ConnectError("refused"), model=None)
    assert isinstance(refused, EndpointUnavailable) and str(refused) == "LLM server unreachable: ConnectError: refused"


def test_the_client_is_built_as_configured() -> None:
    c = OpenAIClient("http://127.0.0.1:9/v1/")
    assert c.base_url == "http://127.0.0.1:9/v1" and c.root_url == "http://127.0.0.1:9"
    assert (c.api_key, c.timeout, c.first_token_timeout, c.model, c.served, c.tool_validator) == (
        "EMPTY", 120.0, None, None, None, None)
    assert str(c._client.base_url) == "http://127.0.0.1:9/v1/"
    assert c._client.max_retries == 0 and c._client.timeout == 120.0 and c._client.api_key == "EMPTY"


def test_transport_errors_of_every_http_library() -> None:
    import h11
    import httpcore

    assert _is_transport_error(httpcore.RemoteProtocolError("x"))
    assert _is_transport_error(h11.RemoteProtocolError("x"))


def test_timeouts_and_stream_errors_map_word_for_word() -> None:
    import openai

    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    timed_out = _map_error(openai.APITimeoutError(request), model=None)
    assert str(timed_out) == "LLM request timed out: Request timed out."
    fault = _map_error(openai.APIError("x" * 500, request, body=None), model=None)
    assert isinstance(fault, ServerFault) and fault.body == "x" * 400
    assert str(fault) == "the LLM server reported an error inside its answer: " + "x" * 500


def test_an_overflow_keeps_its_status_and_message() -> None:
    from emil.llm.classify import OverflowRejected

    msg = "Input length (5000) exceeds model's maximum context length (4096)."
    mapped = _map_error(_status_error(502, {"message": msg}), model="m")
    assert isinstance(mapped, OverflowRejected) and mapped.status == 502 and mapped.server_message == msg
    config = _map_error(_status_error(404, {"message": "gone"}), model="qwen")
    assert "'qwen'" in str(config)
    assert _status_message(_status_error(400, {"message": "flat"}, "Error code: 400")) == "flat"


async def test_list_models_has_its_own_time_limit() -> None:
    import anyio

    async def slow(request: httpx2.Request) -> httpx2.Response:
        await anyio.sleep(5)
        return httpx2.Response(200, json={"data": []})

    llm = _client(slow, timeout=0.2)  # type: ignore[arg-type]
    with pytest.raises(EndpointUnavailable, match=r"^GET /models: no answer within 0\.2 s$"):
        await llm.list_models()


def test_tool_calls_are_validated_and_the_template_kwargs_stay_apart() -> None:
    from emil.llm.client import parse_tool_call
    from emil.llm.types import ToolCall

    seen: list[ToolCall] = []

    def validate(call: ToolCall) -> ToolCall:
        seen.append(call)
        return call.model_copy(update={"error": "unknown tool"})

    c = OpenAIClient("http://127.0.0.1:9/v1", tool_validator=validate)
    assert c._tool_call("c1", "fly", "{}").error == "unknown tool" and len(seen) == 1
    assert c._tool_call("c2", "fly", "{bad").error is not None and len(seen) == 1  # bad JSON: not validated
    none = parse_tool_call("c3", "stop", None)
    assert none.raw_arguments == "" and none.arguments == {}
    body = c._body(ChatRequest(messages=[], extra_body={"structured_outputs": {"json": {"type": "object"}}}))
    assert body["structured_outputs"] == {"json": {"type": "object"}}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}

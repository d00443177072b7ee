"""The live client's pure parts: tool-call parsing, request bodies, error mapping, exports."""

from __future__ import annotations

import httpx2
import openai
import pytest

import emil.llm
import emil.llm.client
import emil.llm.overflow
import emil.llm.retry
import emil.testing.brains
import emil.testing.script
import emil.testing.vllm_double
import emil.testing.vllm_wordings
from emil.exceptions import EndpointConfigError, EndpointUnavailable
from emil.llm.client import OpenAIClient, _map_error, parse_tool_call
from emil.llm.retry import OverflowRejected
from emil.llm.types import ChatRequest, root_url_of


def test_tool_call_arguments_parse_or_come_back_as_data() -> None:
    ok = parse_tool_call("c1", "follow", '{"player": "Steve"}')
    assert ok.arguments == {"player": "Steve"} and ok.error is None
    empty = parse_tool_call("c2", "stop", "")
    assert empty.arguments == {} and empty.error is None
    broken = parse_tool_call("c3", "goto", '{"x": 1,')
    assert broken.arguments is None and broken.raw_arguments == '{"x": 1,'
    assert broken.error is not None and "not valid JSON" in broken.error
    listy = parse_tool_call("c4", "goto", "[1, 2]")
    assert listy.arguments is None and listy.error == "arguments must be a JSON object, got list"


def test_root_url() -> None:
    assert root_url_of("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    assert root_url_of("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert root_url_of("http://h:1") == "http://h:1"


def test_request_body_merges_thinking_top_k_and_passthrough() -> None:
    client = OpenAIClient("http://127.0.0.1:9/v1", model="m",
                          extra_body={"chat_template_kwargs": {"x": 1}, "ignore_eos": False})
    request = ChatRequest(messages=[], top_k=20, enable_thinking=True,
                          extra_body={"ignore_eos": True,
                                      "chat_template_kwargs": {"enable_thinking": False}})
    body = client._body(request)
    assert body["top_k"] == 20 and body["ignore_eos"] is True
    # the request's own chat_template_kwargs win over the flag and the client defaults merge in
    assert body["chat_template_kwargs"] == {"x": 1, "enable_thinking": False}


def _status_error(status: int, body: object) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    response = httpx2.Response(status, request=request, json=body)
    return openai.APIStatusError(f"Error code: {status} - {body}", response=response,
                                 body=body)


def test_errors_map_onto_the_policy_classes() -> None:
    overflow = _status_error(400, {"message": "This model's maximum context length is 4096 "
                                   "tokens. However, your request has 5000 input tokens."})
    mapped = _map_error(overflow, model="m")
    assert isinstance(mapped, OverflowRejected) and mapped.overflow.prompt_tokens == 5000
    assert isinstance(_map_error(_status_error(503, {"message": "busy"}), model="m"),
                      EndpointUnavailable)
    config = _map_error(_status_error(404, {"message": "The model `m` does not exist."}),
                        model="m")
    assert isinstance(config, EndpointConfigError) and config.status == 404
    assert "/v1/models" in str(config) and config.server_message.startswith("The model")
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert isinstance(_map_error(openai.APIConnectionError(request=request), model=None),
                      EndpointUnavailable)
    assert isinstance(_map_error(openai.APITimeoutError(request), model=None),
                      EndpointUnavailable)
    bug = ValueError("a bug")
    assert _map_error(bug, model=None) is bug  # bugs propagate unchanged


@pytest.mark.parametrize(
    "module",
    [emil.llm, emil.llm.client, emil.llm.overflow, emil.llm.retry, emil.testing.brains,
     emil.testing.script, emil.testing.vllm_double, emil.testing.vllm_wordings],
)
def test_all_lists_exactly_the_public_names(module: object) -> None:
    exported = set(module.__all__)  # type: ignore[attr-defined]
    assert all(hasattr(module, name) for name in exported)
    public = {n for n, v in vars(module).items() if not n.startswith("_")
              and getattr(v, "__module__", None) == module.__name__}  # type: ignore[attr-defined]
    assert public <= exported | {"Step"}

"""The double, checked against the real vLLM: the same request to both, the answers compared.

The double (emil.testing.vllm_double, a vLLM-dialect DOUBLE) serves here as the tier's server
does: the same model name, tokenizer and window, and the overflow rule of vLLM 0.32 (wording
``clamp``). For every behaviour the real server shows, the double must answer alike: the
status, the JSON body's shape (every field, by type), and the values a real server fixes
(counts, error messages, params). Where they differed, the double was fixed (the real server is
right). What stays different on purpose: the generated text (the double's is scripted), ids and
timestamps, the double's ``owned_by`` (it names itself) and its chat ``/tokenize`` token ids
(placeholders: it counts, it does not tokenize a chat). The faults the real server cannot be
made to produce stay the double's own: docs/llm.md lists them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from emil.serving.cpu_vllm import CpuVLLMServer
from emil.testing.brains import fixed_reply
from emil.testing.script import Reply, ScriptedCall
from emil.testing.vllm_double import VLLMDouble
from tests.integration.real_vllm.conftest import BLOCK_SIZE

_TEXT = " ".join(["the river runs past the old mill and the stone bridge"] * 40)


@pytest.fixture(scope="module")
def double(real_vllm: CpuVLLMServer) -> Iterator[VLLMDouble]:
    with VLLMDouble(
        fixed_reply(Reply(content=_TEXT)), model=real_vllm.model, tokenizer=real_vllm.model,
        window=real_vllm.options.max_model_len, wording="clamp", kv_block=BLOCK_SIZE,
    ) as d:
        yield d


Pair = tuple[httpx.Response, httpx.Response]


def _both(real: CpuVLLMServer, double: VLLMDouble, method: str, path: str, **kwargs: Any) -> Pair:
    answers = []
    for root in (real.root_url, double.root_url):
        with httpx.Client(base_url=root, timeout=120) as client:
            answers.append(client.request(method, path, **kwargs))
    return answers[0], answers[1]


def _shape(value: Any) -> Any:
    """The JSON's skeleton: every key, and each value's type."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{text} {time.time_ns()}"}]  # nothing cached


def _chat(real: CpuVLLMServer, **body: Any) -> dict[str, Any]:
    return {"model": real.model, **body}


def test_models_mirror(real_vllm: CpuVLLMServer, double: VLLMDouble) -> None:
    real, mirror = _both(real_vllm, double, "GET", "/v1/models")
    assert real.status_code == mirror.status_code == 200
    assert _shape(mirror.json()) == _shape(real.json())
    (r,), (m,) = real.json()["data"], mirror.json()["data"]
    assert (m["id"], m["max_model_len"], m["object"]) == (r["id"], r["max_model_len"], r["object"])
    assert (r["owned_by"], m["owned_by"]) == ("vllm", "vllm-dialect-double")  # named a double


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "the river, \u00e9t\u00e9 \U0001f600 {\"x\": 1.5}"},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
         "chat_template_kwargs": {"enable_thinking": False}},
    ],
    ids=["prompt", "messages", "no-thinking"],
)
def test_tokenize_mirror(real_vllm: CpuVLLMServer, double: VLLMDouble, body: dict[str, Any]) -> None:
    real, mirror = _both(real_vllm, double, "POST", "/tokenize", json=_chat(real_vllm, **body))
    assert real.status_code == mirror.status_code == 200
    r, m = real.json(), mirror.json()
    assert _shape(m) == _shape(r)
    assert (m["count"], m["max_model_len"]) == (r["count"], r["max_model_len"])
    if "prompt" in body:  # plain text: the served tokenizer's own ids
        assert m["tokens"] == r["tokens"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
        ("/tokenize", {"model": "nope", "prompt": "hi"}),
        ("/tokenize", {"model": "Qwen/Qwen3-8B"}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "max_tokens": 3}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "messages": "hi", "max_tokens": 3}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "max_tokens": 0,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "max_completion_tokens": -1,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "max_tokens": 99999,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "max_completion_tokens": 99999,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/chat/completions", "{not json"),
    ],
    ids=["chat-unknown-model", "tokenize-unknown-model", "tokenize-nothing", "no-messages",
         "messages-not-a-list", "max-tokens-0", "max-completion-tokens-negative",
         "max-tokens-over-window", "max-completion-tokens-over-window", "not-json"],
)
def test_error_bodies_mirror(
    real_vllm: CpuVLLMServer, double: VLLMDouble, path: str, body: dict[str, Any] | str
) -> None:
    sent: dict[str, Any] = (
        {"json": body} if isinstance(body, dict)
        else {"content": body, "headers": {"content-type": "application/json"}}
    )
    real, mirror = _both(real_vllm, double, "POST", path, **sent)
    assert real.status_code >= 400
    assert (mirror.status_code, mirror.json()) == (real.status_code, real.json())


def test_overflow_mirror(real_vllm: CpuVLLMServer, double: VLLMDouble) -> None:
    """A prompt past the window alone: the same 400, word for word, streamed or not."""
    words = "stone " * (real_vllm.options.max_model_len + 50)
    for stream in (False, True):
        body = _chat(real_vllm, messages=_user(words), max_tokens=8, stream=stream)
        real, mirror = _both(real_vllm, double, "POST", "/v1/chat/completions", json=body)
        assert real.status_code == 400
        assert (mirror.status_code, mirror.json()) == (real.status_code, real.json())
        assert real.json()["error"]["param"] == "input_tokens"


def test_max_tokens_clamp_mirror(real_vllm: CpuVLLMServer, double: VLLMDouble) -> None:
    """A prompt that fits but leaves less than max_tokens: both clamp the answer to the rest of
    the window (vLLM 0.32 does not reject it)."""
    window = real_vllm.options.max_model_len
    body = _chat(real_vllm, messages=_user("stone " * (window - 60)), max_tokens=500,
                 ignore_eos=True)
    real, mirror = _both(real_vllm, double, "POST", "/v1/chat/completions", json=body)
    assert real.status_code == mirror.status_code == 200
    r, m = real.json(), mirror.json()
    assert r["usage"]["prompt_tokens"] == m["usage"]["prompt_tokens"] > window - 500
    assert r["usage"]["completion_tokens"] == window - r["usage"]["prompt_tokens"]
    assert m["usage"]["total_tokens"] == r["usage"]["total_tokens"] == window
    assert m["choices"][0]["finish_reason"] == r["choices"][0]["finish_reason"] == "length"


def test_answer_and_usage_mirror(real_vllm: CpuVLLMServer, double: VLLMDouble) -> None:
    body = _chat(real_vllm, messages=_user("hello"), max_tokens=3, ignore_eos=True)
    real, mirror = _both(real_vllm, double, "POST", "/v1/chat/completions", json=body)
    assert real.status_code == mirror.status_code == 200
    r, m = real.json(), mirror.json()
    assert _shape(m) == _shape(r)
    assert m["usage"] == r["usage"]  # counts, cached and created cache tokens, details
    assert m["object"] == r["object"] == "chat.completion"


def _events(response: httpx.Response) -> list[Any]:
    lines = [line for line in response.text.splitlines() if line.startswith("data: ")]
    return [line[len("data: "):] if line == "data: [DONE]" else json.loads(line[6:])
            for line in lines]


@pytest.mark.parametrize("include_usage", [True, False])
def test_streaming_chunks_mirror(
    real_vllm: CpuVLLMServer, double: VLLMDouble, include_usage: bool
) -> None:
    body = _chat(real_vllm, messages=_user("hello"), max_tokens=3, ignore_eos=True, stream=True,
                 stream_options={"include_usage": include_usage})
    real, mirror = _both(real_vllm, double, "POST", "/v1/chat/completions", json=body)
    assert real.status_code == mirror.status_code == 200
    assert real.headers["content-type"] == mirror.headers["content-type"]
    r, m = _events(real), _events(mirror)
    # Chunk by chunk: role first, one chunk a token (the last carrying the finish), then the
    # usage chunk when asked for, then [DONE].
    assert [_shape(c) for c in m] == [_shape(c) for c in r]
    assert r[-1] == m[-1] == "[DONE]"
    if include_usage:
        assert m[-2]["usage"] == r[-2]["usage"]
    assert [c["choices"][0]["finish_reason"] for c in m[:-2 if include_usage else -1]] == [
        c["choices"][0]["finish_reason"] for c in r[:-2 if include_usage else -1]
    ]


def _kinds(events: list[Any]) -> list[str]:
    """A stream's chunks by what they carry, a run of argument pieces counted once (how many
    pieces the arguments come in is the model's business, not the wire's)."""
    kinds: list[str] = []
    for event in events:
        if event == "[DONE]":
            kind = "done"
        elif not event["choices"]:
            kind = "usage"
        else:
            choice = event["choices"][0]
            calls = choice["delta"].get("tool_calls")
            if choice["finish_reason"] is not None:
                kind = f"finish {choice['finish_reason']}"
            elif "role" in choice["delta"]:
                kind = "role"
            elif calls and "id" in calls[0]:
                kind = f"call {calls[0]['function']['name']}"
            elif calls:
                kind = "arguments"
            else:
                kind = "text"
        if not (kind == "arguments" and kinds and kinds[-1] == kind):
            kinds.append(kind)
    return kinds


@pytest.mark.parametrize("choice", ["required", "named"])
def test_streamed_tool_call_mirror(real_vllm: CpuVLLMServer, choice: str) -> None:
    """A streamed tool call, as vLLM's structured outputs make random weights call one: the
    call's first chunk (id, type, name), then its argument pieces, each delta with ``content``
    null; random weights fill the JSON with whitespace until the length stop, so the real
    answer is a call cut at or after "{" (the double is scripted to the same cut). A completed
    call cannot be had from random weights here; its finish reason ("tool_calls", or "stop"
    for a named choice) is read from vLLM 0.32's serving code into the double."""
    say = {"type": "function", "function": {
        "name": "say", "description": "Say a line in chat.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    tool_choice: Any = "required" if choice == "required" else {"type": "function", "function": {"name": "say"}}
    body = _chat(real_vllm, messages=_user("hello"), tools=[say], tool_choice=tool_choice, max_tokens=24,
                 temperature=0.0, stream=True, stream_options={"include_usage": True})
    cut = Reply(tool_calls=(ScriptedCall("say", "{"),), finish_reason="length", completion_tokens=24)
    with VLLMDouble(fixed_reply(cut), model=real_vllm.model, tokenizer=real_vllm.model,
                    window=real_vllm.options.max_model_len, wording="clamp", kv_block=BLOCK_SIZE) as double:
        real, mirror = _both(real_vllm, double, "POST", "/v1/chat/completions", json=body)
    assert real.status_code == mirror.status_code == 200
    r, m = _events(real), _events(mirror)
    # How many argument pieces the whitespace comes in (none, when the "{" is still held back
    # by the parser at the cut) is the model's business; the rest is the wire's.
    expected = ["role", "call say", "arguments", "finish length", "usage", "done"]
    assert _kinds(m) == expected and [k for k in _kinds(r) if k != "arguments"] == [
        k for k in expected if k != "arguments"], (r, m)
    for kind in ("role", "call say", "arguments", "finish length", "usage"):
        ours = [_shape(c) for c in m if c != "[DONE]" and _kinds([c]) == [kind]]
        theirs = [_shape(c) for c in r if c != "[DONE]" and _kinds([c]) == [kind]]
        assert all(t == ours[0] for t in theirs), (kind, theirs, ours)
    arguments = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                        for c in r if c != "[DONE]" and _kinds([c]) == ["arguments"])
    assert arguments.strip() in ("", "{"), arguments

"""Streaming, the first-token timeout and cancellation against the real vLLM.

A streamed answer carries content, ``usage`` (``stream_options.include_usage``) and the time to
its first token, with the same prompt count as the same request unstreamed. A prompt whose
prefill takes longer than ``first_token_timeout`` ends in a transient error, and a call that is
cancelled (the anyio cancellation a turn's interrupt uses) is aborted on the server: its
``vllm:num_requests_running`` gauge returns to 0, no more tokens are generated, and its log
says the request was aborted.

Not here yet: the same through a live session (a player's "stop" cancelling the turn's call).
Against random weights it races the turn the player's arrival starts, which that "stop" does
not cancel (the player did not ask for it); the interrupt itself is tested in
tests/unit/agent/test_loop.py.
"""

from __future__ import annotations

import math
import re
import time

import anyio
import httpx
import pytest

from emil.exceptions import EndpointUnavailable
from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.serving.metrics import parse_prometheus


def _metric(server: CpuVLLMServer, name: str) -> float:
    text = httpx.get(f"{server.root_url}/metrics", timeout=10).text
    return math.fsum(v for n, _, v in parse_prometheus(text) if n == name)


def _running(server: CpuVLLMServer) -> float:
    return _metric(server, "vllm:num_requests_running")


def _generated(server: CpuVLLMServer) -> float:
    return _metric(server, "vllm:generation_tokens_total")


def _aborted(server: CpuVLLMServer, request_id: str = "") -> int:
    """Requests the server logged as aborted (whose id contains ``request_id``).

    vLLM counts a request its client dropped in no metric (``vllm:request_success_total``'s
    ``abort`` reason is for aborts of its own), but with ``--enable-log-requests`` (the tier's
    server has it) it logs "Request <id> aborted." when it aborts one."""
    assert server.log_path is not None
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    return len(re.findall(rf"Request \S*{re.escape(request_id)}\S* aborted\.", log))


async def _until_aborted(
    server: CpuVLLMServer, count: int, request_id: str = "", within: float = 15.0
) -> None:
    with anyio.fail_after(within):
        while _aborted(server, request_id) < count:  # noqa: ASYNC110 - polls the server's log
            await anyio.sleep(0.2)


async def _until_idle(server: CpuVLLMServer, within: float = 15.0) -> float:
    """Seconds until the server runs no request (fails after ``within``)."""
    started = time.monotonic()
    with anyio.fail_after(within):
        while _running(server) > 0:  # noqa: ASYNC110 - polls the server
            await anyio.sleep(0.2)
    return time.monotonic() - started


def _request(text: str, *, tokens: int, stream: bool = True) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": text}], max_completion_tokens=tokens, stream=stream
    )


async def test_a_streamed_answer_has_usage_and_its_first_token_time(
    real_vllm: CpuVLLMServer,
) -> None:
    async with OpenAIClient(real_vllm.base_url, model=real_vllm.model, timeout=120) as llm:
        streamed = await llm.complete(_request("tell me about the river", tokens=12))
        plain = await llm.complete(_request("tell me about the river", tokens=12, stream=False))
    for answer in (streamed, plain):
        assert answer.usage is not None and answer.finish_reason == "length"
        assert answer.usage.completion_tokens == 12
        assert answer.content or answer.tool_calls
    assert streamed.usage is not None and plain.usage is not None
    assert streamed.usage.prompt_tokens == plain.usage.prompt_tokens
    assert streamed.timings is not None and streamed.timings.first_token_s is not None
    assert 0 < streamed.timings.first_token_s <= streamed.timings.total_s


async def test_no_first_token_in_time_is_transient_and_the_request_is_dropped(
    real_vllm: CpuVLLMServer,
) -> None:
    # A fresh ~8,000-token prompt (a unique first word: nothing of it is cached): its prefill
    # takes seconds on a CPU, well past a 0.2 s first-token limit.
    words = f"{time.time_ns()} " + " ".join(f"stone{i}" for i in range(1600))
    async with OpenAIClient(
        real_vllm.base_url, model=real_vllm.model, timeout=120, first_token_timeout=0.2
    ) as llm:
        with pytest.raises(EndpointUnavailable, match=r"no first token within 0\.2 s"):
            await llm.complete(_request(words, tokens=200))
    await _until_idle(real_vllm)


async def test_a_cancelled_call_is_aborted_on_the_server(real_vllm: CpuVLLMServer) -> None:
    prefix = f"cancelled-{time.time_ns()}"  # vLLM's id for the request: chatcmpl-<prefix>-1
    async with OpenAIClient(
        real_vllm.base_url, model=real_vllm.model, timeout=300, request_id_prefix=prefix
    ) as llm:
        with anyio.move_on_after(3):  # 2,000 tokens would take a minute or more here
            await llm.complete(_request("tell me a very long story", tokens=2000))
        took = await _until_idle(real_vllm)
        await _until_aborted(real_vllm, 1, f"{prefix}-1")
    generated = _generated(real_vllm)
    await anyio.sleep(1.0)
    assert _generated(real_vllm) == generated, "the server kept generating after the abort"
    assert took < 10

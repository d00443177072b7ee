"""Streaming, the first-token timeout and cancellation against the real vLLM.

A streamed answer carries content, ``usage`` (``stream_options.include_usage``) and the time to
its first token, with the same prompt count as the same request unstreamed. A prompt whose
prefill takes longer than ``first_token_timeout`` ends in a transient error, and a call that is
cancelled (the anyio cancellation a turn's interrupt uses) is aborted on the server: its
``vllm:num_requests_running`` gauge returns to 0, no more tokens are generated, and its log
says the request was aborted.

The same through a live session: an operator's "stop" cancels the turn's call in flight,
whichever turn it is (the player's arrival starts one that a non-operator's "stop" would not
cancel: they did not ask for it), and the server aborts that request.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import anyio
import httpx
import pytest

from emil.exceptions import EndpointUnavailable
from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest
from emil.recording import RequestRecord, TurnRecord
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.serving.metrics import parse_prometheus
from tests.integration.agent.services import running_world


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
    # A fresh ~13,900-token prompt (a unique first word: nothing of it is cached, and it fits
    # the tier's 16,384 window with the answer): the tiny model prefills it in about 0.5 s on
    # a quiet 2-core machine, ten times the 0.05 s first-token limit. (An ~6,900-token prompt
    # against 0.2 s, as before, answered in time 6 runs of 6 on a quiet machine: its first
    # token came in 0.25-0.37 s whole requests; only a loaded machine made it late.)
    words = f"{time.time_ns()} " + " ".join(f"stone{i}" for i in range(3000))
    async with OpenAIClient(
        real_vllm.base_url, model=real_vllm.model, timeout=120, first_token_timeout=0.05
    ) as llm:
        with pytest.raises(EndpointUnavailable, match=r"no first token within 0\.05 s"):
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


@pytest.mark.timeout(300, func_only=True)
async def test_an_operators_stop_cancels_the_turns_call_and_the_server_aborts_it(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    """In a live session: Emil's calls ask for 6,000 tokens (minutes of decoding on this CPU,
    end-of-text ignored so random weights cannot end early), and the player, an operator, says
    "stop" while one is in flight: the turn is interrupted, its call cancelled after the grace,
    and the server aborts it and generates no more for it."""
    async with running_world(
        tmp_path, None, endpoint=real_vllm.base_url, output_reserve=6000, interrupt_grace_s=0.5,
        operators=["alex"],
    ) as world:
        world.session.llm.extra_body["ignore_eos"] = True
        await world.say("Emil, tell me the longest story you know")
        await world.wait_for("a turn's request", lambda: any(isinstance(r, RequestRecord) for r in world.records()))
        with anyio.fail_after(60):
            while _running(real_vllm) < 1:  # noqa: ASYNC110 - polls the server
                await anyio.sleep(0.2)
        aborted = _aborted(real_vllm)
        await world.say("Emil, stop!")
        await world.wait_for(
            "the interrupted turn",
            lambda: any(isinstance(r, TurnRecord) and r.interrupted for r in world.records()),
            within=60,
        )
        await _until_aborted(real_vllm, aborted + 1)
        await world.stop_agent()
        await _until_idle(real_vllm, within=30)
        records = world.records()
    turn = next(r for r in records if isinstance(r, TurnRecord) and r.interrupted)
    assert "model call cancelled" in turn.interrupted_by, turn
    assert turn.completion_tokens < 6000

"""Every fault mode of the vLLM-dialect double, against the live client over real HTTP.

A malformed 200 is a ServerFault (never an IndexError in the client), a hang or a slow first
token is transient (the client's own time limits), the model gone or tool choice not enabled is
a configuration error. The same modes work set from another process (``POST /_double/faults``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from emil.exceptions import EndpointConfigError, EndpointUnavailable, ServerFault
from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest
from emil.testing.brains import fixed_reply
from emil.testing.faults import Fault
from emil.testing.script import Reply
from emil.testing.vllm_double import VLLMDouble

from .conftest import server_counter

pytestmark = pytest.mark.slow

MALFORMED = ["invalid_json", "empty_choices", "html", "no_message", "wrong_types", "truncated_stream"]
TOOLS = [{"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}]


@asynccontextmanager
async def _served(*faults: Fault, **client: Any) -> AsyncIterator[tuple[VLLMDouble, OpenAIClient]]:
    """The double (answering "up") and a client of it."""
    async with VLLMDouble(fixed_reply(Reply(content="up")), counter=server_counter, faults=faults) as double:
        client.setdefault("timeout", 5)
        async with OpenAIClient(double.base_url, model=double.model, **client) as llm:
            yield double, llm


def _request(stream: bool) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=16,
                       stream=stream, tools=TOOLS)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("kind", MALFORMED)
async def test_malformed_200s_are_server_faults_then_it_answers(kind: str, stream: bool) -> None:
    async with _served() as (double, llm):
        double.inject(kind)  # type: ignore[arg-type]
        with pytest.raises(ServerFault) as err:
            await llm.complete(_request(stream))
        assert len(err.value.body) <= 420
        assert (await llm.complete(_request(stream))).content == "up"  # one request only
    assert double.faults.applied == {kind: 1}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_a_hang_runs_into_the_whole_answer_limit(stream: bool) -> None:
    async with _served(timeout=1.0, first_token_timeout=None) as (double, llm):
        double.inject("hang")
        started = time.monotonic()
        with pytest.raises(EndpointUnavailable, match="request_timeout_s"):
            await llm.complete(_request(stream))
        assert 0.9 < time.monotonic() - started < 10.0  # the limit, not the hang (which never ends)
        # The same client answers after it: a longer limit, since 1 s is less than one request
        # takes when three test lanes share the two cores (seen once: "within 1 s").
        llm.timeout = 30.0
        assert (await llm.complete(_request(stream))).content == "up"


async def test_a_slow_first_token_runs_into_the_first_token_limit() -> None:
    # a limit ten times the slow-but-fine delay: a loaded machine's own lag stays inside it
    async with _served(timeout=60, first_token_timeout=2.0) as (double, llm):
        double.inject("slow_first_token", delay_s=40)
        started = time.monotonic()
        with pytest.raises(EndpointUnavailable, match="first_token_timeout_s"):
            await llm.complete(_request(True))
        assert time.monotonic() - started < 20.0  # the 2 s limit, not the 40 s delay
        double.inject("slow_first_token", delay_s=0.2)  # slow, but within the limit
        out = await llm.complete(_request(True))
        assert out.content == "up" and out.timings is not None
        assert out.timings.first_token_s is not None and out.timings.first_token_s >= 0.2


async def test_model_gone_and_tool_choice_are_configuration_errors() -> None:
    async with _served() as (double, llm):
        double.inject("model_gone", times=None)
        with pytest.raises(EndpointConfigError, match="does not exist") as err:
            await llm.complete(_request(False))
        assert err.value.status == 404
        assert [m.id for m in await llm.list_models()] == [f"{double.model}-replaced"]
        double.clear_faults()
        double.inject("no_tool_choice")
        with pytest.raises(EndpointConfigError, match="enable-auto-tool-choice"):
            await llm.complete(_request(False))
        assert (await llm.complete(_request(False))).content == "up"


async def test_faults_are_set_over_http_from_another_process() -> None:
    async with _served() as (double, llm), httpx.AsyncClient(base_url=double.root_url) as admin:
        bad = await admin.post("/_double/faults", json={"kind": "nonsense"})
        assert bad.status_code == 400 and "unknown fault kind" in bad.text
        ok = await admin.post("/_double/faults", json={"kind": "status", "times": 2, "status": 503})
        assert ok.status_code == 200
        for _ in range(2):
            with pytest.raises(EndpointUnavailable):
                await llm.complete(_request(False))
        assert (await llm.complete(_request(False))).content == "up"
        stats = (await admin.get("/_double/stats")).json()
        assert stats["chat_requests"] == 3 and stats["faults_applied"] == {"status": 2}
        await admin.post("/_double/faults", json={"kind": "html", "times": None})
        await admin.delete("/_double/faults")
        assert not double.faults.active


async def test_a_fault_for_some_seconds_then_over() -> None:
    async with _served() as (double, llm):
        # put in force just before the first request (a double's start-up under load can take
        # longer than a short fault lasts), for long enough that one local request lands in it
        started = time.monotonic()
        double.faults.add(Fault("empty_choices", times=None, for_s=2.0))
        with pytest.raises(ServerFault):
            await llm.complete(_request(False))
        # the fault holds for its two seconds, then ends by itself: ask until it is over
        with anyio.fail_after(10):
            while True:
                try:
                    answer = await llm.complete(_request(False))
                    break
                except ServerFault:
                    await anyio.sleep(0.05)
        assert answer.content == "up" and time.monotonic() - started >= 2.0

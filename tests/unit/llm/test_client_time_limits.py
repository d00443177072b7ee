"""The client's two time limits and a broken stream, through an in-process transport double
(httpx2 MockTransport whose SSE body arrives as slowly as the test says; unit tests only)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import httpx2
import pytest
from openai import AsyncOpenAI

from emil.exceptions import EndpointUnavailable, ServerFault
from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest

_BASE = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {**_BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(payload)}\n\n".encode()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, parts: Sequence[tuple[float, bytes]], fail: Exception | None = None) -> None:
        self.parts, self.fail = parts, fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for delay, data in self.parts:
            await anyio.sleep(delay)
            yield data
        if self.fail is not None:
            raise self.fail

    async def aclose(self) -> None:
        pass


def _client(parts: Sequence[tuple[float, bytes]], *, fail: Exception | None = None, delay: float = 0.0,
            **kwargs: Any) -> OpenAIClient:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        if not json.loads(request.content).get("stream"):
            await anyio.sleep(delay)
            return httpx2.Response(200, json={"model": "m", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "plain"}}]})
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_Body(parts, fail))

    client = OpenAIClient("http://127.0.0.1:9/v1", model="m", **kwargs)
    client._client = AsyncOpenAI(base_url=client.base_url, api_key="k", max_retries=0,
                                 http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    return client


STREAM = ChatRequest(messages=[{"role": "user", "content": "hi"}], stream=True)
PLAIN = ChatRequest(messages=[{"role": "user", "content": "hi"}])
WHOLE = [(0.0, _chunk({"role": "assistant", "content": ""})), (0.0, _chunk({"content": "hello"})),
         (0.0, _chunk({}, "stop")), (0.0, b"data: [DONE]\n\n")]


async def test_no_first_token_in_time_is_transient_and_says_which_limit() -> None:
    slow = [(0.0, WHOLE[0][1]), (2.0, WHOLE[1][1]), *WHOLE[2:]]
    started = time.monotonic()
    with pytest.raises(EndpointUnavailable) as err:
        await _client(slow, timeout=10, first_token_timeout=0.3).complete(STREAM)
    assert time.monotonic() - started < 1.5
    assert str(err.value) == "LLM server sent no first token within 0.3 s (first_token_timeout_s)"


async def test_once_the_first_token_came_the_whole_limit_applies() -> None:
    # the first token well inside its limit (a loaded machine's lag stays inside), the rest after it
    flowing = [(0.0, WHOLE[0][1]), (0.1, WHOLE[1][1]), (1.4, _chunk({"content": " there"})), *WHOLE[2:]]
    out = await _client(flowing, timeout=10, first_token_timeout=1.0).complete(STREAM)
    assert out.content == "hello there" and out.timings is not None
    assert out.timings.first_token_s is not None and 0.05 < out.timings.first_token_s < 1.0
    assert out.timings.total_s > 1.4 and out.timings.total_s > out.timings.first_token_s


async def test_the_first_token_limit_does_not_apply_to_a_plain_request() -> None:
    out = await _client([], delay=0.5, timeout=5, first_token_timeout=0.1).complete(PLAIN)
    assert out.content == "plain"


@pytest.mark.parametrize("request_", [STREAM, PLAIN], ids=["streamed", "plain"])
async def test_the_whole_answer_limit(request_: ChatRequest) -> None:
    slow = [(0.0, WHOLE[0][1]), (0.0, WHOLE[1][1]), (2.0, WHOLE[2][1])]
    with pytest.raises(EndpointUnavailable) as err:
        await _client(slow, delay=2.0, timeout=0.3, first_token_timeout=None).complete(request_)
    assert str(err.value) == "LLM server did not finish its answer within 0.3 s (request_timeout_s)"


async def test_a_first_token_limit_longer_than_the_whole_reads_as_the_whole() -> None:
    with pytest.raises(EndpointUnavailable, match=r"within 0\.3 s \(request_timeout_s\)"):
        await _client([(2.0, WHOLE[1][1])], timeout=0.3, first_token_timeout=1.0).complete(STREAM)


async def test_a_stream_that_breaks_is_transient_and_one_that_lies_is_a_fault() -> None:
    broken = _client(WHOLE[:2], fail=httpx2.RemoteProtocolError("peer closed connection"), timeout=5)
    with pytest.raises(EndpointUnavailable) as err:
        await broken.complete(STREAM)
    assert str(err.value).endswith("RemoteProtocolError: peer closed connection")
    lying = _client([(0.0, b'data: {"choices": [\n\n')], timeout=5)
    with pytest.raises(ServerFault) as fault:
        await lying.complete(STREAM)
    assert str(fault.value).startswith("the LLM server's stream holds a line that is not JSON: ")
    assert fault.value.body and len(fault.value.body) <= 400


async def test_after_the_first_token_a_stall_is_the_whole_limit_and_equal_limits_read_as_whole() -> None:
    stall = [(0.0, WHOLE[0][1]), (0.0, WHOLE[1][1]), (3.0, WHOLE[2][1])]
    with pytest.raises(EndpointUnavailable, match=r"within 0\.5 s \(request_timeout_s\)"):
        await _client(stall, timeout=0.5, first_token_timeout=0.2).complete(STREAM)
    with pytest.raises(EndpointUnavailable, match=r"within 0\.3 s \(request_timeout_s\)"):
        await _client([(2.0, WHOLE[1][1])], timeout=0.3, first_token_timeout=0.3).complete(STREAM)


async def test_a_raw_transport_error_mid_stream_is_a_dropped_connection() -> None:
    import h11

    broken = _client(WHOLE[:2], fail=h11.RemoteProtocolError("peer closed"), timeout=5)
    with pytest.raises(EndpointUnavailable) as err:
        await broken.complete(STREAM)
    assert str(err.value) == "LLM connection dropped: RemoteProtocolError: peer closed"

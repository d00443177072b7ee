"""The recovery policy without I/O: driven by hand and by an in-process fake (unit tests only)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emil.exceptions import ContextOverflowError, EndpointConfigError, EndpointUnavailable
from emil.llm import parse_overflow
from emil.llm.retry import (
    Assemble,
    Backoff,
    Calibrate,
    CountExactly,
    Notify,
    OverflowRejected,
    RecoveryEvent,
    Send,
    classify_failure,
    complete_with_recovery,
    config_hint,
    recovery_flow,
    retry_transient,
)
from emil.llm.types import ChatRequest, Completion, Usage
from emil.testing.vllm_wordings import WORDINGS, Wording, judge_overflow

W, M = 32768, 6144


def _req(pred: int, tag: str = "x") -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": f"{tag}:{pred}"}],
        max_completion_tokens=M,
        predicted_prompt_tokens=pred,
    )


def _ok(prompt: int = 100) -> Completion:
    return Completion(content="ok", finish_reason="stop",
                      usage=Usage(prompt_tokens=prompt, completion_tokens=2))


def _rejected(message: str) -> OverflowRejected:
    o = parse_overflow(message)
    assert o is not None
    return OverflowRejected(o, status=400, server_message=message)


def test_success_first_time_is_one_assemble_one_send() -> None:
    flow = recovery_flow(window=W)
    assert next(flow) == Assemble(None)
    step = flow.send(_req(1000))
    assert isinstance(step, Send) and step.attempt == 0
    with pytest.raises(StopIteration) as stop:
        flow.send(_ok())
    assert stop.value.value.content == "ok"


def test_exact_overflow_calibrates_and_shrinks_past_the_room() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(24000))
    # the server counted 30000 where Emil predicted 24000 (a 1.25 ratio)
    msg = ("This model's maximum context length is 32768 tokens. However, you requested 36144 "
           "tokens (30000 in the messages, 6144 in the completion).")
    steps = []
    step = flow.send(_rejected(msg))
    while not isinstance(step, Assemble):
        steps.append(step)
        step = flow.send(None)
    assert Calibrate(24000, 30000, False) in steps
    kinds = [s.event.kind for s in steps if isinstance(s, Notify)]
    assert kinds == ["overflow", "retry"]
    assert step.limit is not None
    assert step.limit < 24000
    assert math.ceil(step.limit * 30000 / 24000) <= W - M  # the retry fits the room


def test_at_least_is_a_floor_and_the_retry_shrinks_past_it() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(18000))
    msg = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
           "output tokens and your prompt contains at least 26625 input tokens, for a total of "
           "at least 32769 tokens.")
    step = flow.send(_rejected(msg))
    seen = []
    while not isinstance(step, Assemble):
        seen.append(step)
        step = flow.send(None)  # no exact counter available
    assert any(isinstance(s, CountExactly) for s in seen)
    assert Calibrate(18000, 26625, True) in seen
    # past the bound: at the lower-bound ratio the new prompt is well under the room
    assert step.limit is not None
    assert step.limit * 26625 / 18000 < (W - M) * 0.9


def test_exact_count_replaces_the_lower_bound() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(18000))
    msg = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
           "output tokens and your prompt contains at least 26625 input tokens")
    step = flow.send(_rejected(msg))
    assert isinstance(step, Notify)
    step = flow.send(None)
    assert isinstance(step, CountExactly)
    seen = []
    step = flow.send(36000)
    while not isinstance(step, Assemble):
        seen.append(step)
        step = flow.send(None)
    assert Calibrate(18000, 36000, False) in seen
    assert step.limit is not None
    assert step.limit * 2 <= W - M  # ratio 2.0 exactly known


def _drive_to_next_assemble(flow, value):  # type: ignore[no-untyped-def]
    step = flow.send(value)
    while not isinstance(step, Assemble | Send):
        step = flow.send(36000 if isinstance(step, CountExactly) else None)
    return step


def test_identical_retry_is_refused() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    req = _req(30000)
    flow.send(req)
    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    _drive_to_next_assemble(flow, _rejected(msg))
    same_on_the_wire = req.model_copy(update={"predicted_prompt_tokens": 10})
    with pytest.raises(ContextOverflowError, match="identical"):
        _drive_to_next_assemble(flow, same_on_the_wire)


def test_a_retry_that_is_not_smaller_is_refused() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(30000))
    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    _drive_to_next_assemble(flow, _rejected(msg))
    with pytest.raises(ContextOverflowError, match="not smaller") as err:
        _drive_to_next_assemble(flow, _req(30000, tag="other"))
    assert err.value.attempts == (30000, 30000)


def test_gives_up_after_two_retries_with_every_number() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    sizes = [30000, 20000, 10000]
    flow.send(_req(sizes[0]))
    msg = "Input length (99999) exceeds model's maximum context length (32768)."
    step = _drive_to_next_assemble(flow, _rejected(msg))
    step = _drive_to_next_assemble(flow, _req(min(sizes[1], step.limit)))
    step = _drive_to_next_assemble(flow, _rejected(msg))
    step = _drive_to_next_assemble(flow, _req(min(sizes[2], step.limit)))
    with pytest.raises(ContextOverflowError) as err:
        _drive_to_next_assemble(flow, _rejected(msg))
    e = err.value
    assert e.window == W and e.requested_output == M and e.server_prompt_tokens == 99999
    assert len(e.attempts) == 3 and list(e.attempts) == sorted(e.attempts, reverse=True)
    assert "2 smaller retries did not fit" in str(e) and "99999" in str(e)


def test_output_alone_larger_than_window_is_not_retried() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(ChatRequest(messages=[{"role": "user", "content": "hi"}],
                          max_completion_tokens=65536, predicted_prompt_tokens=10))
    msg = "max_tokens=65536 cannot be greater than max_model_len=32768."
    with pytest.raises(ContextOverflowError, match="output_reserve"):
        _drive_to_next_assemble(flow, _rejected(msg))


def test_clamped_completion_is_an_overflow() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(28000))
    clamped = Completion(content="cut", finish_reason="length",
                         usage=Usage(prompt_tokens=30000, completion_tokens=2768))
    step = _drive_to_next_assemble(flow, clamped)
    assert isinstance(step, Assemble) and step.limit is not None and step.limit < 28000


@pytest.mark.parametrize(
    "exc",
    [EndpointUnavailable("refused", status=None),
     EndpointConfigError("fix it", status=401, server_message="Unauthorized")],
)
def test_transient_and_config_errors_propagate_at_once(exc: Exception) -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(1000))
    step = flow.send(exc)
    assert isinstance(step, Notify) and step.event.kind in ("transient", "config")
    with pytest.raises(type(exc)):
        flow.send(None)


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "This model's maximum context length is 4096 tokens. However, your request has "
              "5000 input tokens.", "overflow"),
        (502, "Input length (5000) exceeds model's maximum context length (4096).", "overflow"),
        (None, "Connection refused", "transient"),
        (429, "Too Many Requests", "transient"),
        (500, "Internal Server Error", "transient"),
        (502, "Bad Gateway", "transient"),
        (503, "Service Unavailable", "transient"),
        (504, "Gateway Timeout", "transient"),
        (400, "engine loading, try again", "transient"),
        (401, "Unauthorized", "config"),
        (403, "Forbidden", "config"),
        (404, "The model `x` does not exist.", "config"),
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
              "be set", "config"),
        (422, "Unprocessable", "config"),
    ],
)
def test_classify_failure(status: int | None, message: str, expected: str) -> None:
    assert classify_failure(status, message) == expected


def test_config_hints_say_what_to_change() -> None:
    msg = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    assert "--enable-auto-tool-choice" in config_hint(400, msg)
    assert msg in config_hint(400, msg)
    assert "/v1/models" in config_hint(404, "no such model", model="qwen")
    assert "api_key" in config_hint(401, "Unauthorized")


def test_backoff_is_full_jitter_exponential_and_capped() -> None:
    b = Backoff(base=0.5, cap=4.0, rng=random.Random(1))
    ceilings = []
    for _ in range(8):
        ceilings.append(b.ceiling())
        d = b.next_delay()
        assert 0.0 <= d <= ceilings[-1]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.ceiling() == 0.5
    nj = Backoff(base=0.5, cap=4.0, jitter=False)
    assert [nj.next_delay() for _ in range(4)] == [0.5, 1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="base"):
        Backoff(base=2.0, cap=1.0)


async def test_retry_transient_waits_then_succeeds_and_stops_on_config() -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise EndpointUnavailable("503 loading", status=503)
        return "up"

    b = Backoff(base=0.001, cap=0.004)
    events: list[RecoveryEvent] = []
    assert await retry_transient(flaky, backoff=b, on_event=events.append) == "up"
    assert calls == 3 and b.waits == 2 and b.attempt == 0
    assert [e.kind for e in events] == ["transient", "transient"]

    async def misconfigured() -> str:
        raise EndpointConfigError("set the key", status=401)

    b2 = Backoff(base=0.001, cap=0.004)
    with pytest.raises(EndpointConfigError):
        await retry_transient(misconfigured, backoff=b2)
    assert b2.waits == 0

    async def down() -> str:
        raise EndpointUnavailable("refused")

    with pytest.raises(EndpointUnavailable):
        await retry_transient(down, backoff=Backoff(base=0.001, cap=0.002), give_up_after_s=0.02)


class _FakeServer:
    """In-process fake for this module's unit test: counts tokens as ratio x Emil's prediction."""

    def __init__(self, wording: Wording, ratio: float) -> None:
        self.wording, self.ratio = wording, ratio
        self.sent: list[int] = []

    async def complete(self, request: ChatRequest) -> Completion:
        assert request.predicted_prompt_tokens is not None
        true = math.ceil(request.predicted_prompt_tokens * self.ratio)
        self.sent.append(true)
        answer = judge_overflow(self.wording, window=W, prompt=true,
                                max_tokens=request.max_completion_tokens)
        if answer.reject_message is not None:
            raise _rejected(answer.reject_message)
        if answer.clamp_to is not None:
            return Completion(content="cut", finish_reason="length",
                              usage=Usage(prompt_tokens=true, completion_tokens=answer.clamp_to))
        return _ok(true)


@settings(max_examples=150, deadline=None)
@given(
    wording=st.sampled_from(WORDINGS),
    ratio=st.floats(min_value=0.6, max_value=1.45),
    history=st.integers(min_value=5000, max_value=200000),
)
async def test_recovers_within_two_retries_with_strictly_shrinking_prompts(
    wording: Wording, ratio: float, history: int
) -> None:
    server = _FakeServer(wording, ratio)
    budget = W - M  # Emil believes its prediction; the server's count is ratio x that
    calibrations: list[tuple[int, int, bool]] = []

    def assemble(limit: int | None) -> ChatRequest:
        size = min(history, budget if limit is None else limit)
        return _req(size)

    result = await complete_with_recovery(
        server, assemble, window=W, calibrate=lambda p, a, lb: calibrations.append((p, a, lb))
    )
    assert result.finish_reason == "stop"
    assert len(server.sent) <= 3
    assert server.sent == sorted(set(server.sent), reverse=True)
    assert server.sent[-1] + M <= W
    assert len(calibrations) == len(server.sent) - 1

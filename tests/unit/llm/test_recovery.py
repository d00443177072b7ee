"""The recovery flow without I/O: driven by hand and by an in-process fake (unit tests only)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emil.backoff import Backoff, Patience
from emil.exceptions import (
    ContextOverflowError,
    EndpointConfigError,
    EndpointUnavailable,
    ServerFault,
)
from emil.llm import parse_overflow
from emil.llm.classify import OverflowRejected
from emil.llm.recovery import complete_with_recovery, recovery_flow
from emil.llm.recovery_steps import (
    Assemble,
    Calibrate,
    CountExactly,
    Notify,
    RecoveryEvent,
    Send,
    Wait,
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


def test_a_configuration_error_propagates_at_once() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(1000))
    exc = EndpointConfigError("fix it", status=401, server_message="Unauthorized")
    step = flow.send(exc)
    assert isinstance(step, Notify) and step.event.kind == "config"
    with pytest.raises(EndpointConfigError):
        flow.send(None)


def test_a_transient_failure_waits_and_resends_the_same_request() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    request = _req(1000)
    flow.send(request)
    for send in (1, 2, 3):
        down = EndpointUnavailable("refused", status=None)
        step = flow.send(down)
        assert isinstance(step, Notify) and step.event.kind == "transient"
        assert step.event.send == send and step.event.attempt == 0
        assert flow.send(None) == Wait(down)
        step = flow.send(None)
        assert step == Send(request, 0, send + 1)  # the same request: one request, attempts
    with pytest.raises(StopIteration):
        flow.send(_ok())


def test_server_faults_are_resent_a_bounded_number_of_times() -> None:
    flow = recovery_flow(window=W, max_fault_retries=2)
    next(flow)
    request = _req(1000)
    flow.send(request)
    kinds: list[str] = []
    with pytest.raises(ServerFault, match="garbage"):
        step = flow.send(ServerFault("garbage 1"))
        while True:
            if isinstance(step, Notify):
                kinds.append(step.event.kind)
            value = ServerFault(f"garbage {len(kinds)}") if isinstance(step, Send) else None
            if isinstance(step, Send):
                assert step.request is request
            step = flow.send(value)
    # 1 send + 2 resends, each a fault; the third fault ends it
    assert kinds == ["server_fault", "server_fault", "server_fault", "gave_up"]


def test_a_server_fault_then_an_answer_recovers() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(1000))
    step = flow.send(ServerFault("html"))
    assert isinstance(step, Notify) and step.event.kind == "server_fault"
    assert isinstance(flow.send(None), Wait)
    assert isinstance(flow.send(None), Send)
    with pytest.raises(StopIteration) as stop:
        flow.send(_ok())
    assert stop.value.value.content == "ok"


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


class _Flaky:
    """In-process fake: fails the first sends with ``failures``, then answers."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.sent: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.sent.append(request)
        if self.failures:
            raise self.failures.pop(0)
        return _ok()


async def test_the_driver_waits_out_transients_with_the_services_patience() -> None:
    llm = _Flaky(EndpointUnavailable("refused"), ServerFault("<html>"), EndpointUnavailable("503", status=503))
    events: list[RecoveryEvent] = []
    assembled: list[int | None] = []
    patience = Patience("llm endpoint", backoff=Backoff(0.001, 0.002))

    def assemble(limit: int | None) -> ChatRequest:
        assembled.append(limit)
        return _req(1000)

    out = await complete_with_recovery(llm, assemble, window=W, on_event=events.append,
                                       patience=patience)
    assert out.content == "ok"
    assert assembled == [None]  # assembled once: the same request went four times
    assert len(llm.sent) == 4 and all(r is llm.sent[0] for r in llm.sent)
    assert [e.kind for e in events] == ["transient", "server_fault", "transient"]
    assert [e.send for e in events] == [1, 2, 3]
    assert patience.episodes == 1 and not patience.down


async def test_without_patience_a_transient_failure_propagates() -> None:
    llm = _Flaky(EndpointUnavailable("refused"))
    with pytest.raises(EndpointUnavailable):
        await complete_with_recovery(llm, lambda _limit: _req(1000), window=W)
    assert len(llm.sent) == 1


async def test_an_overflow_answer_means_the_server_is_up() -> None:
    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    llm = _Flaky(EndpointUnavailable("refused"), _rejected(msg))
    patience = Patience("llm endpoint", backoff=Backoff(0.001, 0.002))
    sizes = iter([30000, 20000])
    await complete_with_recovery(llm, lambda _limit: _req(next(sizes)), window=W, patience=patience)
    assert not patience.down and patience.episodes == 1


def _limit_after(flow_window: int, request: ChatRequest, rejection: Exception, *, count: int | None = None,
                 **kw: float) -> int | None:
    flow = recovery_flow(window=flow_window, **kw)  # type: ignore[arg-type]
    next(flow)
    flow.send(request)
    step = flow.send(rejection)
    while not isinstance(step, Assemble):
        step = flow.send(count if isinstance(step, CountExactly) else None)
    return step.limit


def test_the_retry_margin_is_two_percent_of_the_room_or_64_tokens() -> None:
    exact = "Input length (30000) exceeds model's maximum context length (32768)."
    # room 26624, margin max(64, ceil(2 % of it) = 533) = 533: (26624 - 533) * 24000 / 30000
    assert _limit_after(W, _req(24000), _rejected(exact)) == 20872
    small = ChatRequest(messages=[{"role": "user", "content": "x"}], max_completion_tokens=1024,
                        predicted_prompt_tokens=3000)
    # room 3072: 2 % is 62 < 64, so the floor of 64 applies: (3072 - 64) * 3000 / 4000
    assert _limit_after(4096, small, _rejected("Input length (4000) exceeds model's maximum context length (4096).")) == 2256


def test_a_lower_bound_is_shrunk_past_by_15_percent_then_30() -> None:
    at_least = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
                "output tokens and your prompt contains at least 26625 input tokens, for a total of "
                "at least 32769 tokens.")
    # the floor taken 15 % higher: ceil(26625 * 1.15) = 30619; (26624 - 533) * 18000 / 30619
    assert _limit_after(W, _req(18000), _rejected(at_least)) == 15338
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(18000))
    step = _drive_to_next_assemble_plain(flow, _rejected(at_least))
    step = flow.send(_req(15000))
    step = _drive_to_next_assemble_plain(flow, _rejected(at_least))
    # the second time 30 %: ceil(26625 * 1.30) = 34613; (26624 - 533) * 15000 / 34613
    assert isinstance(step, Assemble) and step.limit == 11306


def _drive_to_next_assemble_plain(flow, value):  # type: ignore[no-untyped-def]
    step = flow.send(value)
    while not isinstance(step, Assemble):
        step = flow.send(None)
    return step


def _events_of(flow, outcomes):  # type: ignore[no-untyped-def]
    """Drive ``flow`` from its first Send with ``outcomes`` (one per Send); collect every step."""
    steps = []
    outcomes = list(outcomes)
    step = flow.send(_req(1000))
    try:
        while True:
            steps.append(step)
            step = flow.send(outcomes.pop(0) if isinstance(step, Send) else None)
    except (StopIteration, EndpointUnavailable, ServerFault, EndpointConfigError) as end:
        return steps, end


def test_every_attempt_of_one_request_is_numbered_and_says_why() -> None:
    flow = recovery_flow(window=W, max_fault_retries=1)
    next(flow)
    down = EndpointUnavailable("HTTP 503: busy", status=503)
    fault = ServerFault("garbage")
    steps, end = _events_of(flow, [down, fault, fault])
    assert isinstance(end, ServerFault)
    sends = [s for s in steps if isinstance(s, Send)]
    assert [(s.attempt, s.send) for s in sends] == [(0, 1), (0, 2), (0, 3)]
    events = [s.event for s in steps if isinstance(s, Notify)]
    assert events == [
        RecoveryEvent("transient", 0, status=503, message="HTTP 503: busy", send=1),
        RecoveryEvent("server_fault", 0, message="garbage", send=2),
        RecoveryEvent("server_fault", 0, message="garbage", send=3),
        RecoveryEvent("gave_up", 0, message="server fault 2 times", send=3),
    ]
    assert [s for s in steps if isinstance(s, Wait)] == [Wait(down), Wait(fault)]


def test_a_config_error_after_a_wait_propagates_with_its_event() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    config = EndpointConfigError("fix it", status=404, server_message="no model")
    steps, end = _events_of(flow, [EndpointUnavailable("refused"), config])
    assert end is config
    assert [s.event for s in steps if isinstance(s, Notify)][-1] == RecoveryEvent(
        "config", 0, status=404, message="fix it")


def test_overflow_events_carry_the_servers_numbers() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(24000))
    msg = ("This model's maximum context length is 32768 tokens. However, you requested 36144 "
           "tokens (30000 in the messages, 6144 in the completion).")
    step = flow.send(_rejected(msg))
    events = []
    while not isinstance(step, Assemble):
        if isinstance(step, Notify):
            events.append(step.event)
        step = flow.send(None)
    overflow, retry = events
    assert overflow == RecoveryEvent("overflow", 0, window=W, requested_output=6144, server_prompt_tokens=30000,
                                     prompt_is_lower_bound=False, predicted_prompt_tokens=24000,
                                     family=overflow.family, status=400)
    assert overflow.family
    assert retry == RecoveryEvent("retry", 1, window=W, server_prompt_tokens=30000, prompt_is_lower_bound=False,
                                  predicted_prompt_tokens=24000, next_limit=20872, family=overflow.family)
    step = flow.send(_req(20000))
    assert step == Send(_req(20000), 1, 1)
    with pytest.raises(StopIteration):
        step = flow.send(_ok())
        assert step == Notify(RecoveryEvent("recovered", 1, window=W, predicted_prompt_tokens=20000,
                                            message="prompts tried [24000, 20000]"))
        flow.send(None)


def test_gave_up_events_say_which_limit(caplog: pytest.LogCaptureFixture) -> None:

    flow = recovery_flow(window=W, max_overflow_retries=0)
    next(flow)
    flow.send(_req(30000))
    step = flow.send(_rejected("Input length (40000) exceeds model's maximum context length (32768)."))
    events = []
    with pytest.raises(ContextOverflowError, match="0 smaller retries did not fit"):
        while True:
            if isinstance(step, Notify):
                events.append(step.event)
            step = flow.send(None)
    assert events[-1] == RecoveryEvent("gave_up", 0, window=W, message="retries")


async def test_the_driver_logs_outages_quietly_and_overflows_loudly(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    llm = _Flaky(EndpointUnavailable("refused"), ServerFault("<html>"), _rejected(msg))
    sizes = iter([30000, 20000])
    caplog.set_level(logging.DEBUG, logger="emil.llm.recovery")
    await complete_with_recovery(llm, lambda _limit: _req(next(sizes)), window=W,
                                 patience=Patience("llm endpoint", backoff=Backoff(0.001, 0.002)))
    levels = {r.message.split(":")[0]: r.levelno for r in caplog.records if r.name == "emil.llm.recovery"}
    assert levels == {"llm transient": logging.DEBUG, "llm server_fault": logging.INFO, "llm overflow": logging.WARNING,
                      "llm retry": logging.INFO, "llm recovered": logging.INFO}
    record = next(r for r in caplog.records if r.message.startswith("llm transient"))
    assert record.message == f"llm transient: {RecoveryEvent('transient', 0, message='refused', send=1)}"


async def test_the_driver_calibrates_counts_and_notifies() -> None:
    at_least = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
                "output tokens and your prompt contains at least 26625 input tokens")
    llm = _Flaky(_rejected(at_least))
    calibrations: list[tuple[int, int, bool]] = []
    counted: list[ChatRequest] = []
    events: list[RecoveryEvent] = []
    sizes = iter([18000, 9000])

    async def count(request: ChatRequest) -> int | None:
        counted.append(request)
        return 36000

    out = await complete_with_recovery(llm, lambda _limit: _req(next(sizes)), window=W, on_event=events.append,
                                       calibrate=lambda p, s, lb: calibrations.append((p, s, lb)), count_exact=count)
    assert out.content == "ok" and calibrations == [(18000, 36000, False)]
    assert len(counted) == 1 and counted[0].predicted_prompt_tokens == 18000
    assert [e.kind for e in events] == ["overflow", "exact_count", "retry", "recovered"]
    assert events[1].server_prompt_tokens == 36000


_MSG = "Input length (40000) exceeds model's maximum context length (32768)."
_SAID = ("Overflow(window=32768, requested_output=None, prompt_tokens=40000, prompt_is_lower_bound=False, "
         "family='input-length-exceeds')")


def _give_up_run(flow, values):  # type: ignore[no-untyped-def]
    events = []
    step = next(flow)
    values = list(values)
    with pytest.raises(ContextOverflowError) as err:
        while True:
            if isinstance(step, Notify):
                events.append(step.event)
            step = flow.send(values.pop(0) if isinstance(step, Assemble | Send) else None)
    return events, err.value


def _overflow_event(predicted: int) -> RecoveryEvent:
    return RecoveryEvent("overflow", 0, window=W, server_prompt_tokens=40000, prompt_is_lower_bound=False,
                         predicted_prompt_tokens=predicted, family="input-length-exceeds", status=400)


_RETRY = RecoveryEvent("retry", 1, window=W, server_prompt_tokens=40000, prompt_is_lower_bound=False,
                       predicted_prompt_tokens=30000, next_limit=19568, family="input-length-exceeds")


@pytest.mark.parametrize("case", ["identical", "not smaller", "retries", "room", "output"])
def test_every_way_of_giving_up_word_for_word(case: str) -> None:
    r = _req(30000)
    if case == "identical":
        events, e = _give_up_run(recovery_flow(window=W), [r, _rejected(_MSG), r.model_copy(update={"predicted_prompt_tokens": 10})])
        assert events == [_overflow_event(30000), _RETRY, RecoveryEvent("gave_up", 1, window=W, message="identical")]
        assert str(e) == ("overflow recovery gave up: the re-assembled request is identical to one the server already "
                          f"rejected (window 32768, output 6144, server said {_SAID}, limit 19568, prompts tried [30000])")
        assert (e.window, e.requested_output, e.attempts, e.server_prompt_tokens) == (W, M, (30000,), 40000)
    elif case == "not smaller":
        events, e = _give_up_run(recovery_flow(window=W), [r, _rejected(_MSG), _req(30000, "other")])
        assert events == [_overflow_event(30000), _RETRY, RecoveryEvent("gave_up", 1, window=W, message="not smaller")]
        assert str(e) == ("overflow recovery gave up: limit 19568 produced a prompt of 30000 tokens, not smaller than the "
                          f"30000 that failed (window 32768, output 6144, server said {_SAID}, prompts tried [30000])")
        assert (e.window, e.requested_output, e.attempts, e.server_prompt_tokens) == (W, M, (30000, 30000), 40000)
    elif case == "retries":
        events, e = _give_up_run(recovery_flow(window=W, max_overflow_retries=0), [r, _rejected(_MSG)])
        assert events == [_overflow_event(30000), RecoveryEvent("gave_up", 0, window=W, message="retries")]
        assert str(e) == ("overflow recovery gave up: 0 smaller retries did not fit. window 32768, requested output 6144 "
                          "(server said None), room for the prompt 26624, server prompt tokens 40000 "
                          "(input-length-exceeds), predicted 30000, prompts tried [30000]")
        assert (e.window, e.requested_output, e.attempts, e.server_prompt_tokens) == (W, M, (30000,), 40000)
    elif case == "room":
        events, e = _give_up_run(recovery_flow(window=W), [_req(1), _rejected(_MSG)])
        assert events == [_overflow_event(1), RecoveryEvent("gave_up", 0, window=W, message="room")]
        assert str(e).startswith("overflow recovery gave up: no positive prompt limit is left. window 32768")
        assert e.attempts == (1,)
    else:
        big = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=65536, predicted_prompt_tokens=10)
        events, e = _give_up_run(recovery_flow(window=W), [big, _rejected("max_tokens=65536 cannot be greater than max_model_len=32768.")])
        assert events[-1] == RecoveryEvent("gave_up", 0, window=W, message="output")
        assert "lower output_reserve (EMIL_OUTPUT_RESERVE / --output-reserve)" in str(e)
        assert "room for the prompt -32768" in str(e) and e.requested_output == 65536


def test_a_limit_of_one_token_is_still_a_retry() -> None:
    # floor((26624 - 533) * 2 / 40000) = 1: the smallest positive limit is tried, not given up
    assert _limit_after(W, _req(2), _rejected(_MSG)) == 1


def test_the_room_at_exactly_zero_gives_up() -> None:
    at_window = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=W, predicted_prompt_tokens=10)
    events, _ = _give_up_run(recovery_flow(window=W), [at_window, _rejected(_MSG)])
    assert events[-1].message == "output"
    one_left = at_window.model_copy(update={"max_completion_tokens": W - 1})
    events, _ = _give_up_run(recovery_flow(window=W), [one_left, _rejected(_MSG)])
    assert events[-1].message == "room"  # room 1: past the output check, then no positive limit


def test_an_unexpected_step_answer_is_a_type_error() -> None:
    flow = recovery_flow(window=W)
    next(flow)
    with pytest.raises(TypeError, match="Assemble must be answered with a ChatRequest"):
        flow.send(None)
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(10))
    with pytest.raises(TypeError, match="unexpected outcome 42"):
        flow.send(42)


async def test_the_drivers_defaults_two_smaller_retries_three_resends() -> None:
    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    llm = _Flaky(_rejected(msg), _rejected(msg), _rejected(msg))
    sizes = iter([30000, 20000, 10000, 5000])
    with pytest.raises(ContextOverflowError, match="2 smaller retries did not fit"):
        await complete_with_recovery(llm, lambda _limit: _req(next(sizes)), window=W)
    faults = _Flaky(*[ServerFault("x")] * 4)
    with pytest.raises(ServerFault):
        await complete_with_recovery(faults, lambda _limit: _req(100), window=W,
                                     patience=Patience("x", backoff=Backoff(0.001, 0.001)))
    assert len(faults.sent) == 4  # one send, three resends
    three = _Flaky(*[ServerFault("x")] * 3)
    await complete_with_recovery(three, lambda _limit: _req(100), window=W,
                                 patience=Patience("x", backoff=Backoff(0.001, 0.001)))
    assert len(three.sent) == 4
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(100))
    for _ in range(3):
        assert isinstance(flow.send(ServerFault("x")), Notify)
        assert isinstance(flow.send(None), Wait)
        assert isinstance(flow.send(None), Send)
    step = flow.send(ServerFault("x"))
    assert isinstance(step, Notify) and step.event.kind == "server_fault"
    assert flow.send(None).event.kind == "gave_up"  # type: ignore[union-attr]


async def test_the_wait_is_told_the_error() -> None:
    from emil.backoff import OutageEvent

    events: list[OutageEvent] = []
    llm = _Flaky(EndpointUnavailable("refused at the door"))
    await complete_with_recovery(llm, lambda _limit: _req(100), window=W,
                                 patience=Patience("x", backoff=Backoff(0.001, 0.001), on_event=events.append))
    assert events[0].error == "refused at the door"


def test_a_custom_lower_bound_slack_is_used() -> None:
    at_least = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
                "output tokens and your prompt contains at least 26625 input tokens")
    # ceil(26625 * 1.5) = 39938; (26624 - 533) * 18000 / 39938
    assert _limit_after(W, _req(18000), _rejected(at_least), lower_bound_slack=0.5) == 11759


def test_a_floor_below_the_room_is_raised_to_it() -> None:
    low = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
           "output tokens and your prompt contains at least 20000 input tokens")
    # max(20000, 26625) = 26625: the prompt is longer than the room whatever the floor says
    assert _limit_after(W, _req(18000), _rejected(low)) == 15338


def test_a_count_of_zero_is_no_count_and_the_exact_count_event_is_whole() -> None:
    at_least = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
                "output tokens and your prompt contains at least 26625 input tokens")
    assert _limit_after(W, _req(18000), _rejected(at_least), count=0) == 15338  # still a floor
    flow = recovery_flow(window=W)
    next(flow)
    flow.send(_req(18000))
    step = flow.send(_rejected(at_least))
    while not isinstance(step, CountExactly):
        step = flow.send(None)
    step = flow.send(36000)
    assert step == Notify(RecoveryEvent("exact_count", 0, window=W, server_prompt_tokens=36000))
    assert _limit_after(W, _req(18000), _rejected(at_least), count=1) is not None


def test_a_request_without_a_prediction_shrinks_by_its_size() -> None:
    bare = ChatRequest(messages=[{"role": "user", "content": "x" * 100}], max_completion_tokens=M)
    size = len(str(bare.messages[0]))
    # no prediction: the limit is the room less the margin, kept below the failed size
    assert _limit_after(W, bare, _rejected(_MSG)) == size - 1
    big = ChatRequest(messages=[{"role": "user", "content": "x" * 40000}], max_completion_tokens=M)
    assert _limit_after(W, big, _rejected(_MSG)) == 26624 - 533


def test_a_zero_prediction_gives_up_for_lack_of_room() -> None:
    events, e = _give_up_run(recovery_flow(window=W), [_req(0), _rejected(_MSG)])
    assert events[-1].message == "room"
    assert str(e) == ("overflow recovery gave up: no positive prompt limit is left. window 32768, requested output 6144 "
                      "(server said None), room for the prompt 26624, server prompt tokens 40000 (input-length-exceeds), "
                      "predicted 0, prompts tried [0]")


def test_the_servers_window_wins_over_the_configured_one() -> None:
    small = "Input length (20000) exceeds model's maximum context length (16384)."
    # room 16384 - 6144 = 10240, margin max(64, 205) = 205: (10240 - 205) * 18000 / 20000
    assert _limit_after(W, _req(18000), _rejected(small)) == 9031


def test_a_lower_bound_gives_up_saying_at_least() -> None:
    at_least = ("This model's maximum context length is 32768 tokens. However, you requested 6144 "
                "output tokens and your prompt contains at least 26625 input tokens")
    _events, e = _give_up_run(recovery_flow(window=W, max_overflow_retries=0), [_req(18000), _rejected(at_least)])
    assert "server prompt tokens at least 26625 (v0.27-at-least)" in str(e)


def test_an_overflow_inside_a_configuration_error_is_read_from_its_text() -> None:
    from emil.llm.recovery import _overflow_of

    request = _req(100)
    hidden = EndpointConfigError("HTTP 413: Input length (5000) exceeds model's maximum context length (4096).")
    overflow = _overflow_of(hidden, request, W)
    assert overflow is not None and overflow.prompt_tokens == 5000
    told = EndpointConfigError("x", server_message="Input length (6000) exceeds model's maximum context length (4096).")
    assert _overflow_of(told, request, W).prompt_tokens == 6000  # type: ignore[union-attr]


async def test_the_driver_passes_its_retry_limits_to_the_flow() -> None:
    msg = "Input length (40000) exceeds model's maximum context length (32768)."
    llm = _Flaky(_rejected(msg), _rejected(msg))
    sizes = iter([30000, 20000, 10000])
    with pytest.raises(ContextOverflowError, match="1 smaller retries did not fit"):
        await complete_with_recovery(llm, lambda _limit: _req(next(sizes)), window=W, max_overflow_retries=1)
    assert len(llm.sent) == 2
    faults = _Flaky(*[ServerFault("x")] * 2)
    with pytest.raises(ServerFault):
        await complete_with_recovery(faults, lambda _limit: _req(100), window=W, max_fault_retries=1,
                                     patience=Patience("x", backoff=Backoff(0.001, 0.001)))
    assert len(faults.sent) == 2  # one send, one resend

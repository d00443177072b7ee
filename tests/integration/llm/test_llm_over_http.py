"""The live client and the recovery policy against the vLLM-dialect double over real HTTP."""

from __future__ import annotations

import itertools

import httpx
import pytest

from emil.backoff import Backoff, OutageEvent, Patience, wait_out
from emil.exceptions import (
    ContextOverflowError,
    EndpointConfigError,
    EndpointUnavailable,
    ModelNotServedError,
)
from emil.llm import detect_clamp
from emil.llm.client import OpenAIClient
from emil.llm.recovery import complete_with_recovery
from emil.llm.recovery_steps import RecoveryEvent
from emil.llm.types import ChatRequest
from emil.testing.brains import NpcBrain, fixed_reply, tool_call_brain
from emil.testing.script import Reply, ScriptedCall
from emil.testing.vllm_answer import SpecDecode
from emil.testing.vllm_double import DOUBLE_HEADER, VLLMDouble
from emil.testing.vllm_wordings import WORDINGS, Wording

from .conftest import Assembler, server_counter

pytestmark = pytest.mark.slow

W, M = 8192, 1024
LONG = Reply(content="fine, " * 300, completion_tokens=M)  # long enough to be clamped


FAMILIES = {
    "old": "old-in-the-messages",
    "request_has": "max-tokens-too-large",
    "you_passed": "you-passed-tokens",
    "at_least": "v0.27-at-least",
    "clamp": "v0.33-prompt-alone",
}


@pytest.mark.parametrize(
    ("wording", "budget", "family"),
    [(w, W - M, FAMILIES[w]) for w in WORDINGS]
    # a prompt that fits the window alone but not with the output: 0.33 clamps, silently
    + [("clamp", 4900, "v0.33-clamp")],
)
async def test_each_wording_recovers_within_two_retries_strictly_shrinking(
    wording: Wording, budget: int, family: str
) -> None:
    # Emil predicts with 4 chars/token, the server counts 2.6: the field notes' miscalibration.
    assemble = Assembler(200, budget=budget, output=M)
    events: list[RecoveryEvent] = []
    calibrations: list[tuple[int, int, bool]] = []
    async with VLLMDouble(fixed_reply(LONG), window=W, wording=wording,
                          counter=server_counter) as double, OpenAIClient(double.base_url) as llm:
        served = await llm.discover()
        assert served.max_model_len == W
        completion = await complete_with_recovery(
            llm, assemble, window=served.max_model_len, on_event=events.append,
            calibrate=lambda p, a, lb: calibrations.append((p, a, lb)),
        )
    sizes = double.prompt_sizes
    assert 2 <= len(sizes) <= 3, (wording, sizes, events)
    assert all(a > b for a, b in itertools.pairwise(sizes)), sizes
    assert sizes[-1] + M <= W
    assert completion.finish_reason == "stop"
    kinds = [e.kind for e in events]
    assert kinds.count("overflow") == len(sizes) - 1 and kinds[-1] == "recovered"
    assert len(calibrations) == len(sizes) - 1
    first = next(e for e in events if e.kind == "overflow")
    assert first.window == W and first.predicted_prompt_tokens == calibrations[0][0]
    assert first.family == family
    if family == "v0.33-clamp":
        assert first.server_prompt_tokens == sizes[0] and sizes[0] < W


async def test_at_least_is_shrunk_past_the_bound() -> None:
    assemble = Assembler(200, budget=W - M, output=M)
    events: list[RecoveryEvent] = []
    async with VLLMDouble(fixed_reply(LONG), window=W, wording="at_least",
                          counter=server_counter) as double, OpenAIClient(double.base_url) as llm:
        await complete_with_recovery(llm, assemble, window=W, on_event=events.append)
    overflow = next(e for e in events if e.kind == "overflow")
    # the server said "at least (W - M) + 1": a floor, not the size it actually had
    assert overflow.prompt_is_lower_bound is True
    assert overflow.server_prompt_tokens == W - M + 1 < double.prompt_sizes[0]
    assert double.prompt_sizes[-1] < W - M - 64  # past the bound, with margin


async def test_at_least_with_server_tokenize_recovers_in_one_retry() -> None:
    assemble = Assembler(200, budget=W - M, output=M)
    events: list[RecoveryEvent] = []
    async with VLLMDouble(fixed_reply(LONG), window=W, wording="at_least",
                          counter=server_counter) as double, OpenAIClient(double.base_url) as llm:
        await llm.discover()
        await complete_with_recovery(llm, assemble, window=W, on_event=events.append,
                                     count_exact=llm.count_prompt_tokens)
    exact = next(e for e in events if e.kind == "exact_count")
    assert exact.server_prompt_tokens == double.prompt_sizes[0]
    assert len(double.prompt_sizes) == 2


async def test_gives_up_with_every_number_when_nothing_fits() -> None:
    # a pinned prompt that never shrinks: the assembler ignores the limit
    request = ChatRequest(messages=[{"role": "user", "content": "x " * 40000}],
                          max_completion_tokens=M, predicted_prompt_tokens=9000)
    async with VLLMDouble(fixed_reply(LONG), window=W, wording="you_passed",
                          counter=server_counter) as double, OpenAIClient(double.base_url) as llm:
        with pytest.raises(ContextOverflowError, match="identical") as err:
            await complete_with_recovery(llm, lambda _limit: request, window=W)
    assert len(double.requests) == 1  # never sent twice
    assert err.value.window == W and err.value.attempts == (9000,)
    # the server only said "You passed 7169" (its tokenization cap, a floor) and Emil kept it
    assert err.value.server_prompt_tokens == W - M + 1 and "9000" in str(err.value)


async def test_clamp_is_detected_on_a_plain_completion() -> None:
    messages = [{"role": "user", "content": "y" * 19500}]
    async with VLLMDouble(fixed_reply(LONG), window=W, wording="clamp",
                          counter=server_counter) as double, OpenAIClient(double.base_url) as llm:
        completion = await llm.complete(ChatRequest(messages=messages,
                                                    max_completion_tokens=M))
    assert completion.finish_reason == "length" and completion.usage is not None
    assert completion.usage.completion_tokens == W - double.prompt_sizes[0] < M
    overflow = detect_clamp(M, completion.usage, completion.finish_reason, W)
    assert overflow is not None and overflow.prompt_tokens == double.prompt_sizes[0]


@pytest.mark.parametrize("refuse", [True, False])
async def test_transient_loading_backs_off_and_succeeds(refuse: bool) -> None:
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=16)
    async with VLLMDouble(fixed_reply(Reply(content="up")), window=W,  # noqa: SIM117 (the client needs the started double's port)
                          counter=server_counter) as double:
        async with OpenAIClient(double.base_url, model=double.model, timeout=5) as llm:
            double.loading(0.6, refuse=refuse)
            with pytest.raises(EndpointUnavailable):
                await llm.complete(request)
            events: list[OutageEvent] = []
            patience = Patience("llm endpoint", backoff=Backoff(base=0.05, cap=0.3), limit_s=30,
                                on_event=events.append)
            completion = await wait_out(lambda: llm.complete(request), patience)
    assert completion.content == "up"
    assert patience.episodes == 1 and not patience.down and patience.backoff.attempt == 0
    kinds = [e.kind for e in events]
    assert kinds[0] == "down" and kinds[-1] == "up" and set(kinds[1:-1]) == {"retry"}


@pytest.mark.parametrize("stream", [False, True])
async def test_dropped_connection_is_transient(stream: bool) -> None:
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=16,
                          stream=stream)
    async with VLLMDouble(fixed_reply(Reply(content="up")), window=W,  # noqa: SIM117 (the client needs the started double's port)
                          counter=server_counter) as double:
        async with OpenAIClient(double.base_url, model=double.model, timeout=5) as llm:
            double.drop_next()
            with pytest.raises(EndpointUnavailable):
                await llm.complete(request)
            double.fail_next(503, "Service Unavailable")
            with pytest.raises(EndpointUnavailable):
                await llm.complete(request)
            assert (await llm.complete(request)).content == "up"


async def test_tool_choice_not_enabled_stops_at_once_with_the_fix() -> None:
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=16,
                          tools=[{"type": "function", "function": {"name": "say",
                                                                   "parameters": {}}}])
    async with VLLMDouble(NpcBrain(), window=W, counter=server_counter,  # noqa: SIM117 (the client needs the started double's port)
                          auto_tool_choice=False) as double:
        async with OpenAIClient(double.base_url, model=double.model) as llm:
            with pytest.raises(EndpointConfigError) as err:
                await complete_with_recovery(
                    llm, lambda _l: request, window=W,
                    patience=Patience("llm endpoint", backoff=Backoff(base=0.01, cap=0.02), limit_s=5),
                )
            assert len(double.requests) == 1  # never retried
            # the message's other remedy works: a named tool choice needs no auto parser
            named = request.model_copy(update={
                "tool_choice": {"type": "function", "function": {"name": "say"}},
                "messages": [{"role": "user", "content": 'Steve says: "hello"'}]})
            completion = await llm.complete(named)
    assert "--enable-auto-tool-choice" in str(err.value) and err.value.status == 400
    assert completion.tool_calls[0].name == "say"
    assert completion.tool_calls[0].arguments == {"text": "[scripted] Hello, Steve!"}


async def test_wrong_model_and_wrong_key_are_configuration_errors() -> None:
    request = ChatRequest(messages=[{"role": "user", "content": "hi"}], max_completion_tokens=16)
    async with VLLMDouble(NpcBrain(), window=W, counter=server_counter,
                          api_key="sekrit") as double:
        async with OpenAIClient(double.base_url, model="not-served", api_key="sekrit") as llm:
            with pytest.raises(ModelNotServedError, match=double.model):
                await llm.discover()
            llm.model = "not-served"
            with pytest.raises(EndpointConfigError, match="/v1/models") as err:
                await llm.complete(request)
            assert err.value.status == 404
        async with OpenAIClient(double.base_url, model=double.model, api_key="wrong") as llm:
            with pytest.raises(EndpointConfigError, match="api_key") as err:
                await llm.complete(request)
            assert err.value.status == 401


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_parse_and_invalid_arguments_are_data(stream: bool) -> None:
    reply = Reply(
        reasoning="a zombie; better follow Steve",
        tool_calls=(ScriptedCall("follow", {"player": "Steve"}),
                    ScriptedCall("goto", '{"x": 1, "y": ')),
    )
    tools = [{"type": "function", "function": {"name": n, "parameters": {}}}
             for n in ("follow", "goto")]
    request = ChatRequest(messages=[{"role": "user", "content": "<Steve> follow me"}],
                          tools=tools, tool_choice="auto", max_completion_tokens=256,
                          stream=stream, enable_thinking=True, temperature=0.6, top_p=0.95,
                          top_k=20, extra_body={"min_tokens": 1})
    async with VLLMDouble(fixed_reply(reply), window=W, counter=server_counter,  # noqa: SIM117 (the client needs the started double's port)
                          reasoning_field="reasoning_content" if stream else "reasoning") as d:
        async with OpenAIClient(d.base_url) as llm:
            completion = await llm.complete(request)
    sent = d.requests[0]
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}
    assert sent["top_k"] == 20 and sent["min_tokens"] == 1 and sent["tool_choice"] == "auto"
    assert sent["max_completion_tokens"] == 256
    assert completion.reasoning == "a zombie; better follow Steve"
    good, bad = completion.tool_calls
    assert good.name == "follow" and good.arguments == {"player": "Steve"} and good.error is None
    assert bad.name == "goto" and bad.arguments is None and bad.raw_arguments == '{"x": 1, "y": '
    assert bad.error is not None and "JSON" in bad.error
    assert completion.finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.prompt_tokens == d.prompt_sizes[0]
    assert completion.timings is not None
    if stream:
        assert completion.timings.first_token_s is not None


async def test_tool_validator_marks_unknown_tools() -> None:
    def validator(call):  # type: ignore[no-untyped-def]
        known = {"follow"}
        return call if call.name in known else call.model_copy(
            update={"error": f"unknown tool {call.name!r}"})

    async with VLLMDouble(tool_call_brain("fly", {"to": "moon"}), window=W,  # noqa: SIM117 (the client needs the started double's port)
                          counter=server_counter) as d:
        async with OpenAIClient(d.base_url, tool_validator=validator) as llm:
            completion = await llm.complete(
                ChatRequest(messages=[{"role": "user", "content": "go"}], tool_choice="required",
                            tools=[{"type": "function", "function": {"name": "follow"}}],
                            max_completion_tokens=64))
    assert completion.tool_calls[0].error == "unknown tool 'fly'"


async def test_side_endpoints_speak_vllm() -> None:
    async with VLLMDouble(NpcBrain(), window=W, counter=server_counter,
                          spec_decode=SpecDecode(k=3, acceptance=0.8)) as d:
        async with OpenAIClient(d.base_url) as llm:
            await llm.complete(ChatRequest(messages=[{"role": "user", "content": "<Alex> hi"}],
                                           max_completion_tokens=64,
                                           extra_body={"ignore_eos": True}))
            request = ChatRequest(messages=[{"role": "user", "content": "count me"}])
            await llm.discover()
            counted = await llm.count_prompt_tokens(request)
        async with httpx.AsyncClient(base_url=d.root_url) as http:
            health = await http.get("/health")
            version = (await http.get("/version")).json()
            metrics = (await http.get("/metrics")).text
            tok = (await http.post("/tokenize", json={"model": d.model, "prompt": "abc"})).json()
    assert health.status_code == 200 and health.headers[DOUBLE_HEADER[0]] == DOUBLE_HEADER[1]
    assert version["version"].endswith("+double")
    assert counted == server_counter(request.messages, None, False)
    assert tok["max_model_len"] == W and tok["count"] == len(tok["tokens"])
    values = {line.split("{")[0]: float(line.rsplit(" ", 1)[1])
              for line in metrics.splitlines() if line.startswith("vllm:")}
    assert values["vllm:generation_tokens_total"] == 64  # ignore_eos: the full maximum
    drafts = values["vllm:spec_decode_num_drafts_total"]
    accepted = values["vllm:spec_decode_num_accepted_tokens_total"]
    assert values["vllm:spec_decode_num_draft_tokens_total"] == 3 * drafts
    assert drafts + accepted >= 64 and 0 < accepted <= 3 * drafts
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total",
                 "vllm:prefix_cache_hits_total",
                 "vllm:spec_decode_num_accepted_tokens_per_pos_total"):
        assert name in values


async def test_outage_during_recovery_never_resends_the_rejected_prompt() -> None:
    assemble = Assembler(200, budget=W - M, output=M)
    events: list[RecoveryEvent] = []
    async with VLLMDouble(fixed_reply(LONG), window=W, wording="request_has",
                          counter=server_counter) as double:
        def on_event(event: RecoveryEvent) -> None:
            events.append(event)
            if event.kind == "overflow":
                double.fail_next(503, "Service Unavailable", times=2)

        async with OpenAIClient(double.base_url) as llm:
            patience = Patience("llm endpoint", backoff=Backoff(base=0.01, cap=0.05), limit_s=30)
            completion = await complete_with_recovery(
                llm, assemble, window=W, on_event=on_event, patience=patience,
            )
    assert completion.finish_reason == "stop"
    first, *rest = double.requests
    assert len(rest) == 3 and rest[0] == rest[1] == rest[2]  # the smaller retry, re-sent
    assert first["messages"] != rest[0]["messages"]  # the rejected prompt never went again
    assert [e.kind for e in events] == ["overflow", "retry", "transient", "transient",
                                        "recovered"]
    assert patience.episodes == 1 and patience.backoff.attempt == 0 and not patience.down


async def test_default_counter_is_the_projects_exact_count_to_the_token() -> None:
    from emil.model.counting import count_prompt_tokens

    window, output = 4096, 1024
    system = {"role": "system", "content": "You are Emil."}

    def request_of(words: int) -> ChatRequest:
        messages = [system, {"role": "user", "content": "zombie " * words}]
        return ChatRequest(messages=messages, max_completion_tokens=output,
                           predicted_prompt_tokens=count_prompt_tokens(messages))

    # find the largest prompt that fits W - M exactly, by Emil's own count (binary search)
    low, high = 1, window
    while high - low > 1:
        mid = (low + high) // 2
        size = request_of(mid).predicted_prompt_tokens
        assert size is not None
        low, high = (mid, high) if size <= window - output else (low, mid)
    fits, too_big = request_of(low), request_of(high)
    assert fits.predicted_prompt_tokens == window - output  # one token per "zombie "
    async with VLLMDouble(fixed_reply(Reply(content="ok")), window=window,  # noqa: SIM117
                          wording="you_passed") as double:
        async with OpenAIClient(double.base_url) as llm:
            completion = await llm.complete(fits)
            assert completion.usage is not None
            assert completion.usage.prompt_tokens == fits.predicted_prompt_tokens
            with pytest.raises(ContextOverflowError) as err:
                await llm.complete(too_big)
            assert err.value.server_prompt_tokens == window - output + 1
            tokenized = await llm.count_prompt_tokens(too_big)
    assert tokenized == too_big.predicted_prompt_tokens


async def test_a_prompt_the_template_refuses_is_a_configuration_error() -> None:
    request = ChatRequest(messages=[{"role": "system", "content": "You are Emil."}],
                          max_completion_tokens=16)
    async with VLLMDouble(fixed_reply(Reply(content="ok")), window=W) as double:  # noqa: SIM117
        async with OpenAIClient(double.base_url) as llm:
            with pytest.raises(EndpointConfigError, match="No user query") as err:
                await llm.complete(request)
    assert err.value.status == 400 and double.prompt_sizes == []


async def test_streamed_and_plain_answers_carry_the_same_text() -> None:
    reply = Reply(content="a long scripted answer " * 20, reasoning="thinking " * 10,
                  completion_tokens=12)
    async with VLLMDouble(fixed_reply(reply), window=W, counter=server_counter,  # noqa: SIM117
                          spec_decode=SpecDecode(k=2, acceptance=0.7)) as double:
        async with OpenAIClient(double.base_url) as llm:
            plain, streamed = [
                await llm.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}],
                                               max_completion_tokens=64, stream=stream))
                for stream in (False, True)
            ]
    assert streamed.content == plain.content == reply.content
    assert streamed.reasoning == plain.reasoning == reply.reasoning
    assert plain.usage is not None and streamed.usage is not None
    assert plain.usage.completion_tokens == streamed.usage.completion_tokens == 12
    assert plain.usage.prompt_tokens == streamed.usage.prompt_tokens
    # the same prompt twice: the second is served from the (simulated) prefix cache
    assert plain.usage.cached_tokens == 0
    assert streamed.usage.cached_tokens == (plain.usage.prompt_tokens - 1) // 16 * 16

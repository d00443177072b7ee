"""What a failed exchange with the LLM server means (emil.llm.classify)."""

from __future__ import annotations

import pytest

from emil.llm.classify import TRANSIENT_STATUSES, classify_failure, config_hint, excerpt


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (400, "This model's maximum context length is 4096 tokens. However, your request has "
              "5000 input tokens.", "overflow"),
        (502, "Input length (5000) exceeds model's maximum context length (4096).", "overflow"),
        (None, "Connection refused", "transient"),
        (408, "Request Timeout", "transient"),
        (425, "Too Early", "transient"),
        (429, "Too Many Requests", "transient"),
        (500, "Internal Server Error", "transient"),
        (502, "Bad Gateway", "transient"),
        (503, "Service Unavailable", "transient"),
        (504, "Gateway Timeout", "transient"),
        (400, "engine loading, try again", "transient"),
        (400, "model not ready", "transient"),
        (409, "Starting up", "transient"),
        (400, "Warming up the engine", "transient"),
        (401, "Unauthorized", "config"),
        (403, "Forbidden", "config"),
        (404, "The model `x` does not exist.", "config"),
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
              "be set", "config"),
        (407, "Proxy Authentication Required", "config"),
        (405, "Method Not Allowed", "config"),
        (400, "no chat template is defined for this tokenizer", "config"),
        (400, "reasoning parser qwen3 is not registered", "config"),
        # one request's content, not the setup: that turn fails (three in a row: the loop stops)
        (400, "bad top_k", "rejected"),
        (409, "Conflict", "rejected"),
        (413, "Request Entity Too Large", "rejected"),
        (422, "Unprocessable", "rejected"),
        (501, "Not Implemented", "config"),
        (505, "HTTP Version Not Supported", "config"),
    ],
)
def test_classify_failure(status: int | None, message: str, expected: str) -> None:
    assert classify_failure(status, message) == expected


def test_the_transient_statuses_are_exactly_these() -> None:
    assert frozenset({408, 425, 429, 500, 502, 503, 504}) == TRANSIENT_STATUSES


def test_config_hints_say_what_to_change() -> None:
    msg = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    assert "--enable-auto-tool-choice" in config_hint(400, msg)
    assert msg in config_hint(400, msg)
    assert "/v1/models" in config_hint(404, "no such model", model="qwen")
    assert "'qwen'" in config_hint(404, "no such model", model="qwen")
    assert "api_key" in config_hint(401, "Unauthorized")
    assert "api_key" in config_hint(403, "Forbidden")
    assert "--reasoning-parser" in config_hint(400, "reasoning parser is not set")
    assert "request options" in config_hint(400, "bad top_k")
    assert config_hint(418, "teapot").endswith("Server said (HTTP 418): teapot")


def test_excerpt_is_one_line_and_bounded() -> None:
    page = "<html>\n<body>" + "x" * 1000 + "</body></html>"
    short = excerpt(page.encode(), limit=50)
    assert "\n" not in short and short.startswith("<html> <body>xxx")
    assert short.endswith(f"… ({len(page)} chars)")
    assert excerpt("fine", limit=4) == "fine"
    assert excerpt("fine!", limit=4) == "fine… (5 chars)"
    assert excerpt(b"\xff ok") == "\ufffd ok"


@pytest.mark.parametrize(("status", "transient"), [
    (408, True), (425, True), (429, True), (500, True), (502, True), (503, True), (504, True),
    (400, False), (401, False), (404, False), (422, False), (501, False),
])
async def test_tokenize_failures_are_classified_like_every_other_exchange(status: int, transient: bool) -> None:
    import httpx

    from emil.exceptions import EndpointConfigError, EndpointUnavailable
    from emil.llm.tokenize import ServerTokenizeCounter

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text="nope")

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        counter = ServerTokenizeCounter("http://127.0.0.1:9/v1", "m", client=client)
        expected = EndpointUnavailable if transient else EndpointConfigError
        with pytest.raises(expected) as err:
            await counter.count("hi")
    assert err.value.status == status  # type: ignore[attr-defined]


HINTS = {
    401: "the server refused the API key: set Emil's api_key (emil.toml, EMIL_API_KEY or --api-key) to the key "
         "vLLM was started with, or start vLLM without --api-key",
    404: "the server does not serve model 'qwen' (or the endpoint is wrong): set model (EMIL_MODEL / --model) to "
         "an id listed by GET /v1/models, or 'auto', and make the endpoint (EMIL_ENDPOINT / --endpoint) end in /v1",
}


@pytest.mark.parametrize(("status", "message", "what"), [
    (401, "Unauthorized", HINTS[401]),
    (403, "Forbidden", HINTS[401]),
    (404, "The model `qwen` does not exist.", HINTS[404]),
    (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
     "the server cannot parse tool calls: start vLLM with --enable-auto-tool-choice --tool-call-parser <parser "
     "for this model> (qwen3_coder for Qwen3.5/3.6), or set tool_choice to 'required' or a named function"),
    (400, "please set --tool-call-parser",
     "the server cannot parse tool calls: start vLLM with --enable-auto-tool-choice --tool-call-parser <parser "
     "for this model> (qwen3_coder for Qwen3.5/3.6), or set tool_choice to 'required' or a named function"),
    (400, "Enable-Auto-Tool-Choice is off",
     "the server cannot parse tool calls: start vLLM with --enable-auto-tool-choice --tool-call-parser <parser "
     "for this model> (qwen3_coder for Qwen3.5/3.6), or set tool_choice to 'required' or a named function"),
    (400, "Reasoning requires a Parser", "start vLLM with --reasoning-parser <parser for this model> (qwen3 for Qwen)"),
    (400, "no parser for this", "the server rejected the request as invalid: check the request options "
                                "(tool_choice, chat_template_kwargs, sampling settings, extra_body)"),
    (400, "reasoning effort unsupported", "the server rejected the request as invalid: check the request options "
                                          "(tool_choice, chat_template_kwargs, sampling settings, extra_body)"),
])
def test_each_hint_word_for_word(status: int, message: str, what: str) -> None:
    assert config_hint(status, message, model="qwen") == f"{what}. Server said (HTTP {status}): {message}"


def test_overflow_rejected_keeps_every_number() -> None:
    from emil.llm import parse_overflow
    from emil.llm.classify import OverflowRejected

    msg = "Input length (5000) exceeds model's maximum context length (4096)."
    overflow = parse_overflow(msg)
    assert overflow is not None
    err = OverflowRejected(overflow, status=502, server_message=msg)
    assert str(err) == f"server rejected the prompt for size (HTTP 502): {msg}"
    assert (err.window, err.requested_output, err.server_prompt_tokens) == (4096, overflow.requested_output, 5000)
    assert (err.overflow, err.status, err.server_message) == (overflow, 502, msg)


def test_excerpt_keeps_400_characters_by_default() -> None:
    assert excerpt("a" * 400) == "a" * 400
    assert excerpt("a" * 401) == "a" * 400 + "… (401 chars)"


def test_overflow_rejected_keeps_the_requested_output() -> None:
    from emil.llm import parse_overflow
    from emil.llm.classify import OverflowRejected

    msg = ("This model's maximum context length is 32768 tokens. However, you requested 36144 tokens "
           "(30000 in the messages, 6144 in the completion).")
    overflow = parse_overflow(msg)
    assert overflow is not None
    err = OverflowRejected(overflow, status=400, server_message=msg)
    assert (err.window, err.requested_output, err.server_prompt_tokens) == (32768, 6144, 30000)

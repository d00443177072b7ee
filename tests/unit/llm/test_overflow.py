"""parse_overflow over the real vLLM wordings (from vLLM source and public reports)."""

from __future__ import annotations

import json

import pytest

from emil.llm import Overflow, detect_clamp, parse_overflow
from emil.llm.types import Usage

W, M = 32768, 6144

# (message, window, requested_output, prompt_tokens, lower_bound)
CASES: list[tuple[str, int, int | None, int, bool]] = [
    # 1. the old "N in the messages" form, with and without max_tokens
    (
        "This model's maximum context length is 32768 tokens. However, you requested 36144 "
        "tokens (30000 in the messages, 6144 in the completion). Please reduce the length of the "
        "messages or completion.",
        W, M, 30000, False,
    ),
    (
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
        "in the messages, Please reduce the length of the messages.",
        4096, None, 5000, False,
    ),
    # the completions-endpoint twin and the "messages resulted in" form some proxies return
    (
        "This model's maximum context length is 4096 tokens, however you requested 5000 tokens "
        "(4000 in your prompt; 1000 for the completion). Please reduce your prompt; or "
        "completion length.",
        4096, 1000, 4000, False,
    ),
    (
        "This model's maximum context length is 4096 tokens. However, your messages resulted in "
        "5000 tokens. Please reduce the length of the messages.",
        4096, None, 5000, False,
    ),
    # 2. "your request has N input tokens" and "'max_tokens' ... is too large"
    (
        "This model's maximum context length is 1536 tokens. However, your request has 4176 "
        "input tokens. Please reduce the length of the input messages.",
        1536, None, 4176, False,
    ),
    (
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
        "context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - "
        "2778). None",
        4096, 8000, 2778, False,
    ),
    # 3. early 2026 "You passed ..." (tokens, the capped count, and the character precheck)
    (
        "You passed 30000 input tokens and requested 6144 output tokens. However, the model's "
        "context length is only 32768 tokens, resulting in a maximum input length of 26624 "
        "tokens. Please reduce the length of the input prompt.",
        W, M, 30000, False,
    ),
    (
        "You passed 26625 input tokens and requested 6144 output tokens. However, the model's "
        "context length is only 32768 tokens, resulting in a maximum input length of 26624 "
        "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
        "value=26625)",
        W, M, 26625, True,
    ),
    (
        "You passed 200000 input characters and requested 6144 output tokens. However, the "
        "model's context length is only 32768 tokens, resulting in a maximum input length of "
        "26624 tokens (at most 106496 characters). Please reduce the length of the input "
        "prompt. (parameter=input_text, value=200000)",
        W, M, 26625, True,
    ),
    # 4. 0.27-0.30: exact total, "at least" (the field notes' numbers) and characters
    (
        "This model's maximum context length is 8192 tokens. However, you requested 64 output "
        "tokens and your prompt contains 10000 input tokens, for a total of 10064 tokens. Please "
        "reduce the length of the input prompt or the number of requested output tokens.",
        8192, 64, 10000, False,
    ),
    (
        "This model's maximum context length is 32768 tokens. However, you requested 6144 output "
        "tokens and your prompt contains at least 26625 input tokens, for a total of at least "
        "32769 tokens. Please reduce the length of the input prompt or the number of requested "
        "output tokens. (parameter=input_tokens, value=26625)",
        W, M, 26625, True,
    ),
    (
        "This model's maximum context length is 32768 tokens. However, you requested 6144 output "
        "tokens and your prompt contains at least 26625 input tokens, for a total of at least "
        "32769 tokens. Please reduce the length of the input prompt or the number of requested "
        "output tokens. None",
        W, M, 26625, True,
    ),
    (
        "This model's maximum context length is 8192 tokens. However, you requested 64 output "
        "tokens and your prompt contains 100000 characters (more than 81280 characters, which is "
        "the upper bound for 8128 input tokens). Please reduce the length of the input prompt or "
        "the number of requested output tokens. (parameter=input_text, value=100000)",
        8192, 64, 8129, True,
    ),
    (
        "This model's maximum context length is 32768 tokens. However, you requested 32768 output "
        "tokens and your prompt contains 31800 characters (more than 0 characters, which is the "
        "upper bound for 0 input tokens). Please reduce the length of the input prompt or the "
        "number of requested output tokens. (parameter=input_text, value=31800)",
        W, 32768, 1, True,
    ),
    # 5. 0.33: prompt alone too long, decoder prompt, max_tokens above window, input length
    (
        "This model's maximum context length is 32768 tokens. However, your prompt contains at "
        "least 32769 input tokens, which exceeds this limit even without any output tokens. "
        "Please reduce the length of the input prompt. (parameter=input_tokens, value=32769)",
        W, None, 32769, True,
    ),
    (
        "This model's maximum context length is 32768 tokens. However, your prompt contains "
        "40000 input tokens, which exceeds this limit even without any output tokens. Please "
        "reduce the length of the input prompt.",
        W, None, 40000, False,
    ),
    (
        "The decoder prompt (length 40000) plus the number of requested output tokens (at least "
        "1) is longer than the maximum model length of 32768. Make sure that `max_model_len` is "
        "no smaller than the number of text tokens plus multimodal tokens.",
        W, None, 40000, False,
    ),
    (
        "max_tokens=65536 cannot be greater than max_model_len=32768. Please request fewer "
        "output tokens.",
        W, 65536, 0, True,
    ),
    (
        "max_completion_tokens=131072 cannot be greater than max_model_len=max_total_tokens=65536",
        65536, 131072, 0, True,
    ),
    (
        "max_output_tokens=65536cannot be greater than max_total_tokens=max_total_tokens=32768. "
        "Please request fewer output tokens. (parameter=max_output_tokens, value=65536)",
        W, 65536, 0, True,
    ),
    (
        "Input length (40000) exceeds model's maximum context length (32768).",
        W, None, 40000, False,
    ),
]


@pytest.mark.parametrize(("message", "window", "output", "prompt", "lower"), CASES)
def test_bare_message(message: str, window: int, output: int | None, prompt: int, lower: bool) -> None:
    o = parse_overflow(message)
    assert o is not None
    assert (o.window, o.requested_output, o.prompt_tokens, o.prompt_is_lower_bound) == (
        window, output, prompt, lower,
    )


@pytest.mark.parametrize(("message", "window", "output", "prompt", "lower"), CASES)
def test_inside_every_body_shape(
    message: str, window: int, output: int | None, prompt: int, lower: bool
) -> None:
    nested = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    flat = {"object": "error", "message": message, "type": "BadRequestError", "param": None,
            "code": 400}
    wrapped = [
        json.dumps(nested),
        json.dumps(flat),
        f"Error code: 400 - {nested!r}",  # the openai SDK renders the body as a Python repr
        f"Error code: 400 - {flat['message']!r}",
        message + " (parameter=input_tokens, value=123)",
        message + " None",
        message.replace(". ", ".\n  "),  # wrapped over lines in a log
    ]
    for text in wrapped:
        o = parse_overflow(text)
        assert o is not None, text
        assert (o.window, o.requested_output, o.prompt_tokens, o.prompt_is_lower_bound) == (
            window, output, prompt, lower,
        ), text


@pytest.mark.parametrize(
    "message",
    [
        "",
        "Internal Server Error",
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "The model `foo` does not exist.",
        "This model's maximum context length is 32768 tokens.",
        json.dumps({"error": {"message": "Not Found", "type": "NotFoundError", "code": 404}}),
        json.dumps({"object": "error", "message": "bad", "code": 400}),
        "{not json at all",
        "Error code: 503 - {'error': {'message': 'engine loading'}}",
    ],
)
def test_anything_else_is_none(message: str) -> None:
    assert parse_overflow(message) is None


def test_family_names_are_recorded() -> None:
    o = parse_overflow(CASES[10][0])
    assert o == Overflow(W, M, 26625, True, "v0.27-at-least")


def test_detect_clamp_fires_only_for_the_silent_form() -> None:
    clamped = Usage(prompt_tokens=30000, completion_tokens=2768)
    assert detect_clamp(M, clamped, "length", W) == Overflow(W, M, 30000, False, "v0.33-clamp")
    # a real length stop (the full maximum was generated) is not an overflow
    assert detect_clamp(M, Usage(prompt_tokens=30000, completion_tokens=M), "length", W) is None
    # prompt + maximum fits: a short length stop is something else
    assert detect_clamp(M, Usage(prompt_tokens=1000, completion_tokens=10), "length", W) is None
    assert detect_clamp(M, clamped, "stop", W) is None
    assert detect_clamp(M, None, "length", W) is None


def test_clamp_detection_at_exactly_the_window() -> None:
    from emil.llm.types import Usage

    # prompt + maximum == window: the server had room for the whole maximum, so a short
    # "length" answer is not a clamp; one token more and it is.
    assert detect_clamp(M, Usage(prompt_tokens=W - M, completion_tokens=10), "length", W) is None
    assert detect_clamp(M, Usage(prompt_tokens=W - M + 1, completion_tokens=10), "length", W) == Overflow(
        W, M, W - M + 1, False, "v0.33-clamp")
    # the full maximum generated is a real length stop, never a clamp
    assert detect_clamp(M, Usage(prompt_tokens=W, completion_tokens=M), "length", W) is None
    assert detect_clamp(M, Usage(prompt_tokens=W, completion_tokens=M - 1), "length", W) is not None


FAMILIES = [
    "old-in-the-messages", "old-in-the-messages", "old-in-the-messages", "request-has-input-tokens",
    "request-has-input-tokens", "max-tokens-too-large", "you-passed-tokens", "you-passed-tokens",
    "you-passed-characters", "v0.27-total", "v0.27-at-least", "v0.27-at-least", "prompt-characters",
    "prompt-characters", "v0.33-prompt-alone", "v0.33-prompt-alone", "decoder-prompt-length",
    "max-tokens-above-window", "max-tokens-above-window", "max-tokens-above-window", "input-length-exceeds",
]


@pytest.mark.parametrize(("case", "family"), list(zip(CASES, FAMILIES, strict=True)))
def test_each_wording_names_its_family(case: tuple[str, int, int | None, int, bool], family: str) -> None:
    # the family goes into overflow records and recovery events: which vLLM era said it
    overflow = parse_overflow(case[0])
    assert overflow is not None and overflow.family == family


@pytest.mark.parametrize(("text", "message"), [
    ('{"error": {"message": "nested"}}', "nested"),
    ('{"object": "error", "message": "flat"}', "flat"),
    ("Error code: 400 - {'error': {'message': 'repr', 'code': 400}}", "repr"),
    ('{"error": "a string"}', "a string"),
    ('{"error": {"code": 400}}', '{"error": {"code": 400}}'),
    ('{"message": 5}', '{"message": 5}'),
    ("  plain text  ", "plain text"),
    ("{broken", "{broken"),
    ("[1, 2]", "[1, 2]"),
    ('prefix {"message": "after a prefix"} {"message": "second"}', 'prefix {"message": "after a prefix"} {"message": "second"}'),
    ('{"message": "at the start"}', "at the start"),
])
def test_the_message_inside_an_error_body(text: str, message: str) -> None:
    from emil.llm.overflow import extract_error_message

    assert extract_error_message(text) == message


def test_escaped_and_curly_apostrophes_read_alike() -> None:
    plain = "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens."
    for variant in (plain.replace("'", "\\'"), plain.replace("'", "’")):
        assert parse_overflow(variant) == parse_overflow(plain) is not None


def test_at_least_below_the_cap_is_still_a_lower_bound() -> None:
    o = parse_overflow("This model's maximum context length is 8192 tokens. However, you requested 64 output "
                       "tokens and your prompt contains at least 9000 input tokens, for a total of at least 9064 tokens.")
    assert o is not None and o.prompt_is_lower_bound and o.prompt_tokens == 9000 and o.family == "v0.27-at-least"


def test_a_character_count_without_output_tokens() -> None:
    o = parse_overflow("This model's maximum context length is 8192 tokens. However, your prompt contains 90000 "
                       "characters (more than 32768 characters, which is the upper bound for 8192 input tokens).")
    assert o is not None and o.requested_output is None and o.prompt_is_lower_bound


@pytest.mark.parametrize("case", [c for c in CASES if "'" in c[0]], ids=lambda c: c[0][:40])
def test_every_wording_reads_alike_with_escaped_or_curly_apostrophes(
    case: tuple[str, int, int | None, int, bool],
) -> None:
    plain = case[0]
    for variant in (plain.replace("'", "\\'"), plain.replace("'", "’")):
        assert parse_overflow(variant) == parse_overflow(plain) is not None


def test_an_exact_total_at_the_servers_cap_is_a_lower_bound() -> None:
    # The server tokenizes at most W - M + 1 tokens: a count equal to that says "at least".
    o = parse_overflow("This model's maximum context length is 8192 tokens. However, you requested 64 output "
                       "tokens and your prompt contains 8129 input tokens, for a total of 8193 tokens.")
    assert o is not None and o.prompt_tokens == 8129 and o.prompt_is_lower_bound and o.family == "v0.27-at-least"

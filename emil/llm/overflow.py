"""vLLM's context-overflow messages -> :class:`Overflow` numbers.

vLLM has said "your request does not fit" in at least five wordings over its versions (see
docs/llm.md and ../shared/reference/vllm-facts.md). Each carries the window and some of the
prompt and output sizes; some carry only a *lower bound* on the prompt, because the server stops
tokenizing at ``(W - M) + 1`` tokens ("at least N") or rejects on a character count before
tokenizing at all. Newer servers (0.33) do not reject ``prompt + max_tokens > W`` at all: they
clamp the output and answer 200 with ``finish_reason == "length"`` (:func:`detect_clamp`).

The parser is deliberately tolerant of wrapping: the text may be the bare message, the message
with vLLM's `` (parameter=..., value=...)`` suffix or a stray trailing `` None``, either JSON
error body (``{"error": {...}}`` since v0.10.1, the flat ``{"object": "error", ...}`` before),
or the openai SDK's ``Error code: 400 - {...}`` rendering of it. Anything that is not one of the
known families returns None: a wrong guess here would shrink a prompt for no reason.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Overflow", "detect_clamp", "extract_error_message", "parse_overflow"]


@dataclass(frozen=True)
class Overflow:
    """What the server said about a request that did not fit its window.

    ``prompt_tokens`` is the server's prompt size; when ``prompt_is_lower_bound`` is True the real
    prompt is at least that large and possibly much larger ("at least N", character-count
    prechecks, a token count capped at ``W - M + 1``), so recovery must shrink *past* it.
    """

    window: int
    requested_output: int | None
    """The output tokens the request asked for, or None when the message does not say."""
    prompt_tokens: int
    prompt_is_lower_bound: bool
    family: str = "unknown"
    """Which wording family matched (for logs and recordings), e.g. ``"v0.27-at-least"``."""


class _UsageLike(Protocol):
    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


def extract_error_message(text: str) -> str:
    """Return the human message inside an error body, or the text itself.

    Accepts ``{"error": {"message": ...}}``, the flat ``{"object": "error", "message": ...}``,
    and the openai SDK's ``Error code: 400 - {'error': {...}}`` (a Python repr, not JSON).
    """
    stripped = text.strip()
    start = stripped.find("{")
    if start < 0:
        return stripped
    candidate = stripped[start:]
    body: Any = None
    for loader in (json.loads, ast.literal_eval):
        try:
            body = loader(candidate)
            break
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    if not isinstance(body, dict):
        return stripped
    inner = body.get("error", body)
    if isinstance(inner, dict) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    if isinstance(inner, str):
        return inner
    return stripped


_N = r"(\d+)"
_Builder = Callable[["re.Match[str]"], Overflow]


def _i(m: re.Match[str], name: str) -> int:
    return int(m.group(name))


def _capped(prompt: int, window: int, output: int) -> bool:
    # The server tokenizes at most (W - M) + 1 tokens, so a count equal to that cap says only
    # "longer than W - M": treat it as a lower bound even when the wording does not say so.
    return prompt == window - output + 1


def _family_old_split(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), _i(m, "m"), _i(m, "n"), False, "old-in-the-messages")


def _family_old_messages_only(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), None, _i(m, "n"), False, "old-in-the-messages")


def _family_request_has(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), None, _i(m, "n"), False, "request-has-input-tokens")


def _family_too_large(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), _i(m, "m"), _i(m, "n"), False, "max-tokens-too-large")


def _family_passed_tokens(m: re.Match[str]) -> Overflow:
    w, out, n = _i(m, "w"), _i(m, "m"), _i(m, "n")
    return Overflow(w, out, n, _capped(n, w, out), "you-passed-tokens")


def _family_passed_chars(m: re.Match[str]) -> Overflow:
    # Rejected on characters before tokenizing: only "more than max_input tokens" is known.
    return Overflow(_i(m, "w"), _i(m, "m"), _i(m, "room") + 1, True, "you-passed-characters")


def _family_at_least(m: re.Match[str]) -> Overflow:
    w, out, n = _i(m, "w"), _i(m, "m"), _i(m, "n")
    lower = m.group("al") is not None or _capped(n, w, out)
    return Overflow(w, out, n, lower, "v0.27-at-least" if lower else "v0.27-total")


def _family_chars_upper_bound(m: re.Match[str]) -> Overflow:
    out = m.group("m")
    return Overflow(
        _i(m, "w"), int(out) if out else None, _i(m, "room") + 1, True, "prompt-characters"
    )


def _family_prompt_alone(m: re.Match[str]) -> Overflow:
    lower = m.group("al") is not None
    return Overflow(_i(m, "w"), None, _i(m, "n"), lower, "v0.33-prompt-alone")


def _family_decoder_prompt(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), None, _i(m, "n"), False, "decoder-prompt-length")


def _family_output_exceeds_window(m: re.Match[str]) -> Overflow:
    # The output alone is larger than the window; the prompt size is not said at all.
    return Overflow(_i(m, "w"), _i(m, "m"), 0, True, "max-tokens-above-window")


def _family_input_length(m: re.Match[str]) -> Overflow:
    return Overflow(_i(m, "w"), None, _i(m, "n"), False, "input-length-exceeds")


_CTX = r"maximum context length is (?P<w>\d+) tokens"
_CHARS = (
    r"your prompt contains (?P<c>\d+) characters \(more than \d+ characters, "
    r"which is the upper bound for (?P<room>\d+) input tokens\)"
)

# Order matters: the more specific wording of a family comes first.
_PATTERNS: tuple[tuple[re.Pattern[str], _Builder], ...] = tuple(
    (re.compile(p, re.IGNORECASE), b)
    for p, b in (
        (
            rf"{_CTX}\. However, you requested {_N} tokens \((?P<n>\d+) in the messages, "
            rf"(?P<m>\d+) in the completion\)",
            _family_old_split,
        ),
        (
            rf"{_CTX}\. However, you requested (?P<n>\d+) tokens in the messages",
            _family_old_messages_only,
        ),
        (
            # the completions-endpoint twin of the old form (OpenAI's wording, copied by proxies)
            rf"{_CTX}, however you requested {_N} tokens \((?P<n>\d+) in your prompt; "
            r"(?P<m>\d+) for the completion\)",
            _family_old_split,
        ),
        (rf"{_CTX}\. However, your messages resulted in (?P<n>\d+) tokens", _family_request_has),
        (
            rf"too large: (?P<m>\d+)\. This model's {_CTX} and your request has "
            rf"(?P<n>\d+) input tokens",
            _family_too_large,
        ),
        (rf"{_CTX}\. However, your request has (?P<n>\d+) input tokens", _family_request_has),
        (
            r"You passed (?P<n>\d+) input tokens and requested (?P<m>\d+) output tokens\. "
            r"However, the model's context length is only (?P<w>\d+) tokens",
            _family_passed_tokens,
        ),
        (
            r"You passed (?P<c>\d+) input characters and requested (?P<m>\d+) output tokens\. "
            r"However, the model's context length is only (?P<w>\d+) tokens, resulting in a "
            r"maximum input length of (?P<room>-?\d+) tokens",
            _family_passed_chars,
        ),
        (
            rf"{_CTX}\. However,(?: you requested (?P<m>\d+) output tokens and)? {_CHARS}",
            _family_chars_upper_bound,
        ),
        (
            rf"{_CTX}\. However, you requested (?P<m>\d+) output tokens and your prompt "
            rf"contains (?P<al>at least )?(?P<n>\d+) input tokens",
            _family_at_least,
        ),
        (
            rf"{_CTX}\. However, your prompt contains (?P<al>at least )?(?P<n>\d+) input tokens",
            _family_prompt_alone,
        ),
        (
            r"prompt \(length (?P<n>\d+)\)(?: plus the number of requested output tokens "
            r"\(at least \d+\))? is longer than the maximum model length of (?P<w>\d+)",
            _family_decoder_prompt,
        ),
        (
            r"(?:max_tokens|max_completion_tokens|max_output_tokens)=(?P<m>\d+)\s*cannot be "
            r"greater than (?:\w+=)+(?P<w>\d+)",
            _family_output_exceeds_window,
        ),
        (
            r"Input length \((?P<n>\d+)\) exceeds model's maximum context length "
            r"\((?P<w>\d+)\)",
            _family_input_length,
        ),
    )
)


def parse_overflow(message: str) -> Overflow | None:
    """Parse a vLLM context-overflow error into numbers, or None if it is not one.

    ``message`` may be the bare text or a whole error body (see the module docstring).
    """
    text = " ".join(extract_error_message(message).split())
    # Some proxies escape the apostrophe in "model's"; the numbers are what matter.
    text = text.replace("\\'", "'").replace("’", "'")
    for pattern, build in _PATTERNS:
        m = pattern.search(text)
        if m is not None:
            return build(m)
    return None


def detect_clamp(
    request_max: int, usage: _UsageLike | None, finish_reason: str | None, window: int
) -> Overflow | None:
    """Recognise vLLM 0.33's silent overflow: a 200 whose output was clamped to ``W - N``.

    True when the completion stopped for length with fewer tokens than requested while prompt
    plus the requested maximum exceeded the window. The prompt size is exact (from usage).
    """
    if usage is None or finish_reason != "length":
        return None
    if usage.completion_tokens >= request_max:
        return None
    if usage.prompt_tokens + request_max <= window:
        return None
    return Overflow(window, request_max, usage.prompt_tokens, False, "v0.33-clamp")

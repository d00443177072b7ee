"""How a vLLM server of a given era words a context overflow (used by the vLLM-dialect double).

Each family reproduces the f-strings of vLLM's validation code of its versions, including the
tokenization cap that makes "at least N" a lower bound and the JSON body shape of the era. This is
the *server* side of :func:`emil.llm.parse_overflow`; the double and the unit tests share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["WORDINGS", "OverflowAnswer", "Wording", "error_body", "judge_overflow"]

Wording = Literal["old", "request_has", "you_passed", "at_least", "clamp"]
"""``old``: "N in the messages" (flat body); ``request_has``: "your request has N input tokens" /
"'max_tokens' ... is too large" (with the stray `` None``); ``you_passed``: early 2026 "You passed N
input tokens"; ``at_least``: 0.27-0.30 "your prompt contains at least N" with the (W-M)+1 cap;
``clamp``: 0.32-0.33, which clamps the output instead of rejecting and only rejects a prompt that
alone overflows (its wordings checked against a real vLLM 0.32 by
tests/integration/real_vllm/test_double_mirror.py)."""

WORDINGS: tuple[Wording, ...] = ("old", "request_has", "you_passed", "at_least", "clamp")


@dataclass(frozen=True)
class OverflowAnswer:
    """What the server does with a prompt of ``prompt`` tokens: reject (400) or clamp (200)."""

    reject_message: str | None
    """The 400 message, or None when the request is accepted."""
    clamp_to: int | None = None
    """When accepted under the 0.32-0.33 rule: the output is clamped to this many tokens."""
    flat_body: bool = False


_PARAMETER = re.compile(r"\(parameter=([^,)]+), value=[^)]*\)$")


def error_body(message: str, *, flat: bool, status: int = 400) -> dict[str, Any]:
    """vLLM's error JSON: nested ``{"error": {...}}`` since v0.10.1, flat before. ``param`` is
    the parameter a message ends by naming (``(parameter=input_tokens, value=N)``), as a real
    vLLM 0.32 fills it; None otherwise."""
    kind = {400: "BadRequestError", 404: "NotFoundError", 401: "Unauthorized"}.get(
        status, "InternalServerError" if status >= 500 else "BadRequestError"
    )
    named = _PARAMETER.search(message)
    param = named.group(1) if named and not flat else None
    if flat:
        return {"object": "error", "message": message, "type": kind, "param": None, "code": status}
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def judge_overflow(
    wording: Wording, *, window: int, prompt: int, max_tokens: int | None,
    field: str = "max_completion_tokens",
) -> OverflowAnswer:
    """Decide as a vLLM of era ``wording`` would for ``prompt`` tokens and ``max_tokens`` (sent
    as ``field``: ``max_tokens`` or ``max_completion_tokens``)."""
    w, n = window, prompt
    if max_tokens is not None and max_tokens > w and wording == "clamp":
        # 0.32 names the field the request used, and no max_total_tokens.
        return OverflowAnswer(
            f"{field}={max_tokens} cannot be greater than max_model_len={w}. Please request "
            f"fewer output tokens. (parameter={field}, value={max_tokens})"
        )
    if max_tokens is not None and max_tokens > w and wording not in ("old", "request_has"):
        # Checked before anything is tokenized (the real field wording, f-string quirk kept).
        return OverflowAnswer(
            f"max_completion_tokens={max_tokens} cannot be greater than "
            f"max_model_len=max_total_tokens={w}. Please request fewer output tokens. "
            f"(parameter=max_completion_tokens, value={max_tokens})"
        )
    if wording == "clamp":
        if n > w:
            seen = min(n, w + 1)
            bound = "at least " if seen < n or seen == w + 1 else ""
            return OverflowAnswer(
                f"This model's maximum context length is {w} tokens. However, your prompt "
                f"contains {bound}{seen} input tokens, which exceeds this limit even without any "
                f"output tokens. Please reduce the length of the input prompt. "
                f"(parameter=input_tokens, value={seen})"
            )
        if max_tokens is not None and n + max_tokens > w:
            return OverflowAnswer(None, clamp_to=w - n)
        return OverflowAnswer(None)
    m = max_tokens
    if m is None:
        if n < w:
            return OverflowAnswer(None)
        if wording == "old":
            return OverflowAnswer(
                f"This model's maximum context length is {w} tokens. However, you requested "
                f"{n} tokens in the messages, Please reduce the length of the messages.",
                flat_body=True,
            )
        if wording == "request_has":
            return OverflowAnswer(
                f"This model's maximum context length is {w} tokens. However, your request has "
                f"{n} input tokens. Please reduce the length of the input messages. None"
            )
        # Without max_tokens the later servers leave no room for even one output token.
        return OverflowAnswer(
            f"The decoder prompt (length {n}) plus the number of requested output tokens (at "
            f"least 1) is longer than the maximum model length of {w}. Make sure that "
            f"`max_model_len` is no smaller than the number of text tokens plus multimodal tokens."
        )
    if n + m <= w:
        return OverflowAnswer(None)
    if wording == "old":
        return OverflowAnswer(
            f"This model's maximum context length is {w} tokens. However, you requested "
            f"{m + n} tokens ({n} in the messages, {m} in the completion). Please reduce the "
            f"length of the messages or completion.",
            flat_body=True,
        )
    if wording == "request_has":
        return OverflowAnswer(
            f"'max_tokens' or 'max_completion_tokens' is too large: {m}. This model's maximum "
            f"context length is {w} tokens and your request has {n} input tokens "
            f"({m} > {w} - {n}). None"
        )
    # 0.27 onwards tokenize at most (W - M) + 1 tokens: the count is capped there.
    seen = min(n, w - m + 1)
    if wording == "you_passed":
        return OverflowAnswer(
            f"You passed {seen} input tokens and requested {m} output tokens. However, the "
            f"model's context length is only {w} tokens, resulting in a maximum input length of "
            f"{w - m} tokens. Please reduce the length of the input prompt. "
            f"(parameter=input_tokens, value={seen})"
        )
    bound = "at least " if seen == w - m + 1 else ""
    return OverflowAnswer(
        f"This model's maximum context length is {w} tokens. However, you requested {m} output "
        f"tokens and your prompt contains {bound}{seen} input tokens, for a total of {bound}"
        f"{seen + m} tokens. Please reduce the length of the input prompt or the number of "
        f"requested output tokens. (parameter=input_tokens, value={seen})"
    )

"""Classification: what a failed exchange with the LLM server means, and what to tell the operator.

Five classes (docs/llm.md has the table):

- **overflow**: a 400 (or a proxy's 502) in any vLLM wording: information, handled by the
  recovery flow (:mod:`emil.llm.recovery`) with a strictly smaller request.
- **transient**: no response at all (refused, reset, timed out), 408/425/429, 5xx, "loading":
  :class:`~emil.exceptions.EndpointUnavailable`, waited out with :mod:`emil.backoff`.
- **configuration**: 401, 403, 404, 405, 407, a 5xx that is not transient (501...), a 4xx whose wording names the server's setup (tool
  parser, reasoning parser, no chat template): :class:`~emil.exceptions.EndpointConfigError`
  whose message says what to change. Never retried.
- **rejected**: any other 4xx (a 400, 413, 422... about this one request's content):
  :class:`~emil.exceptions.RequestRejected`. Not retried, and not the operator's to fix: the
  turn fails, the session goes on (every request of three turns in a row refused: the setup,
  a configuration error; emil.agent.loop ``REJECTED_TURNS_LIMIT``).
- **server fault**: a 200 that is not a valid completion (:mod:`emil.llm.response` decides):
  :class:`~emil.exceptions.ServerFault`, retried a bounded number of times.
"""

from __future__ import annotations

from typing import Literal

from emil.exceptions import ContextOverflowError
from emil.llm.overflow import Overflow, parse_overflow

__all__ = [
    "CONFIG_STATUSES",
    "TRANSIENT_STATUSES",
    "FailureClass",
    "OverflowRejected",
    "classify_failure",
    "config_hint",
    "excerpt",
]

FailureClass = Literal["overflow", "transient", "config", "rejected"]

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
"""HTTP statuses that say "come back later": request timeout, too early, too many requests,
and the server-side errors a restarting or overloaded vLLM (or its proxy) answers with."""

_LOADING_WORDS = ("loading", "not ready", "starting up", "warming up")

CONFIG_STATUSES = frozenset({401, 403, 404, 405, 407})
"""The API key refused, the model or the endpoint path wrong: the operator must change a setting."""

_SETUP_WORDS = ("enable-auto-tool-choice", "parser", "chat template", "chat_template")
"""Wordings of a 4xx that names the server's setup, not the request's content."""


class OverflowRejected(ContextOverflowError):
    """The server refused a request for size; ``overflow`` holds its numbers.

    Raised by the client for one failed request; the recovery flow turns it into a smaller
    retry. Callers that bypass the flow still see a :class:`ContextOverflowError`.
    """

    def __init__(self, overflow: Overflow, *, status: int | None, server_message: str) -> None:
        super().__init__(
            f"server rejected the prompt for size (HTTP {status}): {server_message}",
            window=overflow.window,
            requested_output=overflow.requested_output,
            server_prompt_tokens=overflow.prompt_tokens,
        )
        self.overflow = overflow
        self.status = status
        self.server_message = server_message


def classify_failure(status: int | None, message: str) -> FailureClass:
    """Classify a failed HTTP exchange; ``status`` None means no response (refused, reset...)."""
    if parse_overflow(message) is not None:
        # Overflow wording wins over the status: proxies in front of vLLM re-wrap it as 502.
        return "overflow"
    if status is None or status in TRANSIENT_STATUSES:
        return "transient"
    lowered = message.lower()
    if any(word in lowered for word in _LOADING_WORDS):
        return "transient"
    if status in CONFIG_STATUSES or status >= 500 or any(word in lowered for word in _SETUP_WORDS):
        return "config"  # a 5xx not in TRANSIENT_STATUSES (501, 505...): the server cannot do it
    return "rejected"


def config_hint(status: int | None, message: str, *, model: str | None = None) -> str:
    """A one-line 'what to change' for a configuration failure, quoting the server."""
    lowered = message.lower()
    if status in (401, 403):
        what = (
            "the server refused the API key: set Emil's api_key (emil.toml, EMIL_API_KEY or "
            "--api-key) to the key vLLM was started with, or start vLLM without --api-key"
        )
    elif status == 404:
        what = (
            f"the server does not serve model {model!r} (or the endpoint is wrong): set model "
            "(EMIL_MODEL / --model) to an id listed by GET /v1/models, or 'auto', and make the "
            "endpoint (EMIL_ENDPOINT / --endpoint) end in /v1"
        )
    elif "enable-auto-tool-choice" in lowered or "tool-call-parser" in lowered:
        what = (
            "the server cannot parse tool calls: start vLLM with --enable-auto-tool-choice "
            "--tool-call-parser <parser for this model> (qwen3_coder for Qwen3.5/3.6), or set "
            "tool_choice to 'required' or a named function"
        )
    elif "reasoning" in lowered and "parser" in lowered:
        what = "start vLLM with --reasoning-parser <parser for this model> (qwen3 for Qwen)"
    else:
        what = (
            "the server rejected the request as invalid: check the request options "
            "(tool_choice, chat_template_kwargs, sampling settings, extra_body)"
        )
    return f"{what}. Server said (HTTP {status}): {message}"


def excerpt(body: str | bytes, limit: int = 400) -> str:
    """The start of a response body for logs and recordings: decoded, one line, at most
    ``limit`` characters (a whole HTML page does not belong in a recording)."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else f"{flat[:limit]}… ({len(text)} chars)"

"""The failure policy, written once and without I/O.

Three classes of failure, three answers (docs/llm.md has the table):

- **overflow** (a 400 in any vLLM wording, or 0.33's clamped 200): information, not a transient.
  Feed the server's numbers to calibration, re-assemble a *strictly smaller* prompt (past a lower
  bound, with margin), retry at most ``max_overflow_retries`` times, never send a request
  identical to one that failed; otherwise raise :class:`ContextOverflowError` with every number.
- **transient** (connection refused/reset, timeouts, 429, 5xx, "loading"): raise
  :class:`EndpointUnavailable`; the caller backs off with :class:`Backoff` (full jitter, capped)
  for as long as *it* decides (:func:`retry_transient` is the usual loop).
- **configuration** (401, 403, 404, any other 4xx): raise :class:`EndpointConfigError` whose
  message says what to change. Never retried: it would fail identically forever.

:func:`recovery_flow` is a generator in the style of httpx's ``Auth.auth_flow``: it yields steps
(:class:`Assemble`, :class:`Send`, :class:`CountExactly`, :class:`Calibrate`, :class:`Notify`) and
receives their results, so the live client, replay and tests drive the same policy.
:func:`complete_with_recovery` is the async driver.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio

from emil.exceptions import (
    ContextOverflowError,
    EndpointConfigError,
    EndpointUnavailable,
)
from emil.llm.overflow import Overflow, detect_clamp, parse_overflow
from emil.llm.types import LLM, ChatRequest, Completion

__all__ = [
    "Assemble",
    "Backoff",
    "Calibrate",
    "CountExactly",
    "FailureClass",
    "Notify",
    "OverflowRejected",
    "RecoveryEvent",
    "Send",
    "classify_failure",
    "complete_with_recovery",
    "config_hint",
    "recovery_flow",
    "retry_transient",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

FailureClass = Literal["overflow", "transient", "config"]

_TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_LOADING_WORDS = ("loading", "not ready", "starting up", "warming up")


class OverflowRejected(ContextOverflowError):
    """The server refused a request for size; ``overflow`` holds its numbers.

    Raised by the client for one failed request; :func:`recovery_flow` turns it into a smaller
    retry. Callers that bypass the policy still see a :class:`ContextOverflowError`.
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
    if status is None or status in _TRANSIENT_STATUSES:
        return "transient"
    lowered = message.lower()
    if any(word in lowered for word in _LOADING_WORDS):
        return "transient"
    return "config"


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


@dataclass(frozen=True)
class RecoveryEvent:
    """One thing the policy did, for logs, metrics and session recordings."""

    kind: Literal["overflow", "exact_count", "retry", "recovered", "gave_up", "transient", "config"]
    attempt: int
    """0 for the first request, 1 for the first retry..."""
    window: int | None = None
    requested_output: int | None = None
    server_prompt_tokens: int | None = None
    prompt_is_lower_bound: bool | None = None
    predicted_prompt_tokens: int | None = None
    next_limit: int | None = None
    family: str | None = None
    status: int | None = None
    message: str = ""


@dataclass(frozen=True)
class Assemble:
    """Step: build a request whose predicted prompt is at most ``limit`` (None: no limit)."""

    limit: int | None


@dataclass(frozen=True)
class Send:
    """Step: send ``request``; send back the Completion or the exception it raised."""

    request: ChatRequest
    attempt: int


@dataclass(frozen=True)
class CountExactly:
    """Step: count ``request``'s prompt exactly (server /tokenize); send back an int or None."""

    request: ChatRequest


@dataclass(frozen=True)
class Calibrate:
    """Step: tell the budget what the server counted for a prompt Emil predicted."""

    predicted: int
    server_tokens: int
    lower_bound: bool
    """True when ``server_tokens`` is only a floor of the real size."""


@dataclass(frozen=True)
class Notify:
    """Step: report ``event`` (log, record, count)."""

    event: RecoveryEvent


Step = Assemble | Send | CountExactly | Calibrate | Notify


@dataclass
class _Tuning:
    margin_frac: float = 0.02
    min_margin: int = 64
    lower_bound_slack: float = 0.15
    tried: list[int] = field(default_factory=list)


def _size(request: ChatRequest) -> int:
    if request.predicted_prompt_tokens is not None:
        return request.predicted_prompt_tokens
    # Without a prediction the policy still needs "strictly smaller": use the message bytes.
    return sum(len(str(m)) for m in request.messages)


def _wire(request: ChatRequest) -> dict[str, Any]:
    # What the server sees: the prediction is Emil's own bookkeeping, not part of the request.
    return request.model_dump(exclude={"predicted_prompt_tokens"})


def _overflow_of(outcome: object, request: ChatRequest, window: int) -> Overflow | None:
    if isinstance(outcome, OverflowRejected):
        return outcome.overflow
    if isinstance(outcome, EndpointConfigError):
        return parse_overflow(outcome.server_message or str(outcome))
    if isinstance(outcome, Completion):
        return detect_clamp(
            request.max_completion_tokens, outcome.usage, outcome.finish_reason, window
        )
    return None


def _give_up(
    overflow: Overflow,
    request: ChatRequest,
    room: int,
    predicted: int | None,
    attempts: list[int],
    reason: str,
) -> ContextOverflowError:
    bound = "at least " if overflow.prompt_is_lower_bound else ""
    return ContextOverflowError(
        f"overflow recovery gave up: {reason}. window {overflow.window}, requested output "
        f"{request.max_completion_tokens} (server said {overflow.requested_output}), room for "
        f"the prompt {room}, server prompt tokens {bound}{overflow.prompt_tokens} "
        f"({overflow.family}), predicted {predicted}, prompts tried {attempts}",
        window=overflow.window,
        requested_output=request.max_completion_tokens,
        attempts=tuple(attempts),
        server_prompt_tokens=overflow.prompt_tokens,
    )


def recovery_flow(
    *,
    window: int,
    max_overflow_retries: int = 2,
    margin_frac: float = 0.02,
    min_margin: int = 64,
    lower_bound_slack: float = 0.15,
) -> Generator[Step, Any, Completion]:
    """The overflow/failure policy as a generator of :data:`Step` (see the module docstring).

    The flow starts with ``Assemble(None)``; each overflow computes a new limit in Emil's own
    predicted tokens: the room the server leaves (``W - M``) less a margin, scaled by how far
    Emil's prediction was from the server's count, and always below the failed prompt.
    """
    tune = _Tuning(margin_frac, min_margin, lower_bound_slack)
    failed: list[ChatRequest] = []
    attempts: list[int] = []
    lower_bound_failures = 0
    limit: int | None = None
    attempt = 0
    last: Overflow | None = None
    while True:
        request: ChatRequest = yield Assemble(limit)
        size = _size(request)
        if any(_wire(request) == _wire(f) for f in failed):
            yield Notify(RecoveryEvent("gave_up", attempt, window=window, message="identical"))
            raise ContextOverflowError(
                f"overflow recovery gave up: the re-assembled request is identical to one the "
                f"server already rejected (window {window}, output "
                f"{request.max_completion_tokens}, server said {last}, limit {limit}, prompts "
                f"tried {attempts})",
                window=window,
                requested_output=request.max_completion_tokens,
                attempts=tuple(attempts),
                server_prompt_tokens=last.prompt_tokens if last else None,
            )
        if attempts and size >= attempts[-1]:
            yield Notify(RecoveryEvent("gave_up", attempt, window=window, message="not smaller"))
            raise ContextOverflowError(
                f"overflow recovery gave up: limit {limit} produced a prompt of {size} tokens, "
                f"not smaller than the {attempts[-1]} that failed (window {window}, output "
                f"{request.max_completion_tokens}, server said {last}, prompts tried "
                f"{attempts})",
                window=window,
                requested_output=request.max_completion_tokens,
                attempts=(*attempts, size),
                server_prompt_tokens=last.prompt_tokens if last else None,
            )
        attempts.append(size)
        outcome = yield Send(request, attempt)

        overflow = _overflow_of(outcome, request, window)
        if overflow is None:
            if isinstance(outcome, Completion):
                if attempt:
                    yield Notify(
                        RecoveryEvent(
                            "recovered",
                            attempt,
                            window=window,
                            predicted_prompt_tokens=request.predicted_prompt_tokens,
                            message=f"prompts tried {attempts}",
                        )
                    )
                return outcome
            if isinstance(outcome, EndpointUnavailable):
                yield Notify(
                    RecoveryEvent("transient", attempt, status=outcome.status, message=str(outcome))
                )
                raise outcome
            if isinstance(outcome, EndpointConfigError):
                yield Notify(
                    RecoveryEvent("config", attempt, status=outcome.status, message=str(outcome))
                )
                raise outcome
            if isinstance(outcome, BaseException):
                raise outcome
            raise TypeError(f"recovery_flow: unexpected outcome {outcome!r}")

        failed.append(request)
        last = overflow
        server_window = overflow.window or window
        predicted = request.predicted_prompt_tokens
        server_tokens, lower = overflow.prompt_tokens, overflow.prompt_is_lower_bound
        yield Notify(
            RecoveryEvent(
                "overflow",
                attempt,
                window=server_window,
                requested_output=overflow.requested_output,
                server_prompt_tokens=server_tokens,
                prompt_is_lower_bound=lower,
                predicted_prompt_tokens=predicted,
                family=overflow.family,
                status=getattr(outcome, "status", None),
            )
        )
        room = server_window - request.max_completion_tokens

        if room <= 0:
            yield Notify(RecoveryEvent("gave_up", attempt, window=server_window, message="output"))
            raise _give_up(
                overflow, request, room, predicted, attempts,
                "the requested output alone fills the window; lower output_reserve "
                "(EMIL_OUTPUT_RESERVE / --output-reserve) well below the served max_model_len"
            )
        if lower:
            exact = yield CountExactly(request)
            if isinstance(exact, int) and exact > 0:
                server_tokens, lower = exact, False
                yield Notify(
                    RecoveryEvent(
                        "exact_count", attempt, window=server_window, server_prompt_tokens=exact
                    )
                )
        if predicted is not None:
            yield Calibrate(predicted, server_tokens, lower)
        if attempt >= max_overflow_retries:
            yield Notify(RecoveryEvent("gave_up", attempt, window=server_window, message="retries"))
            raise _give_up(
                overflow, request, room, predicted, attempts,
                f"{max_overflow_retries} smaller retries did not fit",
            )

        if lower:
            # "At least N" only says "longer than W - M": assume more, and more each time it
            # happens again, rather than creeping up on the bound one rejection at a time.
            lower_bound_failures += 1
            slack = tune.lower_bound_slack * (2 ** (lower_bound_failures - 1))
            server_est = math.ceil(max(server_tokens, room + 1) * (1 + slack))
        else:
            server_est = server_tokens
        margin = max(tune.min_margin, math.ceil(room * tune.margin_frac))
        target = room - margin
        if predicted is not None and predicted > 0:
            new_limit = math.floor(target * predicted / server_est)
        else:
            new_limit = target
        new_limit = min(new_limit, size - 1)
        if new_limit <= 0:
            yield Notify(RecoveryEvent("gave_up", attempt, window=server_window, message="room"))
            raise _give_up(
                overflow, request, room, predicted, attempts, "no positive prompt limit is left"
            )
        attempt += 1
        limit = new_limit
        yield Notify(
            RecoveryEvent(
                "retry",
                attempt,
                window=server_window,
                server_prompt_tokens=server_tokens,
                prompt_is_lower_bound=lower,
                predicted_prompt_tokens=predicted,
                next_limit=new_limit,
                family=overflow.family,
            )
        )


def _log_event(event: RecoveryEvent) -> None:
    level = logging.INFO if event.kind in ("retry", "recovered", "exact_count") else logging.WARNING
    _log.log(level, "llm %s: %s", event.kind, event)


async def complete_with_recovery(
    llm: LLM,
    assemble: Callable[[int | None], ChatRequest],
    *,
    window: int,
    max_overflow_retries: int = 2,
    on_event: Callable[[RecoveryEvent], None] | None = None,
    calibrate: Callable[[int, int, bool], None] | None = None,
    count_exact: Callable[[ChatRequest], Awaitable[int | None]] | None = None,
    transient_backoff: Backoff | None = None,
    give_up_after_s: float | None = None,
) -> Completion:
    """Send one turn's request, recovering from overflow by re-assembling smaller.

    ``assemble(limit)`` must return a request with ``predicted_prompt_tokens`` set and at most
    ``limit`` predicted tokens (None: the normal budget). ``calibrate(predicted, server, lower)``
    receives the server's count of each rejected prompt (successful turns' ``usage`` are the
    caller's to feed). ``count_exact`` (e.g. the server's /tokenize) replaces an "at least"
    lower bound with the real size when given.

    Configuration errors propagate at once. Transient errors propagate too, unless
    ``transient_backoff`` is given: then the same request is re-sent after each backoff wait
    (for at most ``give_up_after_s``, None: no limit), keeping the overflow state, so an outage
    in the middle of a recovery never makes Emil resend a prompt the server already rejected.
    """
    flow = recovery_flow(window=window, max_overflow_retries=max_overflow_retries)
    started = time.monotonic()
    value: Any = None
    try:
        step = next(flow)
        while True:
            if isinstance(step, Assemble):
                value = assemble(step.limit)
            elif isinstance(step, Send):
                while True:
                    try:
                        value = await llm.complete(step.request)
                    except EndpointUnavailable as exc:
                        value = exc
                        if transient_backoff is None:
                            break
                        remaining = None
                        if give_up_after_s is not None:
                            remaining = give_up_after_s - (time.monotonic() - started)
                            if remaining <= 0:
                                break
                        event = RecoveryEvent("transient", step.attempt, status=exc.status,
                                              message=str(exc))
                        _log_event(event)
                        if on_event is not None:
                            on_event(event)
                        await transient_backoff.wait(str(exc), max_delay=remaining)
                        continue
                    except (OverflowRejected, EndpointConfigError) as exc:
                        value = exc
                    else:
                        if transient_backoff is not None:
                            transient_backoff.reset()
                    break
            elif isinstance(step, CountExactly):
                value = await count_exact(step.request) if count_exact is not None else None
            elif isinstance(step, Calibrate):
                if calibrate is not None:
                    calibrate(step.predicted, step.server_tokens, step.lower_bound)
                value = None
            else:
                _log_event(step.event)
                if on_event is not None:
                    on_event(step.event)
                value = None
            step = flow.send(value)
    except StopIteration as stop:
        result: Completion = stop.value
        return result


class Backoff:
    """Exponential backoff with full jitter and a cap, for transient failures.

    ``delay(n) = uniform(0, min(cap, base * 2**n))`` (AWS "full jitter"), so many clients
    retrying the same dead server spread out. The caller decides how long to keep trying;
    ``waits`` and ``waited_s`` are the metrics.
    """

    def __init__(
        self,
        base: float = 0.5,
        cap: float = 30.0,
        jitter: bool = True,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if base <= 0 or cap < base:
            raise ValueError(f"Backoff needs 0 < base <= cap, got base={base} cap={cap}")
        self.base = base
        self.cap = cap
        self.jitter = jitter
        self.attempt = 0
        self.waits = 0
        self.waited_s = 0.0
        self._rng = rng or random.Random()

    def ceiling(self) -> float:
        """The largest delay the next wait can take."""
        return float(min(self.cap, self.base * 2**self.attempt))

    def next_delay(self) -> float:
        """Return the next delay and advance the exponent."""
        ceiling = self.ceiling()
        self.attempt += 1
        return self._rng.uniform(0.0, ceiling) if self.jitter else ceiling

    def reset(self) -> None:
        """Back to the base delay (after a success)."""
        self.attempt = 0

    async def wait(self, reason: str = "", *, max_delay: float | None = None) -> float:
        """Sleep the next delay (at most ``max_delay``), logging why; returns the delay slept."""
        delay = self.next_delay()
        if max_delay is not None:
            delay = max(0.0, min(delay, max_delay))
        self.waits += 1
        self.waited_s += delay
        _log.warning(
            "llm backoff: waiting %.2fs (attempt %d, ceiling %.1fs): %s",
            delay,
            self.attempt,
            min(self.cap, self.base * 2 ** (self.attempt - 1)),
            reason,
        )
        await anyio.sleep(delay)
        return delay


async def retry_transient(
    call: Callable[[], Awaitable[_T]],
    *,
    backoff: Backoff,
    give_up_after_s: float | None = None,
    on_event: Callable[[RecoveryEvent], None] | None = None,
) -> _T:
    """Call ``call()`` until it stops raising :class:`EndpointUnavailable`.

    Configuration errors and overflows propagate at once. After ``give_up_after_s`` (None:
    never) the last :class:`EndpointUnavailable` is re-raised.
    """
    start = time.monotonic()
    while True:
        try:
            result = await call()
        except EndpointUnavailable as exc:
            if on_event is not None:
                on_event(
                    RecoveryEvent("transient", backoff.attempt, status=exc.status, message=str(exc))
                )
            remaining = None
            if give_up_after_s is not None:
                remaining = give_up_after_s - (time.monotonic() - start)
                if remaining <= 0:
                    raise
            await backoff.wait(str(exc), max_delay=remaining)
        else:
            backoff.reset()
            return result

"""The recovery flow: one request's way from "assemble" to a completion, written without I/O.

What each failure class means is :mod:`emil.llm.classify`'s; what this module decides is what
to do next (docs/llm.md has the table):

- **overflow**: feed the server's numbers to calibration, re-assemble a *strictly smaller*
  prompt (past a lower bound, with margin), at most ``max_overflow_retries`` times, never a
  request identical to one that failed; otherwise :class:`ContextOverflowError` with every number.
- **transient**: wait (:class:`Wait`) and send the *same* request again, for as long as the
  service's :class:`~emil.backoff.Patience` allows. It stays one request with several attempts.
- **server fault** (a 200 that is not a completion): wait and send the same request again, at
  most ``max_fault_retries`` times; then the :class:`ServerFault` ends the turn.
- **configuration**: propagate at once. Never retried.

:func:`recovery_flow` is a generator in the style of httpx's ``Auth.auth_flow``: it yields
steps (:mod:`emil.llm.recovery_steps`: assemble, send, wait, count exactly, calibrate, notify)
and receives their results, so the live client, replay
and tests drive the same policy. :func:`complete_with_recovery` is the async driver.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field

from emil.backoff import Patience
from emil.exceptions import (
    ContextOverflowError,
    EndpointConfigError,
    EndpointUnavailable,
    RequestRejected,
    ServerFault,
)
from emil.llm.classify import OverflowRejected
from emil.llm.overflow import Overflow, detect_clamp, parse_overflow
from emil.llm.recovery_steps import (
    Assemble,
    Assembler,
    Calibrate,
    CountExactly,
    Notify,
    RecoveryEvent,
    RecoveryKind,
    Send,
    Step,
    StepResult,
    Wait,
)
from emil.llm.types import LLM, ChatRequest, Completion

__all__ = ["complete_with_recovery", "recovery_flow"]

_log = logging.getLogger("emil.llm.recovery")

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


def _wire(request: ChatRequest) -> dict[str, object]:
    # What the server sees: the prediction is Emil's own bookkeeping, not part of the request.
    return request.model_dump(exclude={"predicted_prompt_tokens"})


def _overflow_of(outcome: StepResult, request: ChatRequest, window: int) -> Overflow | None:
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


def _resend_until_answered(
    request: ChatRequest, attempt: int, max_fault_retries: int
) -> Generator[Step, StepResult, StepResult]:
    """Send ``request``, and again after a wait while the server is away or misbehaves.

    Returns the first outcome that is an answer (a completion, an overflow, a configuration
    error); raises the :class:`ServerFault` after ``max_fault_retries`` resends.
    """
    send = 1
    faults = 0
    outcome = yield Send(request, attempt, send)
    while isinstance(outcome, EndpointUnavailable | ServerFault):
        if isinstance(outcome, ServerFault):
            faults += 1
            yield Notify(RecoveryEvent("server_fault", attempt, message=str(outcome), send=send))
            if faults > max_fault_retries:
                yield Notify(RecoveryEvent(
                    "gave_up", attempt, message=f"server fault {faults} times", send=send))
                raise outcome
        else:
            yield Notify(RecoveryEvent(
                "transient", attempt, status=outcome.status, message=str(outcome), send=send))
        yield Wait(outcome)
        send += 1
        outcome = yield Send(request, attempt, send)
    return outcome


def recovery_flow(
    *,
    window: int,
    max_overflow_retries: int = 2,
    max_fault_retries: int = 3,
    margin_frac: float = 0.02,
    min_margin: int = 64,
    lower_bound_slack: float = 0.15,
) -> Generator[Step, StepResult, Completion]:
    """The policy as a generator of :data:`Step` (see the module docstring).

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
        assembled = yield Assemble(limit)
        if not isinstance(assembled, ChatRequest):
            raise TypeError(f"recovery_flow: Assemble must be answered with a ChatRequest, got {assembled!r}")
        request = assembled
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
        outcome = yield from _resend_until_answered(request, attempt, max_fault_retries)

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
        status = outcome.status if isinstance(outcome, OverflowRejected | EndpointConfigError) else None
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
                status=status,
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


_QUIET: frozenset[RecoveryKind] = frozenset({"transient"})
"""Logged by the service's Patience instead (one WARNING per outage, not one per attempt)."""
_INFO: frozenset[RecoveryKind] = frozenset({"retry", "recovered", "exact_count", "server_fault"})


def _log_event(event: RecoveryEvent) -> None:
    if event.kind in _QUIET:
        _log.debug("llm %s: %s", event.kind, event)
        return
    level = logging.INFO if event.kind in _INFO else logging.WARNING
    _log.log(level, "llm %s: %s", event.kind, event)


async def complete_with_recovery(
    llm: LLM,
    assemble: Assembler,
    *,
    window: int,
    max_overflow_retries: int = 2,
    max_fault_retries: int = 3,
    on_event: Callable[[RecoveryEvent], None] | None = None,
    calibrate: Callable[[int, int, bool], None] | None = None,
    count_exact: Callable[[ChatRequest], Awaitable[int | None]] | None = None,
    patience: Patience | None = None,
) -> Completion:
    """Send one step's request, recovering from overflow by re-assembling smaller.

    ``assemble(limit)`` must return a request with ``predicted_prompt_tokens`` set and at most
    ``limit`` predicted tokens (None: the normal budget). ``calibrate(predicted, server, lower)``
    receives the server's count of each rejected prompt (successful turns' ``usage`` are the
    caller's to feed). ``count_exact`` (e.g. the server's /tokenize) replaces an "at least"
    lower bound with the real size when given.

    Configuration errors propagate at once. With ``patience`` (the endpoint's, shared with
    every other caller), a transient failure or a server fault is waited out and the *same*
    request sent again, keeping the overflow state, so an outage in the middle of a recovery
    never makes Emil resend a prompt the server already rejected; without it, they propagate.
    """
    flow = recovery_flow(window=window, max_overflow_retries=max_overflow_retries,
                         max_fault_retries=max_fault_retries)
    value: StepResult = None
    try:
        step = next(flow)
        while True:
            if isinstance(step, Assemble):
                value = assemble(step.limit)
            elif isinstance(step, Send):
                try:
                    value = await llm.complete(step.request)
                except (EndpointUnavailable, ServerFault) as exc:
                    value = exc
                except (OverflowRejected, EndpointConfigError, RequestRejected) as exc:
                    value = exc
                    if patience is not None:
                        patience.succeeded()  # it answered: the server is up
                else:
                    if patience is not None:
                        patience.succeeded()
            elif isinstance(step, Wait):
                if patience is None:
                    raise step.error
                await patience.wait(step.error)
                value = None
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

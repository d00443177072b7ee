"""The vocabulary of the recovery flow: the steps it asks a driver to take, and its events.

:func:`emil.llm.recovery.recovery_flow` yields :data:`Step` values (:class:`Assemble`,
:class:`Send`, :class:`Wait`, :class:`CountExactly`, :class:`Calibrate`, :class:`Notify`) and
receives a :data:`StepResult` for each; every driver (the live completer, replay, tests,
tools/llm_recovery_report.py) speaks this and nothing else. :class:`RecoveryEvent` is what the
policy did, for logs, metrics and recordings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from emil.exceptions import (
    EndpointUnavailable,
    ServerFault,
)
from emil.llm.types import ChatRequest, Completion

__all__ = [
    "Assemble",
    "Assembler",
    "Calibrate",
    "CountExactly",
    "Notify",
    "RecoveryEvent",
    "RecoveryKind",
    "Send",
    "Step",
    "StepResult",
    "Wait",
]

Assembler = Callable[[int | None], ChatRequest]
"""``assemble(limit)``: the request whose predicted prompt is at most ``limit`` (None: the
normal budget)."""

RecoveryKind = Literal[
    "overflow", "exact_count", "retry", "recovered", "gave_up", "transient", "server_fault", "config"
]


@dataclass(frozen=True)
class RecoveryEvent:
    """One thing the policy did, for logs, metrics and session recordings.

    ``retry`` is a strictly smaller request after an overflow; ``transient`` and
    ``server_fault`` are failed attempts of the same request (``message`` says why).
    """

    kind: RecoveryKind
    attempt: int
    """0 for the first request, 1 for the first smaller retry..."""
    window: int | None = None
    requested_output: int | None = None
    server_prompt_tokens: int | None = None
    prompt_is_lower_bound: bool | None = None
    predicted_prompt_tokens: int | None = None
    next_limit: int | None = None
    family: str | None = None
    status: int | None = None
    message: str = ""
    send: int = 1
    """Which send of this request failed (transient / server_fault): 1 = the first."""


@dataclass(frozen=True)
class Assemble:
    """Step: build a request whose predicted prompt is at most ``limit`` (None: no limit)."""

    limit: int | None


@dataclass(frozen=True)
class Send:
    """Step: send ``request``; send back the Completion or the exception it raised."""

    request: ChatRequest
    attempt: int
    send: int = 1
    """1 for the first send of this request, 2 after one wait..."""


@dataclass(frozen=True)
class Wait:
    """Step: the request failed for a reason that may pass; wait before sending it again.

    The driver waits with the service's :class:`~emil.backoff.Patience`, or re-raises
    ``error`` when it has none (the caller then decides).
    """

    error: EndpointUnavailable | ServerFault


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


Step = Assemble | Send | Wait | CountExactly | Calibrate | Notify

StepResult = ChatRequest | Completion | Exception | int | None
"""What the driver sends back: a request (Assemble), a completion or the exception a send
raised (Send), a count or None (CountExactly), None otherwise."""



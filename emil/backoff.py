"""The one way to wait out a transient failure: backoff with full jitter, bounded by patience.

Every part of Emil that waits for something to come back uses this module: the agent loop and
the overflow policy waiting for the LLM endpoint, startup waiting for the endpoint to appear,
the world bridge waiting for the Minecraft server. One :class:`Patience` per service keeps the
service's state (up or down) across callers and turns, so an outage is one episode however many
requests run into it::

    patience = Patience("llm endpoint", backoff=Backoff(0.5, 10), limit_s=None, on_event=record)
    served = await wait_out(llm.discover, patience)

What an operator sees, per episode: one WARNING when it starts, naming the error and the time
of the next attempt; a DEBUG line per further retry; one INFO line when the service is back.
Every attempt, and every change of state, is also an :class:`OutageEvent` for ``on_event``
(the recorder writes them, the metrics read the records). After ``limit_s`` without success
the next failure raises :class:`~emil.exceptions.PatienceExhausted` (the session then stops
with exit code 3). Configuration errors never come here: they are not transient.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, TypeVar

import anyio

from emil.exceptions import PatienceExhausted, TransientError

__all__ = ["Backoff", "OutageEvent", "Patience", "wait_out"]

_log = logging.getLogger("emil.backoff")
_T = TypeVar("_T")


class Backoff:
    """Exponential backoff with full jitter and a cap.

    ``delay(n) = uniform(0, min(cap, base * 2**n))`` (AWS "full jitter"), so many clients
    retrying the same dead server spread out; ``jitter=False`` gives the ceiling itself.
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


@dataclass(frozen=True)
class OutageEvent:
    """One thing that happened to a service's availability (recorded; metrics count them).

    ``down``: the first failure of an episode; ``retry``: every failed attempt (the first one
    included) with the wait before the next; ``up``: the first success after failures;
    ``gone``: patience ran out (the caller stops).
    """

    kind: Literal["down", "retry", "up", "gone"]
    service: str
    attempt: int
    """Failed attempts so far in this episode (1 = the first failure)."""
    error: str = ""
    delay_s: float = 0.0
    """Wait before the next attempt (``retry`` only)."""
    down_for_s: float = 0.0
    """Seconds since the episode's first failure."""


class Patience:
    """A service's availability and how long its callers wait for it.

    Shared by everything that calls the service, so the state (``down``) and the backoff
    survive across requests and turns: an outage is one episode, not one per request.
    ``limit_s`` None means wait until stopped. ``fix`` is appended to the message of
    :class:`PatienceExhausted` (what the operator should do).
    """

    def __init__(
        self,
        service: str,
        *,
        backoff: Backoff | None = None,
        limit_s: float | None = None,
        fix: str = "",
        on_event: Callable[[OutageEvent], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service = service
        self.backoff = backoff or Backoff(0.5, 10.0)
        self.limit_s = limit_s
        self.fix = fix
        self.on_event = on_event
        self._clock = clock
        self.down_since: float | None = None
        self.attempts = 0
        """Failed attempts in the current episode."""
        self.episodes = 0

    @property
    def down(self) -> bool:
        """True from a failure until the next success."""
        return self.down_since is not None

    def down_for_s(self) -> float:
        """Seconds since the current episode began (0 when up)."""
        return 0.0 if self.down_since is None else self._clock() - self.down_since

    def _emit(self, event: OutageEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def failed(self, error: BaseException | str) -> float:
        """Note a failed attempt; return the delay before the next one.

        Raises :class:`PatienceExhausted` (chained to ``error`` when it is an exception) once
        the service has been down for ``limit_s`` or longer.
        """
        now = self._clock()
        text = str(error)
        if self.down_since is None:
            self.down_since = now
            self.attempts = 0
            self.episodes += 1
            self._emit(OutageEvent("down", self.service, 1, text))
        self.attempts += 1
        down_for = now - self.down_since
        if self.limit_s is not None and down_for >= self.limit_s:
            self._emit(OutageEvent("gone", self.service, self.attempts, text, 0.0, down_for))
            gone = PatienceExhausted(
                f"{self.service} unavailable for {down_for:.0f} s, longer than its patience of "
                f"{self.limit_s:g} s (last error: {text})" + (f"; {self.fix}" if self.fix else ""),
                service=self.service, waited_s=down_for,
            )
            if isinstance(error, BaseException):
                raise gone from error
            raise gone
        delay = self.backoff.next_delay()
        if self.limit_s is not None:
            # Never sleep past the patience: the last attempt happens at its end.
            delay = max(0.0, min(delay, self.limit_s - down_for))
        self._emit(OutageEvent("retry", self.service, self.attempts, text, delay, down_for))
        when = (datetime.now() + timedelta(seconds=delay)).strftime("%H:%M:%S")
        if self.attempts == 1:
            _log.warning("%s unavailable (%s); next attempt at %s (in %.1f s)%s", self.service,
                         text, when, delay, "" if self.limit_s is None
                         else f", giving up after {self.limit_s:g} s")
        else:
            _log.debug("%s still unavailable after %d attempts, %.0f s (%s); next attempt at %s",
                       self.service, self.attempts, down_for, text, when)
        return delay

    def succeeded(self) -> None:
        """Note a success: ends the episode (INFO once) and resets the backoff."""
        self.backoff.reset()
        if self.down_since is None:
            return
        down_for = self._clock() - self.down_since
        attempts = self.attempts
        self.down_since = None
        self.attempts = 0
        _log.info("%s is back after %.1f s (%d failed attempts)", self.service, down_for, attempts)
        self._emit(OutageEvent("up", self.service, attempts, "", 0.0, down_for))

    async def wait(self, error: BaseException | str) -> float:
        """:meth:`failed`, then sleep the delay; returns the delay slept."""
        delay = self.failed(error)
        await anyio.sleep(delay)
        return delay


async def wait_out(
    call: Callable[[], Awaitable[_T]],
    patience: Patience,
    *,
    transient: tuple[type[BaseException], ...] = (TransientError,),
) -> _T:
    """Call ``call()`` until it returns, waiting with ``patience`` after each transient failure.

    Anything not in ``transient`` (configuration errors above all) propagates at once; so does
    :class:`PatienceExhausted` when the service stays down past ``patience.limit_s``.
    """
    while True:
        try:
            result = await call()
        except transient as exc:
            await patience.wait(exc)
        else:
            patience.succeeded()
            return result

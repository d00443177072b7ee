"""vLLM-dialect DOUBLES as replicas of a model server with a capacity, for the fleet simulation.

A real GPU replica answers a bounded number of requests at once; past that, requests queue.
:class:`Gate` wraps a double's app so that it serves at most ``slots`` chat requests at a time,
each held ``service_s`` (the model's time; the double's own answer comes on top), and logs each
request's session key, arrival, start and end. :class:`DoubleReplicas` starts ``count`` such
doubles side by side (root URLs for :class:`emil.serving.router.VLLMRouter`), and
:meth:`DoubleReplicas.figures` turns the logs into what queueing arithmetic predicts and what
happened: arrival rate, mean service time, utilisation, mean wait. Not vLLM, and no model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.types import ASGIApp, Receive, Scope, Send

from emil.testing.script import Policy
from emil.testing.vllm_double import VLLMDouble

__all__ = ["DoubleReplicas", "Gate", "ReplicaFigures", "Served"]


@dataclass(frozen=True)
class Served:
    """One chat request a gated replica served."""

    session: str
    arrived: float
    started: float
    ended: float


class Gate:
    """ASGI middleware: at most ``slots`` chat requests at once, each held ``service_s``."""

    def __init__(self, app: ASGIApp, *, slots: int, service_s: float) -> None:
        self.app = app
        self.slots = slots
        self.service_s = service_s
        self.log: list[Served] = []
        self._sem: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        headers = dict(scope.get("headers") or [])
        session = headers.get(b"x-session-id", b"").decode(errors="replace")
        arrived = time.monotonic()
        async with self._sem:
            started = time.monotonic()
            await asyncio.sleep(self.service_s)
            await self.app(scope, receive, send)
            self.log.append(Served(session, arrived, started, time.monotonic()))


@dataclass(frozen=True)
class ReplicaFigures:
    """One replica over a window: what it served and how long requests waited."""

    sessions: list[str]
    requests: int
    arrivals_per_s: float
    service_s: float
    """Mean time a request held a slot (the gate's hold plus the double's own answer)."""
    utilisation: float
    """Busy slot-time over the window's slot-time."""
    wait_s: float
    """Mean time a request queued for a slot."""

    def predicted_wait_s(self, slots: int) -> float:
        """M/D/1's mean queueing wait, rho * S / (2 (1 - rho)), from the arrival rate and the mean
        service time (slots > 1: M/D/c is not closed-form; None-like inf past saturation)."""
        rho = self.arrivals_per_s * self.service_s / slots
        if rho >= 1:
            return float("inf")
        return rho * self.service_s / (2 * (1 - rho)) if slots == 1 else float("nan")


@dataclass
class DoubleReplicas:
    """``count`` gated doubles of ``policy`` (each its own instance from ``make_policy``)."""

    count: int
    make_policy: Callable[[], Policy]
    slots: int = 1
    service_s: float = 0.25
    doubles: list[VLLMDouble] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)

    def start(self) -> None:
        for _ in range(self.count):
            double = VLLMDouble(self.make_policy())
            gate = Gate(double.app, slots=self.slots, service_s=self.service_s)
            double.app = gate  # type: ignore[assignment]  # uvicorn serves whatever ASGI app start() finds
            double.start()
            self.doubles.append(double)
            self.gates.append(gate)

    def stop(self) -> None:
        for double in self.doubles:
            double.stop()

    @property
    def urls(self) -> list[str]:
        """Root URLs (``http://127.0.0.1:PORT``), what vllm-router takes as workers."""
        return [d.root_url for d in self.doubles]

    def figures(self, since: float, until: float) -> list[ReplicaFigures]:
        """Per replica, the requests that arrived within [since, until] (monotonic times)."""
        out = []
        span = max(until - since, 1e-9)
        for gate in self.gates:
            served = [s for s in gate.log if since <= s.arrived <= until]
            busy = sum(s.ended - s.started for s in served)
            out.append(ReplicaFigures(
                sessions=sorted({s.session.rsplit("-", 1)[0] for s in served}),
                requests=len(served),
                arrivals_per_s=len(served) / span,
                service_s=busy / len(served) if served else 0.0,
                utilisation=busy / (span * self.slots),
                wait_s=sum(s.started - s.arrived for s in served) / len(served) if served else 0.0,
            ))
        return out

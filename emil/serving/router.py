"""vllm-router in front of vLLM replicas, started and stopped by the project.

The scale-out test (tests/integration/real_vllm/test_scale_out.py) and ``tools/bench_router.py``
put the real router (PyPI ``vllm-router``, a prebuilt binary, installed with the CPU vLLM
environment: :attr:`emil.serving.cpu_vllm.CpuVLLMEnv.router`) in front of CPU replicas, exactly
as docs/scale-out.md deploys it in front of GPU ones. :class:`VLLMRouter` starts it in its own
process group on a free loopback port, waits until it serves ``/v1/models`` (it first waits for
every worker's ``/health``), reads where it sent each session from its log
(:meth:`VLLMRouter.routes`: the ``consistent_hash`` policy logs every decision), and stops it.

:func:`replica_counters` reads the figures the docs say to watch on each replica's
``/metrics``: prefix-cache queries and hits (tokens), finished requests, running and waiting.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from emil.exceptions import EmilError
from emil.serving.cpu_vllm import free_port
from emil.serving.metrics import parse_prometheus

__all__ = [
    "POLICIES",
    "ReplicaCounters",
    "RouterError",
    "RouterOptions",
    "VLLMRouter",
    "replica_counters",
]

POLICIES = ("consistent_hash", "round_robin", "random", "power_of_two", "cache_aware",
            "sticky_least_loaded")
"""vllm-router 0.1.17's policies that need nothing but worker URLs (``kv_aware`` needs the
workers' KV events)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ROUTE = re.compile(r"Consistent hash routing: key='(?P<key>[^']*)' -> worker='(?P<worker>[^']*)'")


class RouterError(EmilError):
    """The router could not start (the message has the cause and its log's last lines)."""


@dataclass(frozen=True)
class RouterOptions:
    """How the router runs (its flags; ``vllm-router --help`` has them all)."""

    policy: str = "consistent_hash"
    port: int | None = None
    """None: a free loopback port."""
    metrics_port: int | None = None
    """The router's own Prometheus port (None: a free one)."""
    health_check_interval_s: int = 60
    """How often it checks each worker's /health (vllm-router's default: 60)."""
    health_failure_threshold: int = 3
    """Failed checks before a worker is taken out of the ring (vllm-router's default: 3)."""
    startup_timeout_s: float = 120.0
    extra_args: tuple[str, ...] = ()


class VLLMRouter:
    """One vllm-router process in front of ``workers`` (root URLs, ``http://host:port``).

    ::

        with VLLMRouter(env.router, [a.root_url, b.root_url], log_path=Path("router.log")) as r:
            ... r.base_url ...   # http://127.0.0.1:PORT/v1, what Emil's endpoint is set to
    """

    def __init__(
        self,
        binary: Path,
        workers: Sequence[str],
        options: RouterOptions | None = None,
        *,
        log_path: Path,
    ) -> None:
        self.binary = binary
        self.workers = list(workers)
        self.options = options or RouterOptions()
        if self.options.policy not in POLICIES:
            raise RouterError(f"unknown router policy {self.options.policy!r}; one of {', '.join(POLICIES)}")
        self.port = self.options.port or free_port()
        self.metrics_port = self.options.metrics_port or free_port()
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``): Emil's ``endpoint``."""
        return f"{self.root_url}/v1"

    @property
    def argv(self) -> list[str]:
        o = self.options
        return [
            str(self.binary), "--host", "127.0.0.1", "--port", str(self.port),
            "--worker-urls", *self.workers, "--policy", o.policy,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.metrics_port),
            "--worker-startup-check-interval", "1",
            "--health-check-interval-secs", str(o.health_check_interval_s),
            "--health-failure-threshold", str(o.health_failure_threshold),
            *o.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        """Start the router; return once it serves ``/v1/models`` (RouterError otherwise)."""
        if self._proc is not None:
            raise RouterError("this router was already started")
        if not self.binary.exists():
            raise RouterError(
                f"{self.binary}: no vllm-router binary; install it with "
                "python3 tools/launch_vllm.py --cpu-test-model --install-only"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.options.startup_timeout_s
        with httpx.Client(timeout=5) as client:
            while True:
                if self._proc.poll() is not None:
                    raise RouterError(f"vllm-router exited with {self._proc.returncode}: {self._tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/models").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    self.stop()
                    raise RouterError(
                        f"vllm-router did not serve /v1/models within {self.options.startup_timeout_s:g} s: "
                        f"{self._tail()}"
                    )
                time.sleep(0.5)

    def _tail(self, lines: int = 12) -> str:
        try:
            text = _ANSI.sub("", self.log_path.read_text(errors="replace"))
        except OSError:
            return "(no log)"
        return " | ".join(text.splitlines()[-lines:])

    def log_text(self) -> str:
        """The router's log so far, without colour codes."""
        try:
            return _ANSI.sub("", self.log_path.read_text(errors="replace"))
        except OSError:
            return ""

    def routes(self) -> Counter[tuple[str, str]]:
        """(hash key, worker URL) -> requests routed so, from the log (consistent_hash only).

        The key is as the router saw it, e.g. ``header:x-session-id:Emil1-0123456789ab``; a
        request without a session key shows as ``request_hash:...`` (the body's hash).
        """
        return Counter((m["key"], m["worker"]) for m in _ROUTE.finditer(self.log_text()))

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after 10 s."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def __enter__(self) -> VLLMRouter:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class ReplicaCounters:
    """One scrape of a replica's ``/metrics``: what docs/scale-out.md says to watch."""

    prefix_queries: float
    """Prompt tokens looked up in the prefix cache (``vllm:prefix_cache_queries_total``)."""
    prefix_hits: float
    """Of those, tokens found (``vllm:prefix_cache_hits_total``)."""
    requests: float
    """Finished requests (``vllm:request_success_total``, every finish reason)."""
    running: float
    waiting: float

    def __sub__(self, earlier: ReplicaCounters) -> ReplicaCounters:
        """The counters' growth since ``earlier`` (the gauges as they are now)."""
        return ReplicaCounters(
            self.prefix_queries - earlier.prefix_queries, self.prefix_hits - earlier.prefix_hits,
            self.requests - earlier.requests, self.running, self.waiting,
        )

    @property
    def hit_rate(self) -> float | None:
        """Hits / queries (None when nothing was looked up)."""
        return self.prefix_hits / self.prefix_queries if self.prefix_queries > 0 else None


def replica_counters(text: str) -> ReplicaCounters:
    """:class:`ReplicaCounters` from a replica's Prometheus text (summed over label sets)."""
    totals: dict[str, float] = {}
    for name, _labels, value in parse_prometheus(text):
        totals[name] = totals.get(name, 0.0) + value
    return ReplicaCounters(
        prefix_queries=totals.get("vllm:prefix_cache_queries_total", 0.0),
        prefix_hits=totals.get("vllm:prefix_cache_hits_total", 0.0),
        requests=totals.get("vllm:request_success_total", 0.0),
        running=totals.get("vllm:num_requests_running", 0.0),
        waiting=totals.get("vllm:num_requests_waiting", 0.0),
    )

"""A fail-fast supervisor for ``vllm serve``: no restart loop on a configuration error.

The field notes: a container started with ``--restart unless-stopped`` reloaded 23 GiB of
weights nine times for ``moe_backend='marlin' is not supported for unquantized MoE``. A
restart policy is for transient failures; a configuration error fails identically forever.
So this supervisor:

- starts the server (its own process group), waits for ``/health``;
- stops at once, printing the cause, if the engine dies before its first healthy moment (a
  start-up failure is deterministic: same flags, same weights, same error);
- after a healthy start, restarts a crash a bounded number of times with exponential backoff,
  but never a configuration error, and never the same failure twice in a row.

:class:`RestartPolicy` is the pure decision; :class:`Supervisor` does the I/O around it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

import httpx

from emil.serving.failures import EngineFailure, classify_failure
from emil.serving.profile import ServeProfile, build_command, cleanup_command

__all__ = ["Decision", "RestartPolicy", "Supervisor", "SupervisorOutcome"]

log = logging.getLogger(__name__)

_STARTUP_TIMEOUT = "startup timeout"

OutcomeReason = Literal[
    "stopped",
    "configuration_error",
    "startup_failed",
    "startup_timeout",
    "same_failure_twice",
    "restart_limit",
]


@dataclass(frozen=True)
class Decision:
    """What to do after a failure."""

    restart: bool
    delay_s: float
    reason: OutcomeReason | Literal["restart"]
    explanation: str


@dataclass(frozen=True)
class RestartPolicy:
    """Bounded restarts with backoff; configuration errors and repeats are never retried."""

    max_restarts: int = 3
    backoff_base_s: float = 10.0
    backoff_cap_s: float = 300.0

    def decide(
        self,
        failure: EngineFailure,
        *,
        was_healthy: bool,
        previous: EngineFailure | None,
        restarts: int,
    ) -> Decision:
        """Decide on ``failure``; ``restarts`` counts restarts already spent in this budget."""
        if not was_healthy:
            return Decision(
                False,
                0.0,
                "startup_failed",
                "the engine died during start-up; not retried, because a start-up failure "
                "repeats identically and every attempt reloads the weights",
            )
        if failure.kind == "configuration":
            return Decision(
                False,
                0.0,
                "configuration_error",
                "a configuration error fails the same way on every start; fix the profile",
            )
        if previous is not None and previous.signature == failure.signature:
            return Decision(
                False,
                0.0,
                "same_failure_twice",
                "the same failure twice in a row is not transient",
            )
        if restarts >= self.max_restarts:
            return Decision(
                False,
                0.0,
                "restart_limit",
                f"{restarts} restarts spent (limit {self.max_restarts})",
            )
        delay = min(self.backoff_cap_s, self.backoff_base_s * 2**restarts)
        return Decision(True, delay, "restart", f"restart {restarts + 1}/{self.max_restarts}")


@dataclass
class SupervisorOutcome:
    """How a supervised run ended."""

    reason: OutcomeReason
    message: str
    starts: int
    failures: list[EngineFailure] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 when the operator stopped it, 2 for a configuration error, 1 otherwise."""
        if self.reason == "stopped":
            return 0
        if self.reason == "configuration_error" or (
            self.failures and self.failures[-1].kind == "configuration"
        ):
            return 2
        return 1


class _Process:
    """One server process: its own process group, output to a ring buffer, a file and a sink."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_file: IO[str] | None,
        echo: Callable[[str], None] | None,
        tail_lines: int,
    ) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._log_file = log_file
        self._echo = echo
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env={**os.environ, **env},
            start_new_session=True,  # engine-core children die with the group we signal
        )
        self._reader = threading.Thread(target=self._read, name="vllm-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.tail.append(line.rstrip("\n"))
            if self._log_file is not None:
                self._log_file.write(line)
                self._log_file.flush()
            if self._echo is not None:
                self._echo(line.rstrip("\n"))

    def poll(self) -> int | None:
        return self.proc.poll()

    def drain(self, timeout: float = 2.0) -> list[str]:
        """Wait briefly for the last output after exit, then return the tail."""
        self._reader.join(timeout)
        return list(self.tail)

    def close(self, grace_s: float) -> None:
        """Make sure the process is gone and its pipe is closed."""
        self.stop(grace_s)
        self.proc.wait()
        self._reader.join(grace_s)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self, grace_s: float) -> None:
        """SIGTERM the group, SIGKILL it after ``grace_s`` if still alive."""
        if self.proc.poll() is not None:
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(grace_s)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)


class Supervisor:
    """Runs one serve profile until the operator stops it or a failure must not be retried."""

    def __init__(
        self,
        profile: ServeProfile,
        *,
        log_path: Path | None = None,
        echo: Callable[[str], None] | None = None,
        on_status: Callable[[str], None] | None = None,
        tail_lines: int = 400,
    ) -> None:
        self.profile = profile
        self.argv = build_command(profile)
        s = profile.supervise
        self.policy = RestartPolicy(s.max_restarts, s.backoff_base_s, s.backoff_cap_s)
        self._log_path = log_path
        self._echo = echo
        self._on_status = on_status
        self._tail_lines = tail_lines
        self.stop_event = threading.Event()
        self.healthy_event = threading.Event()
        """Set while the server is healthy (tests and callers can wait on it)."""
        self.process_group: int | None = None
        """The process group of the latest start (its leader's pid), None before the first."""

    def _status(self, message: str) -> None:
        log.info("%s", message)
        if self._on_status is not None:
            self._on_status(message)

    def run(self) -> SupervisorOutcome:
        """Supervise until stopped (``stop_event``) or a failure that must not be retried."""
        failures: list[EngineFailure] = []
        previous: EngineFailure | None = None
        restarts = 0
        starts = 0
        log_file = self._log_path.open("a") if self._log_path is not None else None
        try:
            while True:
                starts += 1
                self._status(f"start {starts}: {shlex.join(self.argv)}")
                proc = _Process(
                    self.argv, self.profile.runner.env, log_file, self._echo, self._tail_lines
                )
                self.process_group = proc.proc.pid
                try:
                    result = self._watch(proc)
                finally:
                    proc.close(self.profile.supervise.stop_grace_s)
                    self._cleanup()
                if result is None:
                    return SupervisorOutcome("stopped", "stopped by the operator", starts, failures)
                failure, was_healthy, uptime = result
                failures.append(failure)
                if was_healthy and uptime >= self.profile.supervise.stable_after_s:
                    restarts = 0  # a long healthy run refills the budget
                decision = self.policy.decide(
                    failure, was_healthy=was_healthy, previous=previous, restarts=restarts
                )
                if not decision.restart:
                    assert decision.reason != "restart"
                    reason: OutcomeReason = decision.reason
                    if failure.signature == _STARTUP_TIMEOUT:
                        reason = "startup_timeout"
                    message = f"{failure.cause}\n-> not restarting: {decision.explanation}"
                    self._status(f"engine failed: {message}")
                    return SupervisorOutcome(reason, message, starts, failures)
                previous = failure
                restarts += 1
                self._status(
                    f"engine crashed after a healthy start: {failure.cause}; "
                    f"{decision.explanation} in {decision.delay_s:.1f}s"
                )
                if self.stop_event.wait(decision.delay_s):
                    return SupervisorOutcome("stopped", "stopped by the operator", starts, failures)
        finally:
            if log_file is not None:
                log_file.close()

    def _cleanup(self) -> None:
        """Remove a container the ended start left behind (best effort, bounded)."""
        command = cleanup_command(self.profile)
        if command is None:
            return
        try:
            subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=self.profile.supervise.stop_grace_s,
                check=False,
                env={**os.environ, **self.profile.runner.env},
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("cleanup %s failed: %s", shlex.join(command), exc)

    def _watch(self, proc: _Process) -> tuple[EngineFailure, bool, float] | None:
        """Follow one process: None when stopped, else (failure, was_healthy, healthy uptime)."""
        s = self.profile.supervise
        deadline = time.monotonic() + s.startup_timeout_s
        healthy_since: float | None = None
        bad_checks = 0
        last_health = ""
        with httpx.Client(timeout=min(5.0, s.health_interval_s * 2)) as client:
            while True:
                if self.stop_event.is_set():
                    self._status("stopping the server")
                    proc.stop(s.stop_grace_s)
                    self.healthy_event.clear()
                    return None
                code = proc.poll()
                if code is not None:
                    self.healthy_event.clear()
                    tail = proc.drain()
                    uptime = time.monotonic() - healthy_since if healthy_since else 0.0
                    return classify_failure(tail, code), healthy_since is not None, uptime
                ok, last_health = _check_health(client, self.profile.health_url)
                now = time.monotonic()
                if ok:
                    bad_checks = 0
                    if healthy_since is None:
                        healthy_since = now
                        self.healthy_event.set()
                        self._status(f"healthy: {self.profile.health_url}")
                elif healthy_since is None and now > deadline:
                    proc.stop(s.stop_grace_s)
                    tail = proc.drain()
                    failure = classify_failure(tail, proc.poll())
                    return (
                        EngineFailure(
                            cause=f"not healthy after {s.startup_timeout_s:.0f}s "
                            f"(last: {failure.cause})",
                            kind="configuration",
                            exit_code=proc.poll(),
                            signature=_STARTUP_TIMEOUT,
                        ),
                        False,
                        0.0,
                    )
                elif healthy_since is not None:
                    bad_checks += 1
                    if bad_checks >= s.health_failures:
                        # Alive but unhealthy (vLLM answers 503 once the engine is dead).
                        self.healthy_event.clear()
                        proc.stop(s.stop_grace_s)
                        tail = proc.drain()
                        # The exit status is our own SIGTERM's, so it says nothing.
                        failure = classify_failure(
                            tail, None, health_message=f"/health failed: {last_health}"
                        )
                        return failure, True, now - healthy_since
                if self.stop_event.wait(s.health_interval_s):
                    continue


def _check_health(client: httpx.Client, url: str) -> tuple[bool, str]:
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        return False, type(exc).__name__
    return response.status_code == 200, f"HTTP {response.status_code}"

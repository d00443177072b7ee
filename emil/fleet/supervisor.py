"""``fleet run``: the fleet's NPCs as child processes, for development, under the units' rule.

Each NPC is ``run_emil.py live --config FILE --npc NAME`` (what ``emil@NAME.service`` runs) in
its own process group, its output appended to ``LOG_DIR/NAME.log``. The restart rule is the
units' (:class:`~emil.fleet.restart.RestartPolicy`): exit 0 and 2 are final, 1, 3 and a death
by signal are restarted after a growing delay, at most ``burst`` starts within ``interval_s``.
SIGINT or SIGTERM stops every NPC cleanly (SIGTERM to each, SIGKILL to its group past
``stop_timeout_s``), and whatever is left of a group after its Emil ended (an orphaned Node bot
of a crashed Emil) is killed, so a restarted NPC never meets its own ghost on the server.

Every event is one line (``fleet: Mira exited 3 (a service gone past its patience); restart 1 in
2 s``). ``run`` returns 2 when an NPC ended on a configuration error, 1 when one was given up,
else 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc

from emil.fleet.restart import DEFAULT_POLICY, EXIT_MEANINGS, RestartPolicy

__all__ = ["Npc", "Supervisor", "live_command"]

ROOT = Path(__file__).resolve().parents[2]


def live_command(config: Path, name: str) -> list[str]:
    """One NPC's process: what the systemd instance ``emil@NAME.service`` runs."""
    return [sys.executable, str(ROOT / "run_emil.py"), "live", "--config", str(config), "--npc", name]


@dataclass
class Npc:
    """One supervised NPC: its command, log and what happened to it."""

    name: str
    command: list[str]
    log: Path
    starts: deque[float] = field(default_factory=deque)
    restarts: int = 0
    exits: list[int] = field(default_factory=list)
    """Every exit code so far (negative: killed by that signal)."""
    proc: anyio.abc.Process | None = None
    final: str = ""
    """Why it is not running any more ("" while it is, or will be again)."""


def _describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}: a crash"
        return f"killed by signal {-code}: a crash"
    return EXIT_MEANINGS.get(code, "a failure")


def _last_line(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 4096))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


class Supervisor:
    """Start, watch, restart and stop the NPCs (see the module docstring).

    ``npcs`` maps each NPC's name to its command (:func:`live_command`); ``say`` gets each event
    line; ``env`` and ``cwd`` are the children's; ``signals``: SIGINT/SIGTERM stop the fleet.
    """

    def __init__(
        self,
        npcs: Mapping[str, Sequence[str]],
        log_dir: Path,
        *,
        policy: RestartPolicy = DEFAULT_POLICY,
        say: Callable[[str], None] = print,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        signals: bool = True,
    ) -> None:
        self.policy = policy
        self.signals = signals
        """Stop on SIGINT/SIGTERM (``fleet run``); off where the caller owns the signals (a test run)."""
        self.say = say
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("PYTHONUNBUFFERED", "1")
        self.cwd = cwd
        self.log_dir = log_dir
        self.npcs = [Npc(name, list(cmd), log_dir / f"{name}.log") for name, cmd in npcs.items()]
        self.stopping = ""
        self._stopped: anyio.Event

    def _is_stopping(self) -> bool:
        return bool(self.stopping)

    def _line(self, text: str) -> None:
        self.say(f"fleet: {text}")

    async def run(self) -> int:
        """Run until every NPC has ended for good, or a signal stopped them; the exit code."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._stopped = anyio.Event()
        async with anyio.create_task_group() as tg:
            if self.signals:
                tg.start_soon(self._signals)
            async with anyio.create_task_group() as keepers:
                for npc in self.npcs:
                    keepers.start_soon(self._keep, npc)
            tg.cancel_scope.cancel()
        if self.stopping:
            self._line(f"all {len(self.npcs)} NPCs stopped ({self.stopping})")
            return 0
        codes = [npc.exits[-1] for npc in self.npcs if npc.exits]
        if 2 in codes:
            return 2
        return 1 if any(npc.final.startswith("given up") for npc in self.npcs) else 0

    def stop(self, why: str) -> None:
        """Stop every NPC (what SIGINT/SIGTERM do)."""
        if self.stopping:
            return
        self.stopping = why
        running = [n.name for n in self.npcs if n.proc is not None and n.proc.returncode is None]
        self._line(f"{why}: stopping {len(running)} running NPC(s)" + (f" ({', '.join(running)})" if running else ""))
        self._stopped.set()  # each running NPC's _wait sends it SIGTERM

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                self.stop(f"signal {signal.Signals(signum).name}")

    def _too_many(self, npc: Npc, now: float) -> bool:
        while npc.starts and now - npc.starts[0] > self.policy.interval_s:
            npc.starts.popleft()
        return len(npc.starts) >= self.policy.burst

    async def _keep(self, npc: Npc) -> None:
        while not self._is_stopping():
            npc.starts.append(time.monotonic())
            code = await self._once(npc)
            npc.exits.append(code)
            if self._is_stopping():
                npc.final = f"stopped (exit {code})"
                self._line(f"{npc.name}: stopped (exit {code})")
                return
            what = f"{npc.name}: exited {code} ({_describe(code)})"
            if not self.policy.restarts(code):
                npc.final = what
                last = _last_line(npc.log) if code != 0 else ""
                self._line(f"{what}; not restarted" + (f": {last}" if last else ""))
                return
            if self._too_many(npc, time.monotonic()):
                npc.final = f"given up: {self.policy.burst} starts within {self.policy.interval_s:g} s"
                self._line(f"{what}; {npc.final}, not restarted (see {npc.log})")
                return
            delay = self.policy.delay_s(npc.restarts)
            npc.restarts += 1
            self._line(f"{what}; restart {npc.restarts} in {delay:.3g} s")
            with anyio.move_on_after(delay):
                await self._stopped.wait()

    async def _once(self, npc: Npc) -> int:
        """Start the NPC's process, wait for its end; its group's leftovers are killed."""
        with npc.log.open("ab") as log:
            proc = await anyio.open_process(
                npc.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )
        npc.proc = proc
        self._line(f"{npc.name}: started (pid {proc.pid}; log {npc.log})")
        try:
            await self._wait(proc)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # an orphaned Node bot, if any
        assert proc.returncode is not None
        return proc.returncode

    async def _wait(self, proc: anyio.abc.Process) -> None:
        """Wait for ``proc``; once stopping, give it ``stop_timeout_s`` and then SIGKILL its group."""
        ended = anyio.Event()

        async def deadline() -> None:
            await self._stopped.wait()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)  # Emil's clean stop
            with anyio.move_on_after(self.policy.stop_timeout_s):
                await ended.wait()
            if not ended.is_set():
                self._line(f"pid {proc.pid} did not stop within {self.policy.stop_timeout_s:g} s; SIGKILL to its group")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(deadline)
            await proc.wait()
            ended.set()
            tg.cancel_scope.cancel()

"""Chaos: Emil as an operator runs it, against faults a hostile player and a bad server cause.

Everything is real except the model: the embedded Minecraft server (flying-squid), Emil itself
as a process (``run_emil.py live``), real mineflayer players, and the vLLM-dialect DOUBLE (a
SCRIPTED brain, not a model) in a process of its own, whose fault modes (emil.testing.faults)
are set over HTTP. A *scenario* injects one fault class and says what Emil did: it is alive
afterwards (a probe chat answered within a bound) or it stopped with an exit code, one line on
stderr and a recording that says the same.

The slow fault suite (tests/integration/agent/test_faults.py) asserts each outcome;
``tools/chaos.py`` runs the scenarios several times and prints the table in docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process

from emil.recording import EventRecord, Record, read_recording
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.testing import processes
from emil.testing.brains import SCRIPTED_PREFIX
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.subprocess_double import double_in_subprocess
from emil.testing.vllm_double import VLLMDouble

__all__ = [
    "CHAOS_SETTINGS",
    "ChaosBrain",
    "EmilProcess",
    "Rig",
    "Scenario",
    "ScenarioResult",
    "chaos_rig",
    "serve_chaos_double",
]

ROOT = Path(__file__).resolve().parents[2]
_PROBE = re.compile(r"probe-\d+")

CHAOS_SETTINGS: dict[str, str] = {
    "EMIL_REQUEST_TIMEOUT_S": "6",
    "EMIL_FIRST_TOKEN_TIMEOUT_S": "3",
    "EMIL_INTERRUPT_GRACE_S": "0.5",
    "EMIL_CHAT_DEBOUNCE_S": "0.2",
    "EMIL_URGENT_INTERVAL_S": "5",
    "EMIL_MAX_SERVER_FAULT_RETRIES": "3",
    "EMIL_ENDPOINT_WAIT_S": "60",
    "EMIL_REFLEXES": "defend,flee,eat",
    "EMIL_OPERATORS": "alex",
    "EMIL_OBSERVATION_CAP_TOKENS": "1500",
    "EMIL_METRICS_ADDRESS": "127.0.0.1:0",  # any free port: never the default a live Emil holds
}
"""Emil's settings under chaos: short time limits so a scenario takes seconds, not minutes."""


class ChaosBrain:
    """SCRIPTED policy (not a model): acknowledges every ``probe-N`` in the observations it has
    not answered yet with one ``say``, ends a turn after a tool result, otherwise says nothing."""

    def __call__(self, request: ScriptRequest) -> Reply:
        if request.messages and request.messages[-1].get("role") == "tool":
            return Reply(content=f"{SCRIPTED_PREFIX}done")
        probes: list[str] = []
        for message in reversed(request.messages):
            if message.get("role") == "assistant":
                break  # what came before was answered already
            if message.get("role") == "user":
                probes[:0] = _PROBE.findall(str(message.get("content") or ""))
        if not probes:
            return Reply(content=f"{SCRIPTED_PREFIX}nothing to do")
        text = f"{SCRIPTED_PREFIX}ack {' '.join(dict.fromkeys(probes))}"
        return Reply(tool_calls=(ScriptedCall("say", {"text": text}),))


def serve_chaos_double(urls: Any, stop: Any) -> None:
    """Child-process entry (spawned): the double with the chaos brain, until ``stop`` is set."""
    with VLLMDouble(ChaosBrain(), window=32768) as double:
        urls.put(double.base_url)
        stop.wait()


@dataclass
class EmilProcess:
    """``run_emil.py live`` as a child process, its stderr kept in a file."""

    proc: Process
    stderr_path: Path
    recording: Path
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def last_line(self) -> str:
        lines = [line for line in self.stderr().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    async def wait(self, within: float) -> int:
        with anyio.fail_after(within):
            return await self.proc.wait()

    async def stop(self, signum: signal.Signals = signal.SIGTERM, within: float = 30) -> tuple[int, float]:
        """Send ``signum``; returns the exit code and the seconds until the process ended.

        SIGKILL takes the process's children with it (a killed Emil cannot stop its bot's Node
        process, which would stay logged in as Emil)."""
        family = self.descendants() if signum == signal.SIGKILL else []
        sent = time.monotonic()
        self.proc.send_signal(signum)
        for pid in family:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        code = await self.wait(within)
        return code, time.monotonic() - sent

    def descendants(self) -> list[int]:
        """Child processes (recursively), from /proc (the bot's Node process among them)."""
        return _descendants(self.pid)

    def node_pid(self) -> int | None:
        """The Node process that runs Emil's bot (JSPyBridge)."""
        for pid in self.descendants():
            with contextlib.suppress(OSError):
                if b"node" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]:
                    return pid
        return None


def _descendants(pid: int) -> list[int]:
    # every thread's children: JSPyBridge starts Node from a worker thread
    out: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in children.read_text().split():
                out.append(int(child))
                out.extend(_descendants(int(child)))
    return out


@dataclass
class Rig:
    """One chaos setup: server, double (own process), a player, and Emil (own process)."""

    workdir: Path
    server: EmbeddedServer
    base_url: str
    player: PlayerBot
    emil: EmilProcess | None = None
    said: list[str] = field(default_factory=list)
    """Every line the players said (to count what the recording lost)."""
    _probes: int = 0
    _runs: int = 0

    @property
    def root_url(self) -> str:
        return self.base_url[: -len("/v1")]

    # --- the double's faults ------------------------------------------------------------------

    async def inject(self, kind: str, **fields: Any) -> None:
        async with httpx.AsyncClient(base_url=self.root_url, timeout=5) as admin:
            answer = await admin.post("/_double/faults", json={"kind": kind, **fields})
            answer.raise_for_status()
        if kind == "refuse":
            await anyio.sleep(0.2)  # the port closes a moment after the answer

    async def clear(self) -> None:
        async with httpx.AsyncClient(base_url=self.root_url, timeout=5) as admin:
            (await admin.delete("/_double/faults")).raise_for_status()

    async def begin(self) -> None:
        """Before a scenario: no fault in force, no player line counted yet."""
        await self.clear()
        self.said.clear()

    async def double_stats(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.root_url, timeout=5) as admin:
            stats: dict[str, Any] = (await admin.get("/_double/stats")).json()
            return stats

    # --- Emil ----------------------------------------------------------------------------------

    async def start_emil(self, *, recording: Path | None = None, append: bool = False, **settings: str) -> EmilProcess:
        """Start ``run_emil.py live`` and wait until it plays (its header is recorded)."""
        self._runs += 1
        recording = recording or self.workdir / f"emil-{self._runs}.jsonl"
        stderr_path = self.workdir / f"emil-{self._runs}.stderr"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1", **CHAOS_SETTINGS,
               "EMIL_MC_PORT": str(self.server.port), "EMIL_RECORDING_APPEND": "true" if append else "false",
               **{f"EMIL_{k.upper()}": v for k, v in settings.items()}}
        cmd = [sys.executable, str(ROOT / "run_emil.py"), "live", "--endpoint", self.base_url,
               "--recording", str(recording)]
        with stderr_path.open("wb") as err:
            # a process group of its own (with its bot's Node): the rig stops all of it at the end
            proc = await anyio.open_process(
                cmd, cwd=self.workdir, env=processes.child_env(env), stdout=err, stderr=err, start_new_session=True
            )
        self.emil = EmilProcess(proc, stderr_path, recording)
        with anyio.fail_after(90):
            while not self._playing(recording):
                if proc.returncode is not None:
                    return self.emil  # ended at start: the caller reads why
                await anyio.sleep(0.2)
        await anyio.sleep(1.0)  # the bot's first snapshot and events
        return self.emil

    def _playing(self, recording: Path) -> bool:
        if not recording.exists():
            return False
        return "playing as" in self.emil.stderr() if self.emil else False

    def records(self) -> list[Record]:
        assert self.emil is not None
        return list(read_recording(self.emil.recording).records)

    # --- players -------------------------------------------------------------------------------

    async def say(self, text: str, player: PlayerBot | None = None) -> None:
        self.said.append(text)
        await (player or self.player).do("chat", text=text)

    def heard(self, player: PlayerBot | None = None) -> list[str]:
        """What the player saw Emil say."""
        return [m for m in (player or self.player).messages() if m.startswith("<Emil>")]

    async def probe(self, within: float = 30.0, *, player: PlayerBot | None = None) -> float | None:
        """A player asks Emil something; seconds until Emil answers it, None past ``within``."""
        self._probes += 1
        tag = f"probe-{self._probes}"
        started = time.monotonic()
        await self.say(f"Emil, {tag}", player)
        return await self.answered(tag, within=within, started=started, player=player)

    async def answered(self, tag: str, *, within: float, started: float, player: PlayerBot | None = None) -> float | None:
        """Seconds from ``started`` until Emil's chat holds ``tag`` (None past ``within``)."""
        with anyio.move_on_after(within):
            while not any(re.search(rf"\b{re.escape(tag)}\b", m) for m in self.heard(player)):  # noqa: ASYNC110
                await anyio.sleep(0.1)
            return time.monotonic() - started
        return None

    def next_probe(self) -> str:
        self._probes += 1
        return f"probe-{self._probes}"

    def lost(self) -> int:
        """Player lines with no chat event in the recording (what the recording lost)."""
        recorded = {str(r.event.get("text")) for r in self.records()
                    if isinstance(r, EventRecord) and r.event.get("kind") == "chat"}
        return sum(1 for line in self.said if line not in recorded)

    async def settled_lost(self, within: float = 10.0) -> int:
        """:meth:`lost` once the lines still in flight had ``within`` seconds to arrive: a
        flood's last lines reach Emil after another player's answer on a loaded machine."""
        with anyio.move_on_after(within):
            while self.lost():  # noqa: ASYNC110 - the recording is written by another process
                await anyio.sleep(0.2)
        return self.lost()

    @contextlib.asynccontextmanager
    async def another_player(self, name: str) -> AsyncIterator[PlayerBot]:
        async with PlayerBot(self.server.port, name) as other:
            yield other

    async def reconnect_player(self) -> None:
        """A new player bot (the old one's process ends when the server goes away)."""
        with contextlib.suppress(Exception):
            await self.player.__aexit__(None, None, None)
        self.player = PlayerBot(self.server.port, "alex")
        await self.player.__aenter__()


@contextlib.asynccontextmanager
async def chaos_rig(workdir: Path) -> AsyncIterator[Rig]:
    """Server + double (own process) + player "alex"; Emil is started per scenario."""
    await anyio.Path(workdir).mkdir(parents=True, exist_ok=True)
    with double_in_subprocess(serve_chaos_double) as base_url:
        async with EmbeddedServer() as server:
            player = PlayerBot(server.port, "alex")
            await player.__aenter__()
            rig = Rig(workdir, server, base_url, player)
            try:
                yield rig
            finally:
                if rig.emil is not None:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(processes.stop_group, rig.emil.pid)
                        with contextlib.suppress(Exception):
                            await rig.emil.wait(10)
                with contextlib.suppress(Exception):
                    await rig.player.__aexit__(None, None, None)


@dataclass
class ScenarioResult:
    """One row of the chaos table."""

    fault: str
    did: str
    """What Emil did: "recovered", "turn failed, next answered", "exit 2 (...)"..."""
    recover_s: float | None
    """Fault to the first answer after it (or to the process exit, for an exit)."""
    lost: int
    """Player lines missing from the recording."""
    ok: bool
    """The outcome is the documented one."""
    detail: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"fault": self.fault, "did": self.did, "recover_s": self.recover_s, "lost": self.lost, "ok": self.ok}


Scenario = Callable[[Rig], Awaitable[ScenarioResult]]
"""One fault class: inject it, then say what Emil did (emil/testing/chaos_scenarios.py)."""

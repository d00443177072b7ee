"""The Emils and players of the scale-out rig, each a real process or bot.

- :class:`EmilProcess`: one ``run_emil.py live`` in its own process group, its settings as
  ``EMIL_*`` variables (:class:`EmilOptions`); ``stop()`` sends SIGTERM and returns the exit
  code; its output and recording stay for the checks. :func:`stop_all` is the clean-up.
- :class:`Chat`: players (real mineflayer bots) saying lines that name each Emil in turn, on a
  fixed beat, that can be paused.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process

from emil.recording import (
    CompletionRecord,
    HeaderRecord,
    ObservationRecord,
    Record,
    TurnRecord,
    read_recording,
)
from emil.sandbox.server import EmbeddedServer
from emil.testing.processes import child_env, stop_group
from emil.testing.soak import drain
from emil.world.bridge import Bot
from emil.world.wire import BotSettings, ReflexSettings

__all__ = ["Chat", "EmilOptions", "EmilProcess", "stop_all"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class EmilOptions:
    """Settings every Emil of a fleet gets (as EMIL_* variables)."""

    output_reserve: int = 32
    """max_completion_tokens: the random model always writes all of them."""
    request_timeout_s: float = 120.0
    first_token_timeout_s: float = 60.0
    summary_max_tokens: int = 64
    extra: dict[str, str] = field(default_factory=dict)
    """More EMIL_* variables."""


class EmilProcess:
    """One Emil: ``run_emil.py live`` in its own process (and process group)."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.workdir = workdir / name
        self.recording = self.workdir / "session.jsonl"
        self.output = bytearray()
        self.proc: Process | None = None
        self.exit_code: int | None = None

    def env(self, endpoint: str, mc_port: int, options: EmilOptions) -> dict[str, str]:
        # No EMIL_* setting of this process leaks in; the test run's tag does (emil.testing.processes).
        env = child_env({k: v for k, v in os.environ.items() if not k.startswith("EMIL_")})
        env.update({
            "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1", "PYTHONUNBUFFERED": "1",
            "EMIL_ENDPOINT": endpoint, "EMIL_MC_PORT": str(mc_port), "EMIL_BOT_NAME": self.name,
            "EMIL_DATA_DIR": str(self.workdir / "data"), "EMIL_METRICS_ADDRESS": "127.0.0.1:0",
            "EMIL_OUTPUT_RESERVE": str(options.output_reserve),
            "EMIL_REQUEST_TIMEOUT_S": str(options.request_timeout_s),
            "EMIL_FIRST_TOKEN_TIMEOUT_S": str(options.first_token_timeout_s),
            "EMIL_SUMMARY_MAX_TOKENS": str(options.summary_max_tokens),
            **options.extra,
        })  # fmt: skip
        return env

    async def start(self, endpoint: str, mc_port: int, options: EmilOptions, tg: anyio.abc.TaskGroup) -> None:
        """Start the process; its output is collected by a task in ``tg``."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, str(ROOT / "run_emil.py"), "live", "--recording", str(self.recording)]
        self.proc = await anyio.open_process(
            cmd, cwd=self.workdir, env=self.env(endpoint, mc_port, options),
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        tg.start_soon(self._read)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in self.proc.stdout:
                self.output.extend(chunk)

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def records(self) -> list[Record]:
        """Its recording so far (every readable record)."""
        return read_recording(self.recording).records if self.recording.exists() else []

    def completions(self, after: float = 0.0) -> list[CompletionRecord]:
        """Its completions written after ``after`` (unix time)."""
        return [r for r in self.records() if isinstance(r, CompletionRecord) and r.t > after]

    def turns_open(self) -> int:
        """Turns started (an observation) and not yet closed (a turn record)."""
        records = self.records()
        started = {r.turn for r in records if isinstance(r, ObservationRecord)}
        return len(started - {r.turn for r in records if isinstance(r, TurnRecord)})

    def session_key(self) -> str | None:
        """The session key its recording's header names (None before the header)."""
        return next((r.session_key for r in self.records() if isinstance(r, HeaderRecord)), None)

    async def playing(self, within: float) -> None:
        """Wait until it logs that it plays (TimeoutError, or AssertionError when it ended)."""
        with anyio.fail_after(within):
            while f"playing as {self.name}".encode() not in self.output:
                assert self.proc is not None and self.proc.returncode is None, (
                    f"{self.name} ended before it played:\n{self.text[-3000:]}"
                )
                await anyio.sleep(0.3)

    async def stop(self, within: float = 60.0) -> int:
        """SIGTERM (what Ctrl-C does), wait; SIGKILL its group past ``within``; then whatever
        of its group is left (its bot's Node process) is stopped. The exit code."""
        proc = self.proc
        assert proc is not None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with anyio.move_on_after(within):
                await proc.wait()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        await anyio.to_thread.run_sync(stop_group, proc.pid)
        self.exit_code = proc.returncode
        assert self.exit_code is not None
        return self.exit_code


async def stop_all(emils: Sequence[EmilProcess], within: float = 10.0) -> None:
    """Stop every Emil still running (the clean-up after a failure: each gets ``within``)."""
    for emil in emils:
        if emil.proc is not None and emil.proc.returncode is None:
            await emil.stop(within=within)


_LINES = (
    "{emil}, how are you today?",
    "hey {emil}, what are you doing?",
    "{emil}, nice weather isn't it",
    "{emil}, can you tell me a story?",
    "{emil}, where did you put the wood?",
)


@dataclass
class Chat:
    """Players taking turns to say a line that names the next Emil, one line per ``every_s``
    (:meth:`run`, until cancelled); :attr:`paused` holds them back (the scale-out test pauses
    them to read the servers' counters while nothing is in flight)."""

    players: Sequence[str]
    emils: Sequence[str]
    every_s: float
    paused: bool = False
    said: list[tuple[float, str, str]] = field(default_factory=list)
    """Each line said: (unix time, player, text)."""

    async def run(self, server: EmbeddedServer) -> None:
        async with contextlib.AsyncExitStack() as stack:
            bots = []
            for name in self.players:
                settings = BotSettings(
                    host="127.0.0.1", port=server.port, username=name,
                    reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False),
                )
                bots.append(await stack.enter_async_context(Bot.connect(settings)))
            tg = await stack.enter_async_context(anyio.create_task_group())
            for bot in bots:
                tg.start_soon(drain, bot)
            n = 0
            while True:
                await anyio.sleep(self.every_s)
                if self.paused:
                    continue
                player = n % len(bots)
                emil = self.emils[n % len(self.emils)]
                text = _LINES[(n // len(self.emils)) % len(_LINES)].format(emil=emil)
                outcome = await bots[player].act("say", {"text": text}, timeout=10)
                if outcome.ok:
                    self.said.append((time.time(), self.players[player], text))
                n += 1

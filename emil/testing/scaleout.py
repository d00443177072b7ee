"""Past one machine, on one machine: vLLM replicas behind vllm-router, several Emils, players.

Everything is real: vLLM replicas on this CPU (:mod:`emil.serving.cpu_vllm`: random weights,
the real Qwen3 tokenizer and template), the real router (:mod:`emil.serving.router`), an
embedded Minecraft server (flying-squid), each Emil in its own ``run_emil.py live`` process with
the router as its endpoint, and players that are real mineflayer bots chatting to the Emils by
name. The replicas' text is random tokens, so no Emil calls a tool; what is measured is the
serving side: where each session's requests go and what the prefix caches make of them.

The scale-out test (tests/integration/real_vllm/test_scale_out.py) and ``tools/bench_router.py``
run it. Pieces:

- :class:`Replicas`: N servers started side by side (each pinned to its own core when the
  machine has one), their ``/metrics`` (:func:`emil.serving.router.replica_counters`), the
  sessions each one's log names (vLLM logs ``Received request chatcmpl-<X-Request-Id>``, and
  Emil's request ids start with its session key), a prefix-cache reset between runs, a kill.
- :class:`EmilProcess`: one ``run_emil.py live``; ``stop()`` sends SIGTERM and returns the exit
  code; its output and recording stay for the checks.
- :class:`Chat`: players saying lines that name each Emil in turn, on a fixed beat.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
from anyio.abc import Process

from emil.recording import (
    CompletionRecord,
    HeaderRecord,
    ObservationRecord,
    Record,
    TurnRecord,
    read_recording,
)
from emil.serving.cpu_vllm import (
    CpuServerError,
    CpuServerOptions,
    CpuVLLMEnv,
    CpuVLLMServer,
    default_model_dir,
    group_members,
)
from emil.serving.router import ReplicaCounters, RouterOptions, VLLMRouter, replica_counters
from emil.testing.processes import child_env, stop_group
from emil.testing.soak import drain
from emil.world.bridge import Bot
from emil.world.server import EmbeddedServer
from emil.world.wire import BotSettings, ReflexSettings

__all__ = [
    "KV_BYTES_PER_TOKEN",
    "MODES",
    "Chat",
    "EmilOptions",
    "EmilProcess",
    "ModeRun",
    "Replicas",
    "quiet",
    "run_mode",
    "stop_all",
    "until",
]

ROOT = Path(__file__).resolve().parents[2]
KV_BYTES_PER_TOKEN = 512
"""KV cache per token of the tiny Qwen3 (2 layers x 1 KV head x 64 dims x K and V x 2 bytes)."""
_RECEIVED = re.compile(r"Received request chatcmpl-(?P<id>\S+?)-(?P<n>\d+): ")


class Replicas:
    """``count`` CPU vLLM servers of the tiny model, started side by side.

    ``kv_cache_tokens`` sizes each one's KV cache (small enough and sessions compete for it);
    the servers log every request (``--enable-log-requests``) and allow a prefix-cache reset
    (``VLLM_SERVER_DEV_MODE``), both for the measurements here.
    """

    def __init__(
        self,
        env: CpuVLLMEnv,
        count: int,
        log_dir: Path,
        *,
        max_model_len: int = 16384,
        kv_cache_tokens: int = 131072,
    ) -> None:
        self.env = env
        self.model = default_model_dir(env)
        self.log_dir = log_dir
        self.max_model_len = max_model_len
        self.kv_cache_tokens = kv_cache_tokens
        self.servers = [self._server(i) for i in range(count)]
        self.killed: set[int] = set()

    def _server(self, index: int, generation: int = 0) -> CpuVLLMServer:
        cores = os.cpu_count() or 1
        options = CpuServerOptions(
            max_model_len=self.max_model_len,
            kv_cache_bytes=self.kv_cache_tokens * KV_BYTES_PER_TOKEN,
            extra_args=("--enable-log-requests",),
            env={"VLLM_SERVER_DEV_MODE": "1",
                 # one core each, so two replicas do not take turns on one
                 "VLLM_CPU_OMP_THREADS_BIND": str(index % cores)},
        )  # fmt: skip
        name = f"replica-{index}" + (f"-{generation}" if generation else "")
        return CpuVLLMServer(self.env, self.model, options, log_path=self.log_dir / f"{name}.log")

    def start(self, indices: Sequence[int] | None = None) -> None:
        """Start the servers (``indices``: these only) at once; CpuServerError (all stopped)
        when one does not start."""
        errors: list[CpuServerError] = []

        def start(server: CpuVLLMServer) -> None:
            try:
                server.start()
            except CpuServerError as exc:
                errors.append(exc)

        chosen = [self.servers[i] for i in (range(len(self.servers)) if indices is None else indices)]
        threads = [threading.Thread(target=start, args=(s,)) for s in chosen]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            self.stop()
            raise errors[0]

    def revive(self) -> None:
        """Replace every killed server with a new one (a new port and log) and start it."""
        dead = sorted(self.killed)
        for i in dead:
            self.servers[i].stop()
            self.servers[i] = self._server(i, generation=len(list(self.log_dir.glob(f"replica-{i}*.log"))))
        self.killed.clear()
        if dead:
            self.start(dead)

    def stop(self) -> list[int]:
        """Stop every server; the pids that outlived their group's stop (none, normally)."""
        left: list[int] = []
        for server in self.servers:
            left += server.stop()
        return left

    def __enter__(self) -> Replicas:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> list[str]:
        """Root URLs (``http://127.0.0.1:PORT``), what the router takes."""
        return [s.root_url for s in self.servers]

    def index_of(self, url: str) -> int:
        return self.urls.index(url.rstrip("/"))

    def counters(self) -> list[ReplicaCounters | None]:
        """Each replica's /metrics now (None for a killed one)."""
        out: list[ReplicaCounters | None] = []
        with httpx.Client(timeout=10) as client:
            for i, server in enumerate(self.servers):
                if i in self.killed:
                    out.append(None)
                    continue
                response = client.get(f"{server.root_url}/metrics")
                response.raise_for_status()
                out.append(replica_counters(response.text))
        return out

    def reset_prefix_caches(self) -> None:
        """Empty every live replica's prefix cache (between benchmark runs)."""
        with httpx.Client(timeout=30) as client:
            for i, server in enumerate(self.servers):
                if i not in self.killed:
                    client.post(f"{server.root_url}/reset_prefix_cache").raise_for_status()

    def sessions(self, index: int) -> Counter[str]:
        """Session key -> chat requests replica ``index`` received, from its log."""
        path = self.servers[index].log_path
        assert path is not None
        text = path.read_text(errors="replace") if path.exists() else ""
        return Counter(m["id"] for m in _RECEIVED.finditer(text))

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index``'s whole process group (a crash, not a shutdown)."""
        server = self.servers[index]
        group = server.supervisor.process_group
        assert group is not None, "the replica never started"
        self.killed.add(index)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.2)


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


async def until(check: Callable[[], bool], within: float, *, what: str) -> None:
    """Poll ``check`` every half second (recordings and logs are files: nothing to wait on)."""
    try:
        with anyio.fail_after(within):
            while not check():  # noqa: ASYNC110
                await anyio.sleep(0.5)
    except TimeoutError:
        raise TimeoutError(f"not within {within:g} s: {what}") from None


async def quiet(replicas: Replicas, emils: Sequence[EmilProcess], talk: Chat, within: float = 180.0) -> float:
    """Hold the players back until no live replica has a request and no Emil a turn open;
    returns the time (unix) of that quiet moment."""
    talk.paused = True

    def still() -> bool:
        counters = [c for c in replicas.counters() if c is not None]
        idle = all(c.running == 0 and c.waiting == 0 for c in counters)
        return idle and not any(e.turns_open() for e in emils)

    await until(still, within, what="no request in flight and no turn open")
    await anyio.sleep(2.0)  # a debounced chat line may still start a turn
    await until(still, within, what="no request in flight and no turn open")
    return time.time()


MODES = {
    "session-key": ("consistent_hash", "X-Session-ID"),
    "round-robin": ("round_robin", "X-Session-ID"),
    "no-key": ("consistent_hash", "off"),
}
"""Benchmark modes: the router's policy and Emil's session_header. ``no-key`` is what the
router does with Emil's requests when they carry no key: it hashes each body (every request
is new), so a session's requests scatter like ``random``."""


@dataclass
class ModeRun:
    """One mode's run: what each replica's counters did, and which sessions reached it."""

    mode: str
    seconds: float
    replicas: list[ReplicaCounters]
    """Growth of each replica's counters over the run (the gauges at its end)."""
    sessions: list[list[str]]
    """Per replica, the Emils (bot names) whose requests reached it."""
    completions: int
    """Completions the Emils recorded up to the counters' reading (the Emils see each other
    leave as they stop, and may take one more turn after it)."""
    lines: int

    @property
    def hit_rate(self) -> float:
        queries = sum(r.prefix_queries for r in self.replicas)
        return sum(r.prefix_hits for r in self.replicas) / queries if queries else 0.0


async def run_mode(
    mode: str,
    replicas: Replicas,
    server: EmbeddedServer,
    router_binary: Path,
    names: Sequence[str],
    workdir: Path,
    *,
    duration_s: float,
    every_s: float,
    options: EmilOptions,
    progress: Callable[[str], None] = lambda _line: None,
) -> ModeRun:
    """Reset the prefix caches, start the router in ``mode`` and fresh Emils, let the players
    talk for ``duration_s``, wait for quiet, read the replicas' counters, stop everything."""
    policy, header = MODES[mode]
    replicas.reset_prefix_caches()
    before = replicas.counters()
    seen_before = [replicas.sessions(i) for i in range(len(replicas.servers))]
    router = VLLMRouter(router_binary, replicas.urls, RouterOptions(policy=policy),
                        log_path=workdir / "router.log")
    await anyio.to_thread.run_sync(router.start)
    emils = [EmilProcess(name, workdir) for name in names]
    talk = Chat(("alex", "bella"), names, every_s=every_s)
    opts = EmilOptions(options.output_reserve, options.request_timeout_s, options.first_token_timeout_s,
                       options.summary_max_tokens, {**options.extra, "EMIL_SESSION_HEADER": header})
    started = time.monotonic()
    try:
        async with anyio.create_task_group() as tg:
            for emil in emils:
                await emil.start(router.base_url, server.port, opts, tg)
            for emil in emils:
                await emil.playing(within=180)
            progress(f"{mode}: {len(emils)} Emils playing; players talk for {duration_s:g} s")
            tg.start_soon(talk.run, server)
            await anyio.sleep(duration_s)
            quiet_at = await quiet(replicas, emils, talk)
            after = replicas.counters()
            for emil in emils:
                await emil.stop()
            tg.cancel_scope.cancel()
    finally:
        await stop_all(emils)
        router.stop()
    deltas = [a - b for a, b in zip(after, before, strict=True) if a is not None and b is not None]
    keys = {e.name: e.session_key() for e in emils}
    seen = [replicas.sessions(i) - seen_before[i] for i in range(len(replicas.servers))]
    return ModeRun(
        mode=mode, seconds=time.monotonic() - started, replicas=deltas,
        sessions=[sorted(name for name, key in keys.items() if key and seen[i][key]) for i in range(len(seen))],
        completions=sum(1 for e in emils for r in e.completions() if r.t <= quiet_at), lines=len(talk.said),
    )

"""Past one machine, on one machine: vLLM replicas behind vllm-router, several Emils, players.

Everything is real: vLLM replicas on this CPU (:mod:`emil.serving.cpu_vllm`: random weights,
the real Qwen3 tokenizer and template), the real router (:mod:`emil.serving.router`), an
embedded Minecraft server (flying-squid), each Emil in its own ``run_emil.py live`` process with
the router as its endpoint, and players that are real mineflayer bots chatting to the Emils by
name. The replicas' text is random tokens, so no Emil calls a tool; what is measured is the
serving side: where each session's requests go and what the prefix caches make of them.

The scale-out test (tests/integration/real_vllm/test_scale_out.py) and ``tools/bench_router.py``
run it. This module is one run of it: :func:`run_mode` starts the router in a mode
(:data:`MODES`) and fresh Emils, lets the players talk, waits for :func:`quiet` and reads what
each replica's counters did (:class:`ModeRun`). Its parts: :mod:`emil.testing.replicas` (the
servers), :mod:`emil.testing.emil_processes` (the Emils and the players); their names are re-exported
here for the test and the bench.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from emil.sandbox.server import EmbeddedServer
from emil.serving.router import ReplicaCounters, RouterOptions, VLLMRouter
from emil.testing.emil_processes import Chat, EmilOptions, EmilProcess, stop_all
from emil.testing.replicas import KV_BYTES_PER_TOKEN, Replicas

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

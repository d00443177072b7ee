#!/usr/bin/env python3
"""The play bench: what a model can do as Emil, played in the embedded world, scored from it.

    python3 tools/bench_play.py --endpoint http://127.0.0.1:8000/v1 --runs 3 --json out.json --plot out.png
    python3 tools/bench_play.py --endpoint URL_A --vs URL_B --runs 5         # A/B, interleaved
    python3 tools/bench_play.py --endpoint URL --tasks follow,give_asked      # some tasks only
    python3 tools/bench_play.py --list                                        # the tasks
    python3 tools/bench_play.py --oracle --tasks give_asked     # a DOUBLE serving the scripted oracle

Starts an embedded flying-squid server and two players' clients (alex, the operator; bob, a
stranger), then plays each task (emil.bench.tasks) ``--runs`` times: a fresh Emil session per
run, started as ``live`` starts it, on the endpoint's model at temperature 0, its system prompt
made unique to the run (no run is served from another's prefix cache). With ``--vs`` the two
endpoints take turns on the same tasks and runs, after one discarded warm-up run each. Every run
is scored from the world (inventories, blocks, positions, mobs, what players' clients received),
never from Emil's words; a run that hangs is cut at its limit and scored failed. Prints a
progress line per run and a table per task: success with its 95 % Wilson interval, partial
credit, median turns and seconds of play, the server's prompt/completion tokens (``usage``),
valid tool calls and the reasons runs failed. See docs/play-bench.md.

Exit status: 0 the bench ran (whatever the scores); 2 bad arguments or settings (a ``--set``
that does not validate, a prompt that cannot fit the served window: the bench stops at the first
run, since every run would fail the same way); 3 an endpoint cannot be reached (nothing was
played); 1 the bench itself could not run (the world would not start).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import tempfile

import anyio
import httpx

from emil.bench.figures import figures, format_table, plot, to_json
from emil.bench.runner import BenchOptions, BenchWorld, RunResult, leaf_error, schedule
from emil.bench.tasks import SUITE, Task
from emil.cli_args import OneLineParser, non_negative_int, positive_int
from emil.exceptions import ConfigurationError

EXIT_UNREACHABLE = 3
EXIT_FAILED = 1
EXIT_CONFIG = 2


def _parse_setting(text: str) -> tuple[str, Any]:
    import argparse

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _parser() -> OneLineParser:
    p = OneLineParser(prog="bench_play.py", description="Emil's play bench (docs/play-bench.md).")
    p.add_argument("--endpoint", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--oracle", action="store_true",
                   help="play against the vLLM-dialect DOUBLE serving the SCRIPTED oracle (knows every task; not a model)")
    p.add_argument("--model", default="auto", help="served model name (default: the server's only one)")
    p.add_argument("--vs", metavar="URL", help="a second endpoint, played interleaved on the same tasks and runs")
    p.add_argument("--vs-model", default=None, help="the second endpoint's model name (default: --model)")
    p.add_argument("--runs", type=positive_int, default=1, help="runs per task and endpoint (default 1)")
    p.add_argument("--tasks", help="comma-separated task ids (default: all; --list shows them)")
    p.add_argument("--max-turns", type=positive_int, default=None, help="cap on every task's turns")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every task's time limit (a slow server)")
    p.add_argument("--warmup", type=non_negative_int, default=None, help="discarded warm-up runs per endpoint (default: 1 with --vs, else 0)")
    p.add_argument("--set", dest="settings", action="append", type=_parse_setting, default=[], metavar="KEY=VALUE",
                   help="an Emil setting for every run, e.g. --set output_reserve=512 (JSON values)")
    p.add_argument("--json", type=Path, help="write every run and the figures as JSON")
    p.add_argument("--plot", type=Path, help="write a PNG: success per task per endpoint")
    p.add_argument("--workdir", type=Path, help="where runs' recordings go (default: a temporary folder)")
    p.add_argument("--list", action="store_true", help="list the tasks and exit")
    return p


def _pick(names: str | None, parser: OneLineParser) -> list[Task]:
    if not names:
        return list(SUITE)
    known = {t.id: t for t in SUITE}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        parser.error(f"unknown task(s) {', '.join(unknown)}; tasks are: {', '.join(known)}")
    return [known[n] for n in wanted]


def _reachable(url: str) -> str | None:
    """None when ``url``/models answers, else why not (one line)."""
    try:
        r = httpx.get(url.rstrip("/") + "/models", timeout=10)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if r.status_code != 200:
        return f"HTTP {r.status_code} from {url.rstrip('/')}/models"
    return None


def _endpoints(args: Any) -> list[tuple[str, str]]:
    """(URL, model) of A, then B with ``--vs``."""
    return [(args.endpoint, args.model), *([(args.vs, args.vs_model or args.model)] if args.vs else [])]


def _label(url: str, model: str, endpoints: list[tuple[str, str]]) -> str:
    """How a run's endpoint is named in the figures: its URL, and its model too when A and B are
    two models on one server."""
    return url if [u for u, _ in endpoints].count(url) == 1 else f"{url} {model}"


async def _bench_oracle(args: Any, tasks: list[Task], workdir: Path) -> list[RunResult]:
    """The scripted oracle on the double: the proof that every task can be done in its limits."""
    from emil.testing.oracle import Oracle
    from emil.testing.vllm_double import VLLMDouble

    oracle = Oracle()
    async with VLLMDouble(oracle, window=32768) as double:
        args.endpoint = double.base_url
        return await _bench(args, tasks, workdir, on_run_start=oracle.start_run)


async def _bench(args: Any, tasks: list[Task], workdir: Path, on_run_start: Any = None) -> list[RunResult]:
    endpoints = _endpoints(args)
    warmup = args.warmup if args.warmup is not None else (1 if args.vs else 0)
    settings = dict(args.settings)
    options = BenchOptions(workdir=workdir, settings=settings, turn_cap=args.max_turns, time_scale=args.time_scale,
                           progress=lambda line: print(f"[bench] {line}", flush=True), on_run_start=on_run_start)
    slots = schedule(tasks, endpoints, args.runs, warmup)
    total = sum(not s.warmup for s in slots)
    results: list[RunResult] = []
    started = time.monotonic()
    async with BenchWorld(options) as world:
        for slot in slots:
            r = await world.play(slot.task, slot.endpoint, slot.model, slot.run)
            r.endpoint = _label(slot.endpoint, slot.model, endpoints)
            if slot.warmup:
                print(f"[bench] warm-up on {slot.endpoint}: {r.wall_s:.0f} s (discarded)", flush=True)
                continue
            results.append(r)
            why = r.detail if r.detail.startswith(r.reason) else f"{r.reason}{': ' + r.detail if r.detail else ''}"
            verdict = "success" if r.success else f"failed ({why})"
            print(f"[bench] {len(results)}/{total} {slot.task.id} run {slot.run} on {slot.endpoint}: {verdict}; "
                  f"credit {r.fraction:.2f}, {r.turns} turns, {r.game_s:.0f} s of play, "
                  f"{r.prompt_tokens:,}+{r.completion_tokens:,} tokens, "
                  f"{r.tool_calls - r.invalid_calls}/{r.tool_calls} valid calls "
                  f"[{time.monotonic() - started:.0f} s]", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        for t in SUITE:
            print(f"{t.id:<18} {t.kind:<10} {t.title} (limit {t.limit_s:.0f} s, {len(t.goals)} step(s))")
        return 0
    if args.oracle and (args.endpoint or args.vs):
        parser.error("--oracle plays against its own double: leave out --endpoint and --vs")
    if not args.endpoint and not args.oracle:
        parser.error("--endpoint URL is required (or --oracle, or --list)")
    if args.vs and (args.vs, args.vs_model or args.model) == (args.endpoint, args.model):
        parser.error("--vs names the same endpoint and model as --endpoint: nothing to compare "
                     "(two models on one server: give --vs-model)")
    if not args.time_scale > 0:
        parser.error(f"--time-scale must be > 0, got {args.time_scale}")
    tasks = _pick(args.tasks, parser)
    for url in [] if args.oracle else [args.endpoint, *([args.vs] if args.vs else [])]:
        why = _reachable(url)
        if why is not None:
            print(f"bench_play.py: cannot reach endpoint {url}: {why}", file=sys.stderr)
            return EXIT_UNREACHABLE
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="emil-bench-"))
    try:
        results = anyio.run(_bench_oracle if args.oracle else _bench, args, tasks, workdir)
    except KeyboardInterrupt:
        print("bench_play.py: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the world itself would not start: one line, no traceback
        leaf = leaf_error(exc)
        if isinstance(leaf, ConfigurationError):
            print(f"bench_play.py: {' '.join(str(leaf).split())}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"bench_play.py: the bench could not run: {' '.join(str(exc).split())[:400]}", file=sys.stderr)
        return EXIT_FAILED
    endpoints = _endpoints(args)
    labels = [_label(url, model, endpoints) for url, model in endpoints]
    names = dict(zip(labels, ["oracle"] if args.oracle else (["A", "B"] if args.vs else ["endpoint"]), strict=True))
    rows = figures(results)
    if args.vs:
        print(f"A = {labels[0]}\nB = {labels[1]}")
    print(format_table(rows, names))
    print(f"recordings: {workdir}")
    if args.json:
        meta = {"endpoints": list(names), "names": names, "models": [m for _, m in endpoints], "runs": args.runs, "tasks": [t.id for t in tasks],
                "settings": dict(args.settings), "max_turns": args.max_turns, "time_scale": args.time_scale}
        args.json.write_text(json.dumps(to_json(results, rows, meta), indent=1, default=str))
        print(f"json: {args.json}")
    if args.plot:
        plot(rows, args.plot, names)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Run the test command several times with one core kept busy; print each run's time and result.

    python3 tools/ci_under_load.py --runs 3
    python3 tools/ci_under_load.py --runs 1 --load 0 -- tests/integration/world   (args go to pytest)

The load is what the README's CI figures assume beside the suite: ``--load N`` (default 1)
processes each spinning a pure-Python loop (one core's worth each, at normal priority), started
before the first run and stopped after the last. Each run is ``bash .ci/run`` (setup, ruff,
mypy, every test; ``--command`` replaces it), in a process group of its own, its output kept in
``--log-dir`` (default ``ci-under-load/``, one file per run). Printed per run: the wall time,
pytest's counts, and every failed or erroring test (named whatever the run's pytest options and
colours: see parse_pytest_output); at the end the range of wall times over the runs. Exit 1 when
any run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.testing import processes
from emil.testing.pytest_output import parse_pytest_output

ROOT = Path(__file__).resolve().parents[1]
SPIN = "while True: pass"
@dataclass
class Run:
    number: int
    wall_s: float
    exit_code: int
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    """``FAILED tests/...::name`` / ``ERROR ...`` lines of pytest's short summary."""
    log: Path | None = None
    load: float | None = None
    """The machine's mean 1-minute load average over the run (sampled every 10 s): what "under
    load" meant, including the run itself and anything else on the machine."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.failures


def minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s"


def describe(run: Run) -> str:
    counts = ", ".join(f"{n:,} {what}" for what, n in run.counts.items() if what != "warnings") or "no pytest summary"
    verdict = "ok" if run.ok else f"FAILED (exit {run.exit_code})"
    load = f", mean load {run.load:.1f} on {os.cpu_count()} cores" if run.load is not None else ""
    return f"run {run.number}: {minutes(run.wall_s)} ({run.wall_s:.0f} s){load}, {counts}: {verdict}"


@contextlib.contextmanager
def load_sampler(every_s: float = 10.0) -> Iterator[list[float]]:
    """Samples of the 1-minute load average, taken in a thread while the block runs."""
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            samples.append(os.getloadavg()[0])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        done.set()
        thread.join()


def run_once(number: int, command: list[str], log_dir: Path, timeout_s: float) -> Run:
    log = log_dir / f"run-{number}.log"
    started = time.monotonic()
    with log.open("wb") as out, load_sampler() as samples:
        try:
            done = processes.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s)
            code = done.returncode
        except subprocess.TimeoutExpired:
            code = 124
    wall = time.monotonic() - started
    text = log.read_text(errors="replace")
    counts, failures = parse_pytest_output(text)
    if code == 124:
        failures.append(f"TIMEOUT the run did not finish within {timeout_s:.0f} s")
    load = sum(samples) / len(samples) if samples else None
    return Run(number, wall, code, counts, failures, log, load)


@contextlib.contextmanager
def busy(load: int) -> Iterator[None]:
    """``load`` busy-looping processes, each in a process group of its own, stopped on exit."""
    with contextlib.ExitStack() as stack:
        for _ in range(load):
            stack.enter_context(processes.popen([sys.executable, "-c", SPIN], grace_s=1.0))
        yield


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1 :]
    parser = argparse.ArgumentParser(
        prog="tools/ci_under_load.py",
        description="Run the test command N times with N cores kept busy; print times, counts and failures.",
    )
    parser.add_argument("--runs", type=int, default=3, help="how many runs (default 3)")
    parser.add_argument("--load", type=int, default=1, help="busy-looping processes beside the runs (default 1: one core)")
    parser.add_argument("--command", default="bash .ci/run", help="the test command (default: bash .ci/run); args after -- are appended")
    parser.add_argument("--log-dir", type=Path, default=ROOT / "ci-under-load", help="where each run's output goes")
    parser.add_argument("--timeout-min", type=float, default=90, help="a run longer than this is stopped and counted as failed (default 90)")
    opts = parser.parse_args(args)
    if opts.runs < 1 or opts.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")
    command = [*shlex.split(opts.command), *extra]
    opts.log_dir.mkdir(parents=True, exist_ok=True)
    sys.stdout.write(
        f"{opts.runs} run(s) of: {shlex.join(command)}\n"
        f"load: {opts.load} process(es) running `python3 -c '{SPIN}'` beside them; logs in {opts.log_dir}\n"
    )
    sys.stdout.flush()
    runs: list[Run] = []
    with busy(opts.load):
        for n in range(1, opts.runs + 1):
            run = run_once(n, command, opts.log_dir, opts.timeout_min * 60)
            runs.append(run)
            sys.stdout.write(describe(run) + "\n")
            for line in run.failures:
                sys.stdout.write(f"  {line}\n")
            sys.stdout.flush()
    walls = [r.wall_s for r in runs]
    failed = [r for r in runs if not r.ok]
    sys.stdout.write(
        f"wall time over {len(runs)} run(s): {minutes(min(walls))} to {minutes(max(walls))}; "
        f"{len(runs) - len(failed)} passed, {len(failed)} failed\n"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

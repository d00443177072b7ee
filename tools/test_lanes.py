#!/usr/bin/env python3
"""Run the whole suite in three lanes at once: the vLLM servers' tiers, the world's, the rest.

    python3 tools/test_lanes.py                 (after bash .ci/run has set up .venv)
    python3 tools/test_lanes.py -- -x           (pytest options after -- go to every lane)

Why lanes: most of the suite's wall time is waiting (a vLLM server's start and prefills, a
bench task's seconds of game time, bots walking), so one session after another left the cores
idle for most of an hour. Each lane is its own pytest session, so each heavy server still
starts once per session: the ``servers`` lane holds every test of tests/integration/real_vllm
and tests/integration/real_model (the only users of those two servers), the ``world`` lane the
integration tiers that play in an embedded world (one server per test module), the ``rest``
lane everything else (the unit tests, the documented commands, offline, operator, serving).
Only the ``rest`` lane writes pytest's cache (``--lf`` reruns its failures; lanes would race on it).

Two lanes (servers, rest) were .ci/run's way from 2026-12-05 to 12-07: CI's run of e84eb52
took 45 min 49 s with the rest lane alone 43 min 45 s, at a load average under 1 when that lane
ran by itself (2,157 s for its slow tests, measured with ``--durations=0``). The world's tiers
were 1,107 s of it, so they are a lane of their own.

The lanes' JS bridges survive a slow call. The first two-lane run (2026-12-05, from a fresh
clone) lost the ``servers`` lane at the eleventh task of the random-weights bench: one JS call
took past JSPyBridge's fixed limits under load, its event thread died on the reply barrier the
caller had left, and every later call of that process timed out. Emil now swaps that barrier
for a handoff that cannot break (emil/world/_jsruntime.py), so a slow call fails alone
(tests/integration/world/test_bridge_slow_call.py).

The ``rest`` lane prints to the terminal as it runs; every other lane writes to its log only,
printed whole when the rest is done (every log in ``--log-dir``, default ``ci-lanes/``), then
one line per lane: its wall time, pytest's counts and every failed or erroring test. Exit 0 when
every lane passed; else 1 when a test failed, else the first lane's non-zero pytest exit code
(2 interrupted, 3 internal error, 4 usage error, 5 no tests collected). Ctrl-C or SIGTERM stops
every lane (each in a process group of its own) and exits 130.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
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

from emil.testing.pytest_output import parse_pytest_output

ROOT = Path(__file__).resolve().parents[1]
SERVER_TIERS = ("tests/integration/real_vllm", "tests/integration/real_model")
"""The tests that use a vLLM server of their tier: the ``servers`` lane."""
WORLD_TIERS = ("tests/integration/world", "tests/integration/bench", "tests/integration/agent",
               "tests/integration/memory", "tests/integration/fleet")
"""Integration tiers that play sessions in an embedded world: mostly waiting (bots walking, game
time), about 18 of the rest's 41 minutes when they were one lane (measured 2026-12-07)."""
LANES: dict[str, tuple[str, ...]] = {
    "servers": SERVER_TIERS,
    "world": WORLD_TIERS,
}
"""The lanes whose output goes to their log, printed when each ends; every other test is ``rest``."""


@dataclass
class Lane:
    name: str
    argv: list[str]
    log: Path
    shown: bool  # its output also goes to the terminal as it comes
    started: float = 0.0
    wall_s: float = 0.0
    exit_code: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    ended: float | None = None
    """When the process exited (a thread waits for it, so a lane that ends first has its own time)."""


def lanes(pytest_args: list[str], log_dir: Path) -> list[Lane]:
    """The logged lanes in LANES's order, then ``rest`` (every other test; shown, the cache's writer)."""
    base = [sys.executable, "-m", "pytest", "--durations=15", *pytest_args]
    logged = [Lane(name, [*base, "-p", "no:cacheprovider", *paths], log_dir / f"{name}.log", shown=False)
              for name, paths in LANES.items()]
    elsewhere = [f"--ignore={path}" for paths in LANES.values() for path in paths]
    return [*logged, Lane("rest", [*base, *elsewhere], log_dir / "rest.log", shown=True)]


def start(lane: Lane) -> None:
    lane.started = time.monotonic()
    if lane.shown:
        lane.process = subprocess.Popen(lane.argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
        return
    with lane.log.open("wb") as out:  # the child keeps its own copy of the descriptor
        lane.process = subprocess.Popen(lane.argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)


def _watch(lane: Lane) -> None:
    assert lane.process is not None
    lane.process.wait()
    lane.ended = time.monotonic()


def finish(lane: Lane) -> None:
    """Wait for the lane; a shown lane's output is copied to the terminal and its log as it comes
    (in chunks, so pytest's progress dots appear when written)."""
    assert lane.process is not None
    if lane.shown:
        assert lane.process.stdout is not None
        with lane.log.open("wb") as out:
            while chunk := os.read(lane.process.stdout.fileno(), 65536):
                out.write(chunk)
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
    lane.exit_code = lane.process.wait()
    lane.wall_s = (lane.ended or time.monotonic()) - lane.started
    lane.counts, lane.failures = parse_pytest_output(lane.log.read_text(errors="replace"))


def stop(lane: Lane) -> None:
    process = lane.process
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s"


def outcome(lane: Lane) -> int:
    """The lane's pytest exit code, except that a lane whose every test a ``-m`` option deselected
    (exit 5, "no tests collected", with some deselected) ran as asked: 0. The servers lane under
    ``-m "not slow"`` (the fast loop) is that lane."""
    code = lane.exit_code or 0
    if code == 5 and lane.counts.get("deselected", 0) > 0 and not (lane.counts.get("errors") or lane.failures):
        return 0
    return code


def describe(lane: Lane) -> str:
    counts = ", ".join(f"{n:,} {what}" for what, n in lane.counts.items() if what != "warnings")
    where = lane.log.relative_to(ROOT) if lane.log.is_relative_to(ROOT) else lane.log
    verdict = "passed" if outcome(lane) == 0 else f"FAILED (pytest exit {lane.exit_code})"
    return f"lane {lane.name}: {minutes(lane.wall_s)}, {counts or 'counts in its output'} ({where}): {verdict}"


@contextlib.contextmanager
def stopped_on_signal(running: list[Lane]) -> Iterator[None]:
    """SIGTERM behaves as Ctrl-C: every lane's process group is stopped."""

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    except KeyboardInterrupt:
        for lane in running:
            stop(lane)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_code(done: list[Lane]) -> int:
    codes = [outcome(lane) for lane in done]
    if all(c == 0 for c in codes):
        return 0
    if 1 in codes:
        return 1
    return next(c for c in codes if c != 0)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1 :]
    parser = argparse.ArgumentParser(
        prog="tools/test_lanes.py",
        description="Run the suite in pytest sessions at once (lanes: the vLLM servers' tiers, "
                    "the world's, the rest); options after -- go to every lane.",
    )
    parser.add_argument("--log-dir", type=Path, default=ROOT / "ci-lanes",
                        help="where each lane's log goes (default: ci-lanes/)")
    opts = parser.parse_args(args)
    opts.log_dir.mkdir(parents=True, exist_ok=True)
    todo = lanes(extra, opts.log_dir.resolve())
    *logged, rest = todo
    for lane in logged:
        sys.stdout.write(f"lane {lane.name} ({', '.join(LANES[lane.name])}): output in {lane.log}, "
                         "printed when it ends\n")
    sys.stdout.write(f"lane rest (every other test): output below and in {rest.log}\n")
    sys.stdout.flush()
    try:
        with stopped_on_signal(todo):
            for lane in todo:
                start(lane)
                threading.Thread(target=_watch, args=(lane,), daemon=True).start()
            finish(rest)
            waiting = [lane.name for lane in logged if lane.process is not None and lane.process.poll() is None]
            if waiting:
                sys.stdout.write(f"\nlane rest done in {minutes(rest.wall_s)}; waiting for lane {', '.join(waiting)}\n")
                sys.stdout.flush()
            for lane in logged:
                finish(lane)
    except KeyboardInterrupt:
        sys.stdout.write("\nstopped: every lane ended\n")
        return 130
    for lane in logged:
        sys.stdout.write(f"\n{'=' * 30} lane {lane.name}: {lane.log} {'=' * 30}\n")
        sys.stdout.write(lane.log.read_text(errors="replace"))
        sys.stdout.write("\n")
    for lane in todo:
        sys.stdout.write(describe(lane) + "\n")
        for line in lane.failures:
            sys.stdout.write(f"  {line}\n")
    sys.stdout.flush()
    return exit_code(todo)


if __name__ == "__main__":
    raise SystemExit(main())

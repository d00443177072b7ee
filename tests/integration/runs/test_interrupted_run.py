"""An interrupted test run leaves no process running (emil/testing/processes.py).

A pytest of its own runs process_tree.py, which starts a shell with two children through the
helper (one process group), a process in a session of its own and a plain child, and waits.
That pytest is then interrupted as a developer or CI would: SIGINT (Ctrl-C), SIGTERM (a CI
timeout), SIGKILL (nothing in pytest runs). Within a bound, no process of that run may be left:
neither those it reported nor any other carrying its tag, and its watchdog is gone too. When the
watchdog is killed with pytest, the next run's sweep stops what is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emil.testing import processes

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _until(check: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {within} s")
        time.sleep(0.1)


@contextlib.contextmanager
def _tree(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """The inner run, started and reporting; whatever of it is left is stopped afterwards."""
    report = tmp_path / "tree.json"
    env = {**os.environ, "PROCESS_TREE_REPORT": str(report)}
    with (tmp_path / "inner.log").open("wb") as log:
        inner = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "timeout=600", str(HERE / "process_tree.py")],
            cwd=ROOT, env=processes.child_env(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            # Ctrl-C's default (a background job of a non-interactive shell inherits it ignored)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    tree: dict[str, Any] = {}
    try:
        _until(lambda: report.exists() and report.read_text(), 90, "the inner run reported its processes")
        tree = json.loads(report.read_text())
        assert tree["tag"] and tree["watchdog"] and all(_alive(p) for p in tree["pids"]), tree
        assert len(tree["pids"]) == 5 and set(tree["pids"]) <= set(processes.tagged(tree["tag"]))
        yield inner, tree
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- inner run:\n{(tmp_path / 'inner.log').read_text()[-3000:]}") from None
    finally:
        left = [p for p in [inner.pid, *processes.tagged(tree.get("tag") or "-")] if _alive(p)]
        processes.terminate(left)
        inner.wait(timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_an_interrupted_run_leaves_nothing_running(tmp_path: Path, sig: signal.Signals) -> None:
    with _tree(tmp_path) as (inner, tree):
        os.kill(inner.pid, sig)  # pytest alone, as `kill` or a CI runner would
        inner.wait(timeout=60)
        _until(lambda: not processes.tagged(tree["tag"]), 30, "the run's processes stopped")
        assert not [p for p in tree["pids"] if _alive(p)]
        _until(lambda: not _alive(tree["watchdog"]), 10, "the watchdog done")
    if sig != signal.SIGKILL:  # pytest's own teardown ran (and stopped the helper's group first)
        assert "KeyboardInterrupt" in (tmp_path / "inner.log").read_text()


def test_a_run_whose_watchdog_died_too_is_swept_by_the_next(tmp_path: Path) -> None:
    with _tree(tmp_path) as (inner, tree):
        os.kill(tree["watchdog"], signal.SIGKILL)
        os.kill(inner.pid, signal.SIGKILL)
        inner.wait(timeout=30)
        left = processes.leftovers()
        assert set(tree["pids"]) <= set(left) and {left[p] for p in tree["pids"]} == {tree["tag"]}
        swept = processes.sweep()  # what tests/conftest.py does when a run starts
        assert len(swept) >= len(tree["pids"])
        assert not [p for p in tree["pids"] if _alive(p)] and not processes.tagged(tree["tag"])

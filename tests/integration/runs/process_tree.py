"""Run by tests/integration/runs/test_interrupted_run.py in a pytest of its own, which it then
interrupts (the suite does not collect this file: its name is not test_*.py).

Starts the three kinds of child a test run has: a command through the helper (a shell and its
two children, one process group), a process group the run knows nothing about (as a server's
supervisor starts one), and a plain child in pytest's own group (as the embedded server's Node).
Writes their pids and the run's tag to $PROCESS_TREE_REPORT, then waits to be interrupted.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from emil.testing import processes


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def test_a_tree_of_children_then_a_long_wait() -> None:
    report = Path(os.environ["PROCESS_TREE_REPORT"])
    with processes.popen(["bash", "-c", "sleep 300 & sleep 300 & wait"]) as shell:
        own_group = subprocess.Popen(["sleep", "300"], start_new_session=True)
        plain = subprocess.Popen(["sleep", "300"])
        deadline = time.monotonic() + 30
        while len(_children(shell.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        run = processes.begin_run()  # already begun by tests/conftest.py: the same run
        partial = report.with_suffix(".part")
        partial.write_text(json.dumps({
            "tag": run.tag,
            "watchdog": run.watchdog.pid if run.watchdog else None,
            "pids": [shell.pid, *_children(shell.pid), own_group.pid, plain.pid],
        }))
        partial.rename(report)  # whole, or not there
        time.sleep(300)

"""A recording written by a process killed with SIGKILL mid-session is readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emil.recording import HeaderRecord, TurnRecord, read_recording
from emil.testing import processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]


def test_recording_of_a_killed_process_is_readable(tmp_path: Path) -> None:
    recording = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1"}
    with processes.popen(
        [sys.executable, str(ROOT / "run_emil.py"), "demo", "--duration", "90", "--recording", str(recording)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) as proc:  # its own process group, stopped (whatever is left of it) when the test ends
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if recording.exists() and sum(isinstance(r, TurnRecord) for r in read_recording(recording).records) >= 2:
                break
            assert proc.poll() is None, "the demo ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("the demo recorded no turns within 120 s")
        os.killpg(proc.pid, signal.SIGKILL)  # mid-session, no chance to close anything
        proc.wait(timeout=10)
    read = read_recording(recording)
    assert read.problem is None or "truncated" in read.problem
    assert isinstance(read.records[0], HeaderRecord)
    assert sum(isinstance(r, TurnRecord) for r in read.records) >= 2
    assert not read.complete  # no end record: it was killed

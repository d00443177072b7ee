"""A recording written by a process killed with SIGKILL mid-session is readable."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emil.recording import HeaderRecord, TurnRecord, read_recording

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]


def _descendants(pid: int) -> list[int]:
    """Child processes (recursively) of ``pid``, from /proc, so none outlive the test."""
    out: list[int] = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split() if Path(f"/proc/{pid}").exists() else []:
        out.append(int(child))
        out.extend(_descendants(int(child)))
    return out


def test_recording_of_a_killed_process_is_readable(tmp_path: Path) -> None:
    recording = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "run_emil.py"), "demo", "--duration", "90", "--recording", str(recording)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    family: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if recording.exists() and sum(isinstance(r, TurnRecord) for r in read_recording(recording).records) >= 2:
                break
            assert proc.poll() is None, "the demo ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("the demo recorded no turns within 120 s")
        family = _descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)  # mid-session, no chance to close anything
        proc.wait(timeout=10)
    finally:
        for pid in [proc.pid, *family]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    read = read_recording(recording)
    assert read.problem is None or "truncated" in read.problem
    assert isinstance(read.records[0], HeaderRecord)
    assert sum(isinstance(r, TurnRecord) for r in read.records) >= 2
    assert not read.complete  # no end record: it was killed

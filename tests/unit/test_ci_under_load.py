"""tools/ci_under_load.py: pytest's counts and failures read from its output, and one whole run
of the tool on a small mixed test file, with its busy-loop load started and stopped."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from emil.testing import processes

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "ci_under_load.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_under_load", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_counts_and_failures_from_pytest_output() -> None:
    parse = _tool().parse_pytest_output
    full = """
FAILED tests/integration/world/test_world_home.py::test_the_night_passes_when_every_player_sleeps - AssertionError: morning
ERROR tests/docs/test_doc_commands.py::test_doc_command_slow[README.md:145] - Failed: Timeout >900.0s
==== 1 failed, 1,480 passed, 12 deselected, 3 warnings, 1 error in 1413.27s (0:23:33) ====
"""
    counts, failures = parse(full.replace("1,480", "1480"))
    assert counts == {"failed": 1, "passed": 1480, "deselected": 12, "warnings": 3, "errors": 1}
    assert failures == [
        "FAILED tests/integration/world/test_world_home.py::test_the_night_passes_when_every_player_sleeps",
        "ERROR tests/docs/test_doc_commands.py::test_doc_command_slow[README.md:145]",
    ]
    assert parse("..........   [100%]\n10 passed in 3.95s\n") == ({"passed": 10}, [])
    assert parse("no summary at all\n") == ({}, [])


@pytest.mark.slow  # four pytests of their own: 5-30 s with the machine's other work
def test_failures_are_named_whatever_the_runs_pytest_options(tmp_path: Path) -> None:
    """Real pytest output, coloured (FORCE_COLOR in a CI environment colours a log file too),
    without a short summary (-rN) and verbose: the failing test is named every time, and a
    failure no line names is still reported."""
    parse = _tool().parse_pytest_output
    (tmp_path / "test_mixed.py").write_text(MIXED)
    env = {**os.environ, "PY_COLORS": "1"}

    def pytest_output(*options: str) -> str:
        done = processes.run(
            [sys.executable, "-m", "pytest", str(tmp_path / "test_mixed.py"), "-c", os.devnull, "-p", "no:cacheprovider", *options],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 1, done.stdout + done.stderr
        return done.stdout

    coloured = pytest_output("-q")
    assert "\x1b[" in coloured  # the case the parser must survive
    assert parse(coloured) == ({"failed": 1, "passed": 1}, ["FAILED test_mixed.py::test_no"])
    assert parse(pytest_output("-q", "-rN")) == ({"failed": 1, "passed": 1}, ["FAILED test_no"])
    assert parse(pytest_output("-v", "-rN"))[1] == ["FAILED test_mixed.py::test_no"]
    assert parse(pytest_output("-q", "-rN", "--tb=no"))[1] == [
        "UNNAMED 1 failed or erroring test(s) that the output does not name (see the log)"
    ]


MIXED = "def test_yes():\n    pass\n\n\ndef test_no():\n    assert False\n"


@pytest.mark.slow  # a pytest of its own and a busy loop: about 10 s
def test_a_run_reports_time_counts_failures_and_stops_its_load(tmp_path: Path) -> None:
    """The whole tool, its inner pytest as CI would run it: coloured, and with no configuration
    of this checkout (``-c /dev/null``: wherever the checkout and the temporary files live)."""
    (tmp_path / "test_mixed.py").write_text(MIXED)
    command = f"{sys.executable} -m pytest {tmp_path / 'test_mixed.py'} -c {os.devnull} -q -p no:cacheprovider"
    done = processes.run(
        [sys.executable, str(TOOL), "--runs", "2", "--load", "1", "--command", command, "--log-dir", str(tmp_path / "logs")],
        cwd=tmp_path, env={**os.environ, "PY_COLORS": "1"}, capture_output=True, text=True, timeout=300,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr  # a run failed
    assert "load: 1 process(es) running `python3 -c 'while True: pass'`" in out
    for n in (1, 2):
        assert f"run {n}: 0 min " in out and "1 failed, 1 passed: FAILED (exit 1)" in out, out
    assert out.count("  FAILED ") == 2 and out.count("test_mixed.py::test_no\n") == 2, out
    assert "wall time over 2 run(s): 0 min" in out and "0 passed, 2 failed" in out
    assert (tmp_path / "logs" / "run-2.log").exists()
    spinning = [p for p in processes.tagged(processes.run_tag() or "-") if "while True" in processes.describe(p)]
    assert not spinning, spinning


def test_the_load_sampler_samples_while_its_block_runs() -> None:
    with _tool().load_sampler(every_s=0.05) as samples:
        deadline = time.monotonic() + 5
        while len(samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    taken = len(samples)
    assert taken >= 3 and all(s >= 0 for s in samples)
    time.sleep(0.2)
    assert len(samples) == taken  # stopped with its block

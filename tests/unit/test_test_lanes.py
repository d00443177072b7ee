"""tools/test_lanes.py (.ci/run's pytest sessions at once): the lanes split the suite with
nothing lost and nothing run twice, and the exit code says the worst of them."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "test_lanes.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_lanes", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_lanes"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _lane(tool: ModuleType, code: int) -> object:
    lane = tool.Lane("x", [], Path("x.log"), shown=False)
    lane.exit_code = code
    return lane


@pytest.mark.parametrize(
    ("codes", "expected"),
    [((0, 0), 0), ((1, 0), 1), ((0, 1), 1), ((5, 1), 1), ((2, 0), 2), ((0, 5), 5), ((4, 2), 4)],
)
def test_the_exit_code_is_the_worst_of_both_lanes(codes: tuple[int, int], expected: int) -> None:
    tool = _tool()
    assert tool.exit_code([_lane(tool, c) for c in codes]) == expected


def test_a_lane_whose_every_test_was_deselected_passed() -> None:
    """`bash .ci/run -m "not slow"`: the servers lane holds only slow tests (pytest exit 5)."""
    tool = _tool()
    empty = _lane(tool, 5)
    empty.counts = {"deselected": 64}  # type: ignore[attr-defined]
    assert tool.exit_code([_lane(tool, 0), empty]) == 0
    assert tool.describe(empty).endswith(": passed")
    assert tool.exit_code([_lane(tool, 0), _lane(tool, 5)]) == 5  # nothing collected, nothing deselected


def _collected(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if re.match(r"^tests/\S+::\S", line.strip())}


@pytest.mark.slow
def test_the_lanes_collect_the_whole_suite_once(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, str(TOOL), "--log-dir", str(tmp_path), "--", "--collect-only", "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tool = _tool()
    names = [*tool.LANES, "rest"]
    assert len(names) == 3
    collected = {name: _collected((tmp_path / f"{name}.log").read_text()) for name in names}
    whole = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    everything = _collected(whole.stdout)
    assert all(collected.values()), {name: len(tests) for name, tests in collected.items()}
    assert sum(len(tests) for tests in collected.values()) == len(everything)  # nothing twice
    assert set().union(*collected.values()) == everything  # nothing lost
    for name, paths in tool.LANES.items():
        assert all(t.startswith(paths) for t in collected[name]), name
        assert not any(t.startswith(paths) for other in names if other != name for t in collected[other]), name
    for name in names:
        assert re.search(rf"lane {name}: \d+ min \d\d s, .*: passed", run.stdout), run.stdout[-2000:]

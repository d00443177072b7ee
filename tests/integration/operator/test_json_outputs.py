"""Every --json output is one JSON document alone on stdout (progress, logs and Node's
chatter go to stderr), so ``tool --json | jq`` works."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from emil.testing import processes

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = "emil/data/samples/demo-session.jsonl"


def _json_stdout(args: list[str], cwd: Path, timeout: float = 110) -> object:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMIL_")}
    env.update(EMIL_NO_BOOTSTRAP="1", PYTHONPATH=str(ROOT))
    proc = processes.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # verify_checkpoint says FAIL with exit 1
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["run_emil.py", "replay", SAMPLE, "--json"],
        ["tools/tune_budget.py", SAMPLE, "--json", "--budgets", "8000,16000"],
        ["tools/chars_per_token.py", SAMPLE, "--json"],
        ["tools/kv_capacity.py", "docs/examples/qwen3.6-35b-a3b.config.json", "--cache", "8GiB", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_json_alone_on_stdout(args: list[str]) -> None:
    assert _json_stdout(args, ROOT)


def test_verify_checkpoint_json(tmp_path: Path) -> None:
    processes.run([sys.executable, str(ROOT / "tests/unit/serving/ckpt_factory.py"), str(tmp_path / "ck")], check=True,
                  env={**os.environ, "EMIL_NO_BOOTSTRAP": "1", "PYTHONPATH": str(ROOT)}, timeout=110)
    data = _json_stdout([str(ROOT / "tools/verify_checkpoint.py"), "ck/base", "ck/merged-lost-mtp", "--json"], tmp_path)
    assert isinstance(data, dict)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["tools/bench_context.py", "--json", "--steps", "5", "--accuracy-turns", "5", "--hours", "0.1"],
        ["tools/bench_client.py", "--json", "--requests", "2", "--warmup", "1"],
        ["tools/bench_loop.py", "--json", "--turns", "3", "--emils", "1"],
    ],
    ids=lambda a: a[0],
)
def test_bench_json_alone_on_stdout(args: list[str]) -> None:
    assert _json_stdout(args, ROOT, timeout=300)

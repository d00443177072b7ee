#!/usr/bin/env python3
"""Start vLLM from a serve profile and supervise it without looping on configuration errors.

    python3 tools/launch_vllm.py profiles/qwen36.toml            # start and supervise
    python3 tools/launch_vllm.py profiles/qwen36.toml --dry-run  # print the command, check it

A start-up death is never retried; a crash after a healthy start is retried with backoff a
bounded number of times, never for a configuration error nor the same failure twice in a row.
Exit: 0 stopped by the operator (Ctrl-C / SIGTERM), 2 configuration error, 1 gave up otherwise.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser
from emil.exceptions import ConfigurationError
from emil.serving.launcher import Supervisor
from emil.serving.profile import build_command, load_profile, preflight


def _missing_executable(program: str, profile: Path) -> str | None:
    """Why ``program`` cannot be started here, or None when it can."""
    if shutil.which(program) is not None:
        return None
    return (
        f"cannot start {program!r}: no such executable (not on PATH); install it (vLLM: "
        f"pip install vllm) or set runner.command in {profile} to where it is"
    )


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="serve profile (TOML)")
    parser.add_argument("--dry-run", action="store_true", help="print the command and checks")
    parser.add_argument("--log", type=Path, default=None, help="append server output here")
    parser.add_argument("--quiet", action="store_true", help="do not echo server output")
    parser.add_argument(
        "--force", action="store_true", help="start despite pre-flight configuration problems"
    )
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile)
        command = build_command(profile)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = preflight(profile)
    for problem in problems:
        print(f"pre-flight: {problem}", file=sys.stderr)
    missing = _missing_executable(command[0], args.profile)
    if args.dry_run:
        if missing:
            print(f"note: {missing}", file=sys.stderr)
        print(shlex.join(command))
        return 2 if problems else 0
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    if problems and not args.force:
        print("not starting (configuration errors above; --force to try anyway)", file=sys.stderr)
        return 2

    def status(message: str) -> None:
        print(f"[launch_vllm] {message}", file=sys.stderr, flush=True)

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

#!/usr/bin/env python3
"""Regenerate the shipped sample recording from the demo, then run each offline tool on it.

    python3 tools/make_sample.py [--duration 45] [--out emil/data/samples/demo-session.jsonl]

Runs ``run_emil.py demo`` (embedded server, vLLM-dialect double with a SCRIPTED brain, the
real Emil, a scripted player) writing a fresh recording, refuses a sample over --max-kb, and
checks that chars_per_token, tune_budget and replay all run on it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_int, positive_seconds

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "emil" / "data" / "samples" / "demo-session.jsonl"


def _run(*args: str) -> None:
    print("+", " ".join(args), flush=True)
    subprocess.run([sys.executable, *args], check=True, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=positive_seconds, default=45.0, help="demo length in seconds (45)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the sample goes")
    parser.add_argument("--max-kb", type=positive_int, default=300, help="refuse a sample larger than this")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.jsonl")
    tmp.unlink(missing_ok=True)  # the recorder appends: start from nothing
    with tempfile.TemporaryDirectory(prefix="emil-sample-") as notes:
        # A fresh notes directory: the sample must not carry what earlier demos taught Emil.
        _run("run_emil.py", "demo", "--duration", f"{args.duration:g}", "--recording", str(tmp), "--data-dir", notes)
    size_kb = tmp.stat().st_size / 1024
    if size_kb > args.max_kb:
        print(f"error: sample is {size_kb:.0f} KB > {args.max_kb} KB; use a shorter --duration", file=sys.stderr)
        return 1
    tmp.replace(out)
    print(f"sample: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} ({size_kb:.0f} KB)")
    _run("tools/chars_per_token.py", str(out))
    _run("tools/tune_budget.py", str(out))
    _run("run_emil.py", "replay", str(out), "--no-progress")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The model-swap drill: one recording replayed under each model family against the
vLLM-dialect double (a double of vLLM, not vLLM) configured as that family, plus a model of no
shipped family that only the double's /tokenize can count. Prints a table; exit 1 unless every
family had zero overflows and calibration error 0.

    python3 tools/model_swap_drill.py emil/data/samples/demo-session.jsonl
    python3 tools/model_swap_drill.py REC.jsonl --family qwen3 --family unknown
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.offline.swap_drill import drill, format_drill


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("recording", type=Path)
    parser.add_argument(
        "--family", action="append", help="a family to drill (repeatable; default: all + unknown)"
    )
    parser.add_argument(
        "--window", type=int, help="served window for every family (default: per family, one that makes it trim)"
    )
    args = parser.parse_args(argv)
    if not args.recording.is_file():
        parser.error(f"no such recording: {args.recording}")
    rows = anyio.run(lambda: drill(args.recording, args.family, window=args.window))
    print(format_drill(rows))
    return 0 if rows and all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

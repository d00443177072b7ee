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

from emil.cli_args import OneLineParser, positive_int, recording_path
from emil.exceptions import ConfigurationError
from emil.offline.swap_drill import UNKNOWN, drill, format_drill
from emil.testing.brains import echo_brain
from emil.testing.vllm_double import VLLMDouble


def serve(family: str, window: int) -> VLLMDouble:
    """The vLLM-dialect double (a DOUBLE, not vLLM) serving a model of ``family``."""
    return VLLMDouble.serving(echo_brain, None if family == UNKNOWN else family, window=window)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("recording", type=recording_path)
    parser.add_argument(
        "--family", action="append", help="a family to drill (repeatable; default: all + unknown)"
    )
    parser.add_argument(
        "--window", type=positive_int, help="served window for every family (default: per family, one that makes it trim)"
    )
    args = parser.parse_args(argv)
    try:
        rows = anyio.run(lambda: drill(args.recording, args.family, serve=serve, window=args.window))
    except ConfigurationError as e:
        parser.error(str(e))
    print(format_drill(rows))
    return 0 if rows and all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Characters per token by content category in recorded sessions, per tokenizer.

    python3 tools/chars_per_token.py RECORDING.jsonl [...] [--tokenizer qwen3.6 ...]
                                    [--assume 4.0] [--json] [--synthetic-hours H]

--tokenizer takes what emil.model.resolve.get_token_counter takes: a model name ("qwen3.6",
"Qwen/Qwen3.6-35B-A3B-NVFP4-Fast"), a tokenizer.json path, a model directory, or "heuristic".
Shows per category the exact tokens, chars/token, what --assume chars/token predicts and its
error (negative = the estimate under-counts). Recordings and --synthetic-hours together are also
shown side by side (the synthetic day is built from Emil's real parts; see how close it comes).
See docs/offline.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_float, recording_path
from emil.exceptions import ConfigurationError
from emil.model.family import DEFAULT_FAMILY
from emil.offline.chars_per_token import format_table, measure_chars_per_token


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="*", type=recording_path, help="session recordings (JSONL)")
    parser.add_argument("--synthetic-hours", type=positive_float, help="also measure a synthetic session this long")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic session")
    parser.add_argument(
        "--tokenizer", "-t", action="append", dest="tokenizers",
        help="tokenizer spec (repeatable; default qwen3.6)",
    )
    parser.add_argument("--assume", type=positive_float, default=4.0, help="estimated chars/token (4.0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if not args.recordings and not args.synthetic_hours:
        parser.error("give recordings and/or --synthetic-hours")
    try:
        report = measure_chars_per_token(
            args.recordings, args.tokenizers or [DEFAULT_FAMILY], assume=args.assume,
            synthetic_hours=args.synthetic_hours, seed=args.seed,
        )
    except (ConfigurationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_json(), indent=2) if args.json else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

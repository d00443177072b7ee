#!/usr/bin/env python3
"""Compare a merged or quantized checkpoint with its base; check the MTP head survived in BF16.

    python3 tools/verify_checkpoint.py BASE_DIR CANDIDATE_DIR [--json]

Reads only model.safetensors.index.json and the shard headers. Exit 0 when tensor names match
and every mtp.* tensor is present and BF16; 1 on any difference; 2 when a file is unreadable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser
from emil.exceptions import ConfigurationError
from emil.serving.checkpoint import format_report, verify_checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path, help="base checkpoint dir (or one .safetensors file)")
    parser.add_argument("candidate", type=Path, help="merged or quantized checkpoint to check")
    parser.add_argument(
        "--mode",
        choices=["auto", "exact", "quantized"],
        default="auto",
        help="quantized maps weight_packed/qweight back to .weight and skips scales "
        "(auto: when the candidate is quantized and the base is not)",
    )
    parser.add_argument("--mtp-prefix", default="mtp.", help="name prefix of the draft head")
    parser.add_argument(
        "--mtp-dtype",
        action="append",
        default=None,
        help="allowed dtype for mtp tensors (repeatable; default BF16)",
    )
    parser.add_argument(
        "--no-require-mtp",
        action="store_true",
        help="do not fail a checkpoint without mtp tensors when the base has none either",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = verify_checkpoint(
            args.base,
            args.candidate,
            mode=args.mode,
            mtp_prefix=args.mtp_prefix,
            mtp_dtypes=args.mtp_dtype or ("BF16",),
            require_mtp=not args.no_require_mtp,
        )
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_report(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

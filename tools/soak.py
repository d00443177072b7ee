#!/usr/bin/env python3
"""Multi-player soak: the real Emil among four scripted players for a bounded time.

    python3 tools/soak.py [--duration 120] [--out recordings/soak.jsonl] [--seed 0] [--window 16384]

Starts an embedded Minecraft server, the vLLM-dialect double with a SCRIPTED brain (not a
model), Emil (the real loop, bridge, context manager, client and notes) and four real player
bots (talk, requests, gifts, hits, a chat flood); writes a recording and prints a summary. The
notes go to a fresh temporary data_dir unless --data-dir names one. With --sample it writes
the shipped soak sample (emil/data/samples/soak-session.jsonl) and runs the offline tools on it.
Exit 1 when the session recorded a fatal error or the recording is incomplete.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_int, positive_seconds

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "emil" / "data" / "samples" / "soak-session.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--duration", type=positive_seconds, default=120.0, help="seconds of play (120)")
    parser.add_argument("--out", type=Path, default=None, help="recording path (default recordings/soak-<seed>.jsonl)")
    parser.add_argument("--data-dir", type=Path, default=None, help="notes directory (default: a fresh temporary one)")
    parser.add_argument("--seed", type=int, default=0, help="the players' schedule (0)")
    parser.add_argument("--window", type=positive_int, default=16384, help="the double's served window (16384: trims in a short soak)")
    parser.add_argument("--sample", action="store_true", help=f"write the shipped sample ({SAMPLE.relative_to(ROOT)}) and check the offline tools on it")
    parser.add_argument("--max-kb", type=positive_int, default=300, help="with --sample: refuse a sample larger than this")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from emil.config import load_settings
    from emil.recording import read_recording
    from emil.testing.soak import play_soak
    from emil.world.setup import ensure_js_deps

    out: Path = SAMPLE if args.sample else (args.out or Path("recordings") / f"soak-{args.seed}.jsonl")
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.jsonl")
    tmp.unlink(missing_ok=True)  # the recorder appends: start from nothing
    ensure_js_deps(progress=True)
    settings = load_settings(env={}).settings
    with tempfile.TemporaryDirectory(prefix="emil-soak-") as scratch:
        data_dir = args.data_dir or Path(scratch) / "data"
        result = anyio.run(lambda: play_soak(
            settings, duration_s=args.duration, recording=tmp, data_dir=data_dir, seed=args.seed, window=args.window,
        ))
    print(result.summary().replace(str(tmp), str(out)))
    read = read_recording(tmp)
    if not read.complete or result.fatal:
        print(f"error: recording incomplete ({read.problem}) or fatal errors: {result.fatal}", file=sys.stderr)
        return 1
    size_kb = tmp.stat().st_size / 1024
    if args.sample and size_kb > args.max_kb:
        print(f"error: sample is {size_kb:.0f} KB > {args.max_kb} KB; use a shorter --duration", file=sys.stderr)
        return 1
    tmp.replace(out)
    print(f"recording: {out} ({size_kb:.0f} KB)")
    if args.sample:
        for tool in (["tools/chars_per_token.py", str(out)], ["tools/tune_budget.py", str(out)], ["run_emil.py", "replay", str(out), "--no-progress"]):
            print("+", " ".join(tool), flush=True)
            subprocess.run([sys.executable, *tool], check=True, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())

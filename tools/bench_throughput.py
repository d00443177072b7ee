#!/usr/bin/env python3
"""Decode throughput of one or more vLLM endpoints, like for like, side by side.

    python3 tools/bench_throughput.py mtp3=http://127.0.0.1:8000/v1 off=http://127.0.0.1:8001/v1 \
        --meta mtp3:mtp=3 --meta off:mtp=off -n 10 --json-out bench.json
    python3 tools/bench_throughput.py --demo-double        # two DOUBLE servers, simulated figures

Methodology by default (the field notes' re-test): temperature 0, 256 tokens, ignore_eos,
thinking off, a fresh UUID first in every prompt (warm-ups too), counts from usage, 3 warm-ups
discarded, N measured, streamed; decode tok/s = (tokens-1)/(latency-TTFT). /metrics deltas give
the spec-decode acceptance; a rise in prefix-cache hits is reported as a warning.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from tqdm import tqdm

from emil.cli_args import OneLineParser, non_negative_int, positive_int
from emil.exceptions import EmilError
from emil.serving.bench import (
    DEFAULT_PROMPT,
    BenchResult,
    Methodology,
    Target,
    run_target,
)
from emil.serving.bench_report import (
    compare_table,
    load_report,
    methodology_differences,
    report_json,
)
from emil.serving.profile import load_profile


def _targets(args: argparse.Namespace, endpoints: list[str]) -> list[Target]:
    meta: dict[str, dict[str, str]] = {}
    for item in args.meta:
        label, _, pair = item.partition(":")
        key, _, value = pair.partition("=")
        if not (label and key):
            raise SystemExit(f"--meta wants LABEL:KEY=VALUE, got {item!r}")
        meta.setdefault(label, {})[key] = value
    profiles: dict[str, dict[str, Any]] = {}
    for item in args.profile:
        label, _, path = item.partition("=")
        profile = load_profile(Path(path))
        profiles[label] = profile.model_dump(mode="json")
        meta.setdefault(label, {})
        meta[label] = {**profile.labels, **meta[label]}
    targets = []
    for index, spec in enumerate(endpoints):
        label, sep, url = spec.partition("=")
        if not sep:
            label, url = f"config{index + 1}", spec
        targets.append(Target(label, url, args.model, meta.get(label, {}), profiles.get(label)))
    return targets


@contextlib.contextmanager
def _demo_doubles() -> Iterator[list[str]]:
    """Two vLLM-dialect DOUBLE servers (simulated speeds), for a runnable example only."""
    from emil.testing.brains import fixed_reply
    from emil.testing.script import Reply
    from emil.testing.vllm_answer import SpecDecode
    from emil.testing.vllm_double import VLLMDouble

    policy = fixed_reply(Reply(content="[scripted] story"))
    mtp = VLLMDouble(
        policy, window=65536, decode_tps=110.0, spec_decode=SpecDecode(k=3, acceptance=0.82, seed=1)
    )
    off = VLLMDouble(policy, window=65536, decode_tps=72.0)
    with mtp, off:
        yield [f"DOUBLE-mtp3={mtp.base_url}", f"DOUBLE-mtp-off={off.base_url}"]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("endpoints", nargs="*", help="[LABEL=]URL (OpenAI base or server root)")
    parser.add_argument("-n", "--requests", type=positive_int, default=10, help="measured requests")
    parser.add_argument("--warmups", type=non_negative_int, default=3, help="discarded warm-up requests")
    parser.add_argument("--max-tokens", type=positive_int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--thinking", action="store_true", help="enable thinking (default off)")
    parser.add_argument("--no-ignore-eos", action="store_true")
    parser.add_argument(
        "--no-unique-prefix",
        action="store_true",
        help="send the identical prompt every time (measures the prefix cache; not like for like)",
    )
    parser.add_argument(
        "--no-stream", action="store_true", help="non-streamed: tok/s includes prefill, no TTFT"
    )
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--system", default=None, help="optional system message")
    parser.add_argument("--model", default=None, help="model id (default: first listed)")
    parser.add_argument(
        "--meta", action="append", default=[], help="operator label LABEL:KEY=VALUE (repeatable)"
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        help="LABEL=PATH of the serve profile that config runs (repeatable)",
    )
    parser.add_argument("--json-out", type=Path, default=None, help="write the JSON report here")
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        help="earlier report(s) to show alongside; refused if the methodology differs",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--demo-double",
        action="store_true",
        help="bench two vLLM-dialect DOUBLE servers (simulated; for the docs)",
    )
    args = parser.parse_args(argv)
    methodology = Methodology(
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        ignore_eos=not args.no_ignore_eos,
        enable_thinking=args.thinking,
        unique_prefix=not args.no_unique_prefix,
        warmups=args.warmups,
        requests=args.requests,
        stream=not args.no_stream,
        prompt=args.prompt,
        system=args.system,
    )
    with contextlib.ExitStack() as stack:
        endpoints = list(args.endpoints)
        if args.demo_double:
            endpoints += stack.enter_context(_demo_doubles())
        if not endpoints:
            parser.error("give at least one endpoint (or --demo-double)")
        earlier: list[dict[str, Any]] = []
        for path in args.compare:
            try:
                old = load_report(path)
            except EmilError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            differences = methodology_differences(methodology.to_dict(), old["methodology"])
            if differences:
                print(
                    f"error: {path} was measured differently, not comparable: "
                    + "; ".join(differences),
                    file=sys.stderr,
                )
                return 2
            earlier += [{**c, "label": f"{c['label']} ({path.name})"} for c in old["configs"]]
        try:
            targets = _targets(args, endpoints)
            results: list[BenchResult] = []
            total = len(targets) * (methodology.warmups + methodology.requests)
            with tqdm(total=total, disable=args.no_progress, unit="req", file=sys.stderr) as bar:
                for target in targets:
                    bar.set_description(target.label)
                    results.append(
                        run_target(target, methodology, progress=lambda _kind: bar.update(1))
                    )
        except EmilError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    report = report_json(results, methodology)
    for result in results:
        s = result.server
        print(
            f"{result.target.label}: {s.model} (root {s.root}, window {s.max_model_len}, "
            f"version {s.version}) labels {result.target.labels or '{}'}"
        )
        for warning in result.warnings:
            print(f"  warning: {warning}")
    print()
    print(compare_table([*results, *earlier]))
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(report, indent=2))
        print(f"\nJSON with methodology and server config: {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sweep prompt budgets over recorded (or synthetic) sessions with the real trim ladder.

    python3 tools/tune_budget.py RECORDING.jsonl [...] [--window 65536 ...]
        [--output-reserve 6144 ...] [--budgets 16000,24000,36000 | --budgets 8000:59000:4000]
        [--slack 4096] [--low-water 0.8] [--tokenizer qwen3.6] [--[no-]preserve-thinking]
        [--[no-]summaries] [--recall-tokens 300] [--plot sweep.png] [--json]
    python3 tools/tune_budget.py --synthetic-hours 24 --plot day.png
    python3 tools/tune_budget.py emil/data/samples/soak-session.jsonl --synthetic-hours 24

For each budget: trims per hour, messages evicted per trim, memory horizon (median and
minimum, minutes of game time), peak prompt tokens, requests that would overflow the window,
the share of append-only requests and the tokens prefilled again per hour; for the synthetic
day also the share of its planted facts the last prompt still holds (recall). The ladder runs
as live: the notes block refreshed at trims, and (unless --no-summaries) the summarise rung with
the double's text reducer (not a model) timed as a served model; the synthetic day's turns also
end with the lines its archive recalls for them (--recall-tokens, the setting's 300; 0 = off). Recordings and the synthetic day given together
are swept separately at the same budgets and set side by side. Recommends the largest budget
leaving --slack tokens under window - output reserve. See docs/offline.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import (
    OneLineParser,
    fraction,
    non_negative_int,
    positive_float,
    positive_int,
    recording_path,
)
from emil.exceptions import ConfigurationError
from emil.model.family import DEFAULT_FAMILY, family_for_model
from emil.model.resolve import counter_for_recording, get_token_counter
from emil.offline.budget_report import format_side_by_side, format_sweep, plot_sweep
from emil.offline.budget_sweep import SweepResult, sweep
from emil.offline.simulate import BudgetPoint
from emil.offline.summaries import SummaryModel
from emil.offline.trace import SessionTrace
from emil.testing.reducer import REDUCER_LABEL, reducer_summary_text


def _budgets(text: str) -> list[int]:
    try:
        if ":" in text:
            lo, hi, step = (int(v) for v in text.split(":"))
            if step <= 0:
                raise ValueError
            return list(range(lo, hi + 1, step))
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers a,b,c or lo:hi:step (step > 0), got {text!r}"
        ) from None


def _progress(p: BudgetPoint) -> None:
    print(
        f"  budget {p.prompt_budget:>6}: {p.requests:,} requests in {p.seconds:.1f} s "
        f"({p.turns_per_s:,.0f}/s), {p.trims} trims",
        file=sys.stderr, flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="*", type=recording_path, help="session recordings (JSONL)")
    parser.add_argument("--synthetic-hours", type=positive_float, help="also sweep a synthetic session this long")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic session")
    parser.add_argument("--window", type=positive_int, action="append", help="served window (repeatable; default: recorded, else 65536)")
    parser.add_argument("--output-reserve", type=positive_int, action="append", help="output reserve (repeatable; default: recorded, else 6144)")
    parser.add_argument("--budgets", type=_budgets, help="prompt budgets: a,b,c or lo:hi:step (default: 10 up to window - reserve)")
    parser.add_argument("--slack", type=non_negative_int, default=4096, help="tokens to keep free under window - output reserve (4096)")
    parser.add_argument("--low-water", type=fraction, help="fraction of the budget a trim goes down to (the manager's default)")
    parser.add_argument(
        "--tokenizer",
        help="a model name of a shipped family to count as (default: the recording's family, "
        "else qwen3.6 for the synthetic session)",
    )
    parser.add_argument(
        "--estimate", type=positive_float, metavar="CHARS_PER_TOKEN",
        help="budget in estimated tokens (chars / this, e.g. 4.0 as the field notes' harness "
        "did); peak and overflow stay in real tokens of --tokenizer",
    )
    parser.add_argument(
        "--preserve-thinking", action=argparse.BooleanOptionalAction, default=None,
        help="keep earlier turns' reasoning in the prompt (default: as recorded; synthetic "
        "sessions: Emil's default, on)",
    )
    parser.add_argument(
        "--summaries", action=argparse.BooleanOptionalAction, default=True,
        help="run the summarise rung between turns with the double's text reducer (default: on, as the default ladder)",
    )
    parser.add_argument("--recall-tokens", type=int, default=300,
                        help="bound of the lines recalled into each synthetic turn (300, the setting's default; 0 = off)")
    parser.add_argument("--jobs", "-j", type=positive_int, default=os.cpu_count() or 1, help="processes (default: one per CPU)")
    parser.add_argument("--replot", type=Path, help="only redraw --plot (and the table) from a --json output file")
    parser.add_argument("--plot", type=Path, help="write a PNG of horizon and trim rate against budget")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.replot:
        result = SweepResult.from_json(json.loads(args.replot.read_text()))
        print(format_sweep(result))
        if args.plot:
            plot_sweep(result, args.plot)
            print(f"plot: {args.plot}")
        return 0
    if not args.recordings and not args.synthetic_hours:
        parser.error("give recordings and/or --synthetic-hours")
    stack = contextlib.ExitStack()
    try:
        recorded = [SessionTrace.from_recording(p) for p in args.recordings]
        for t in recorded:
            if t.problem:
                print(f"note: {t.name}: read up to line {t.stopped_at_line} ({t.problem})", file=sys.stderr)
        synthetic = []
        if args.synthetic_hours:
            from emil.offline.synthetic import synthetic_trace

            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="emil-tune-day-"))
            synthetic.append(synthetic_trace(hours=args.synthetic_hours, seed=args.seed, data_dir=Path(scratch)))
        groups = [g for g in (recorded, synthetic) if g]
        results = []
        budgets = args.budgets
        for group in groups:
            traces = group
            if args.preserve_thinking is not None:
                traces = [replace(t, preserve_thinking=args.preserve_thinking) for t in traces]
            if args.tokenizer:  # count every session as that model's family
                family = family_for_model(args.tokenizer)
                if family is None:
                    raise ConfigurationError(f"--tokenizer {args.tokenizer!r} names no shipped model family")
                traces = [replace(t, model_family=family.name) for t in traces]
            first = traces[0]
            counter = (
                counter_for_recording(first.header, args.tokenizer) if first.header is not None
                else get_token_counter(args.tokenizer or DEFAULT_FAMILY)  # the synthetic day is Qwen3.6-shaped
            )
            windows = args.window or [(recorded[0].window if recorded else None) or 65536]
            reserves = args.output_reserve or [(recorded[0].output_reserve if recorded else None) or 6144]
            result = sweep(
                traces, counter, windows=windows, output_reserves=reserves, budgets=budgets,
                slack=args.slack, low_water=args.low_water, jobs=max(1, args.jobs),
                progress=_progress if sys.stderr.isatty() else None,
                assume_chars_per_token=args.estimate,
                summaries=SummaryModel(reducer_summary_text, REDUCER_LABEL) if args.summaries else None,
                recall_tokens=max(0, args.recall_tokens),
            )
            results.append(result)
            budgets = budgets or sorted({p.prompt_budget for p in result.points})  # the next group: the same budgets
    except (ConfigurationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        stack.close()
    if args.plot:
        plot_sweep(results[-1], args.plot)
    if args.json:
        out = results[0].to_json() if len(results) == 1 else {
            "recorded": results[0].to_json(), "synthetic": results[1].to_json(),
        }
        print(json.dumps(out, indent=2))
    else:
        print("\n\n".join(format_sweep(r) for r in results))
        if len(results) == 2:
            print()
            print(format_side_by_side(results[0], results[1]))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

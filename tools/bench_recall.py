#!/usr/bin/env python3
"""Measured recall: facts planted across a synthetic day, and how many the last prompt still holds.

    python3 tools/bench_recall.py [--hours 24] [--seeds 1,2,3] [--budgets 12000,24000,36000,48000]
        [--window 65536] [--output-reserve 6144] [--memory-tokens 2000] [--cut 12] [--jobs N] [--json]

For each budget and seed, the synthetic day (emil.offline.synthetic: Emil's real prompt, tools,
perception and tool results; scripted players and a scripted Emil) runs through today's context
manager three ways side by side: the digest alone (no notes, no summaries), with the pinned
notes, and with the notes and the summarise rung (the SCRIPTED summariser in-process, timed as a
served model: 4,000 tokens/s prefill, 50 tokens/s decode, so a turn that comes sooner cancels
it). Printed per budget, as ranges over the seeds: the share of planted facts recoverable from
the day's last prompt and where (verbatim / memory note / notes block), the median horizon,
trims per hour, summary requests per hour and per trim with their tokens, the share of
append-only requests and the prefix reuse. Then the restart: --cut hours of the day with notes,
a new session on the same data_dir, the planted player and place facts in its first prompt.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_float, positive_int, positive_ints
from emil.context.budget import Budget
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.offline.day_recall import SETUPS, Setup, restart_recall, run_day
from emil.offline.recall import WHERE
from emil.offline.simulate import BudgetPoint
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import synthetic_day
from emil.testing.reducer import REDUCER_LABEL, reducer_summary_text


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _one(job: tuple[float, int, int, int, int, int, Setup]) -> tuple[int, int, Setup, BudgetPoint]:
    hours, seed, window, reserve, budget, memory_tokens, setup = job
    counter = get_token_counter(DEFAULT_FAMILY)
    day = synthetic_day(hours, seed=seed, memory_tokens=memory_tokens)
    point = run_day(day, Budget(window=window, output_reserve=reserve, margin=window - reserve - budget), counter, setup,
                    summaries=SummaryModel(reducer_summary_text, REDUCER_LABEL))
    return budget, seed, setup, point


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}-{format(hi, fmt)}"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--hours", type=positive_float, default=24.0, help="length of the synthetic day (24)")
    parser.add_argument("--seeds", type=_ints, default=[1, 2, 3], help="seeds, one run each (1,2,3)")
    parser.add_argument("--budgets", type=positive_ints, default=[12000, 24000, 36000, 48000], help="prompt budgets")
    parser.add_argument("--window", type=positive_int, default=65536)
    parser.add_argument("--output-reserve", type=positive_int, default=6144)
    parser.add_argument("--memory-tokens", type=positive_int, default=2000, help="bound of the notes block (the setting's default)")
    parser.add_argument("--cut", type=positive_float, default=12.0, help="hours before the restart (12)")
    parser.add_argument("--jobs", "-j", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if not args.seeds:
        parser.error("give at least one seed")
    jobs = [
        (args.hours, seed, args.window, args.output_reserve, budget, args.memory_tokens, setup)
        for budget in args.budgets for seed in args.seeds for setup in SETUPS
    ]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(_one, jobs))
    counter = get_token_counter(DEFAULT_FAMILY)
    restarts = [restart_recall(cut_hours=args.cut, seed=s, counter=counter, memory_tokens=args.memory_tokens) for s in args.seeds]
    if args.json:
        print(json.dumps({
            "hours": args.hours, "seeds": args.seeds, "memory_tokens": args.memory_tokens,
            "runs": [{"budget": b, "seed": s, "setup": setup, **p.to_json()} for b, s, setup, p in results],
            "restart": [{"seed": s, "cut_hours": r.cut_hours, "players": r.players.share, "places": r.places.share,
                         "missing": [*r.players.missing, *r.places.missing], "notes_tokens": r.notes_tokens}
                        for s, r in zip(args.seeds, restarts, strict=True)],
        }, indent=2))
        return 0
    planted = results[0][3].planted
    print(f"synthetic day: {args.hours:g} h, seeds {','.join(map(str, args.seeds))}, {planted} planted facts, "
          f"window {args.window}, output reserve {args.output_reserve}, notes bound {args.memory_tokens} tokens")
    print("summaries: SCRIPTED summariser (not a model), timed at 4,000 tok/s prefill and 50 tok/s decode; ranges over the seeds")
    head = (f"{'budget':>7} {'setup':<16} {'recall':>9} {'verbatim/memory/notes':>21} {'horizon min':>11} {'trims/h':>8} "
            f"{'summ/h':>7} {'summ/trim':>9} {'summ tok/h':>10} {'append-only':>11} {'prefix reuse':>12}")
    print()
    print(head)
    print("-" * len(head))
    for budget in args.budgets:
        for setup in SETUPS:
            pts = [p for b, _s, st, p in results if b == budget and st == setup]
            where = "/".join(_span([float(p.found.get(w, 0)) for p in pts], ".0f") for w in WHERE)
            horizon = [p.horizon_median_min for p in pts if p.horizon_median_min is not None]
            print(
                f"{budget:>7} {setup:<16} {_span([100 * (p.recall or 0) for p in pts], '.0f') + '%':>9} {where:>21} "
                f"{(_span(horizon, '.0f') if horizon else '-'):>11} {_span([p.trims_per_hour for p in pts], '.1f'):>8} "
                f"{_span([p.per_hour(p.summary_requests) for p in pts], '.1f'):>7} "
                f"{_span([p.summary_requests / p.trims if p.trims else 0.0 for p in pts], '.2f'):>9} "
                f"{_span([p.per_hour(p.summary_prompt_tokens + p.summary_completion_tokens) for p in pts], ',.0f'):>10} "
                f"{_span([100 * p.append_only_share for p in pts], '.1f') + '%':>11} "
                f"{_span([100 * p.prefix_reuse for p in pts], '.1f') + '%':>12}"
            )
    print()
    players = _span([100 * r.players.share for r in restarts], ".0f")
    places = _span([100 * r.places.share for r in restarts], ".0f")
    print(f"restart after {args.cut:g} h: the new session's first prompt holds {players}% of the planted player facts "
          f"and {places}% of the planted places (notes block {_span([float(r.notes_tokens) for r in restarts], ',.0f')} tokens)")
    missing = sorted({m for r in restarts for m in (*r.players.missing, *r.places.missing)})
    if missing:
        print("  not there: " + "; ".join(missing))
    return 0


if __name__ == "__main__":
    sys.exit(main())

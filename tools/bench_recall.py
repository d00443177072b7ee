#!/usr/bin/env python3
"""Measured recall: facts said in conversation across a synthetic day, and how many a prompt still holds.

    python3 tools/bench_recall.py [--hours 24] [--seeds 1,2,3] [--budgets 8000,16000,36000]
        [--window 65536] [--output-reserve 6144] [--memory-tokens 2000] [--recall-tokens 300]
        [--per-kind 3] [--wordings main|heldout] [--setups digest,notes,notes+summaries,all] [--cut 12] [--timing-lines 40000] [--timing-only] [--jobs N] [--json]

The synthetic day (emil.offline.synthetic: Emil's real prompt, tools, perception, tool results,
notes and archive; scripted players and a scripted Emil) with --per-kind facts of each kind said
in ordinary conversation (emil.offline.facts: names, nicknames, rules, codes, places named by
any word, requests, promises, directions, opinions, jokes; worded by a generator the memory code
never imports, each with a probe only it contains) runs through today's context manager at
each budget, four ways (emil.offline.day_recall.SETUPS: the digest alone, notes, notes and
summaries, all three with retrieval), and again as the null run: the same day and probes
with nothing said. Summaries come from the double's text reducer (not a model), timed as a
served model (4,000 tokens/s prefill, 50 tokens/s decode: a turn that comes sooner cancels it).

Printed per budget and setup, as ranges over the seeds, each beside its null run: the share of
facts in the day's last prompt and in the prompt of a turn that asks about each fact without its
probe, where they were found, per kind; the tokens memory holds per request and adds per turn,
the append-only share, summary requests and the longest summary against its cap. Then the
restart after --cut hours (its first prompt, and a first turn that asks), and the retrieval time
per turn that searches over the day's last 3 hours with an archive of --timing-lines lines
(--timing-only: that alone).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_float, positive_int, positive_ints
from emil.context.budget import Budget
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.offline.day_recall import SETUPS, Setup, restart_recall, retrieval_times, run_day
from emil.offline.facts import KINDS, WORDINGS
from emil.offline.recall import WHERE
from emil.offline.simulate import BudgetPoint
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import SyntheticDay, synthetic_day
from emil.testing.reducer import REDUCER_LABEL, reducer_summary_text

_DAYS: dict[tuple[int, bool], SyntheticDay] = {}
"""The generated days, set before the pool forks (inherited, never pickled)."""


def _setups(text: str) -> list[Setup]:
    chosen = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in SETUPS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"setups are {', '.join(SETUPS)}; got {text!r}")
    return [v for v in SETUPS if v in chosen]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _one(job: tuple[int, bool, int, int, int, Setup, int]) -> tuple[int, bool, int, Setup, BudgetPoint]:
    seed, plant, window, reserve, budget, setup, recall_tokens = job
    counter = get_token_counter(DEFAULT_FAMILY)
    point = run_day(_DAYS[(seed, plant)], Budget(window=window, output_reserve=reserve, margin=window - reserve - budget),
                    counter, setup, summaries=SummaryModel(reducer_summary_text, REDUCER_LABEL),
                    recall_tokens=recall_tokens)
    return seed, plant, budget, setup, point


def _span(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{format(lo, fmt)}-{format(hi, fmt)}"


def _pct(values: list[float]) -> str:
    return _span([100 * v for v in values], ".0f") + "%"


def _kind_share(points: list[dict[str, list[int]]], kind: str) -> list[float]:
    return [p[kind][0] / p[kind][1] for p in points if kind in p and p[kind][1]]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--hours", type=positive_float, default=24.0, help="length of the synthetic day (24)")
    parser.add_argument("--seeds", type=_ints, default=[1, 2, 3], help="seeds, one run each (1,2,3)")
    parser.add_argument("--budgets", type=positive_ints, default=[8000, 16000, 36000], help="prompt budgets")
    parser.add_argument("--window", type=positive_int, default=65536)
    parser.add_argument("--output-reserve", type=positive_int, default=6144)
    parser.add_argument("--memory-tokens", type=positive_int, default=2000, help="bound of the notes block (the setting's default)")
    parser.add_argument("--recall-tokens", type=positive_int, default=300, help="bound of the recalled lines per turn (the setting's default)")
    parser.add_argument("--per-kind", type=positive_int, default=3, help="facts of each kind said in a day (3)")
    parser.add_argument("--wordings", choices=WORDINGS, default="main",
                        help="which wordings the facts are said in (main; heldout: the second set, kept out of tuning)")
    parser.add_argument("--setups", type=_setups, default=list(SETUPS),
                        help=f"which memory setups to run ({','.join(SETUPS)}; all four by default)")
    parser.add_argument("--cut", type=positive_float, default=12.0, help="hours before the restart (12)")
    parser.add_argument("--timing-lines", type=positive_int, default=40000, help="archive size for the retrieval time (40000)")
    parser.add_argument("--timing-only", action="store_true", help="only the retrieval time per turn at the end of the day")
    parser.add_argument("--jobs", "-j", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    if not args.seeds:
        parser.error("give at least one seed")
    counter = get_token_counter(DEFAULT_FAMILY)
    if args.timing_only:
        return _timing_only(args, counter)
    with tempfile.TemporaryDirectory(prefix="emil-bench-recall-") as scratch:
        for seed in args.seeds:
            for plant in (True, False):
                folder = Path(scratch) / f"{seed}-{'said' if plant else 'null'}"
                _DAYS[(seed, plant)] = synthetic_day(args.hours, seed=seed, data_dir=folder, memory_tokens=args.memory_tokens,
                                                     per_kind=args.per_kind, plant=plant, wordings=args.wordings)
        jobs = [(seed, plant, args.window, args.output_reserve, budget, setup, args.recall_tokens)
                for budget in args.budgets for setup in args.setups for seed in args.seeds for plant in (True, False)]
        if args.jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
            with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                results = list(pool.map(_one, jobs))
        else:
            results = [_one(job) for job in jobs]
        timings = [retrieval_times(_DAYS[(seed, True)], counter, lines=args.timing_lines,
                                   recall_tokens=args.recall_tokens) for seed in args.seeds]
    restarts = {(seed, plant): restart_recall(cut_hours=args.cut, seed=seed, counter=counter, memory_tokens=args.memory_tokens,
                                              recall_tokens=args.recall_tokens, plant=plant, per_kind=args.per_kind,
                                              wordings=args.wordings)
                for seed in args.seeds for plant in (True, False)}
    if args.json:
        print(json.dumps(_as_json(args, results, restarts, timings), indent=2))
        return 0
    _print(args, results, restarts, timings)
    return 0


def _timing_only(args: Any, counter: Any) -> int:
    with tempfile.TemporaryDirectory(prefix="emil-bench-recall-") as scratch:
        timings = [retrieval_times(synthetic_day(args.hours, seed=seed, data_dir=Path(scratch) / str(seed),
                                                 memory_tokens=args.memory_tokens, per_kind=args.per_kind,
                                                 wordings=args.wordings),
                                   counter, lines=args.timing_lines, recall_tokens=args.recall_tokens)
                   for seed in args.seeds]
    if args.json:
        print(json.dumps({"retrieval": [_timing_json(s, t) for s, t in zip(args.seeds, timings, strict=True)]}, indent=2))
    else:
        print(_timing_line(timings))
    return 0


def _timing_json(seed: int, t: Any) -> dict[str, Any]:
    return {"seed": seed, "lines": t.lines, "turns": t.turns, "median_ms": t.median_ms, "p95_ms": t.p95_ms,
            "cpu_median_ms": t.cpu_median_ms, "cpu_p95_ms": t.cpu_p95_ms}


def _timing_line(timings: list[Any]) -> str:
    return (f"retrieval per turn that searches, over the day's last 3 hours: {_span([t.median_ms for t in timings], '.2f')} ms "
            f"median, {_span([t.p95_ms for t in timings], '.2f')} ms p95 (CPU time of the search: "
            f"{_span([t.cpu_median_ms for t in timings], '.2f')} ms median, {_span([t.cpu_p95_ms for t in timings], '.2f')} ms p95) "
            f"with an archive of {_span([float(t.lines) for t in timings], ',.0f')} lines "
            f"({_span([float(t.turns) for t in timings], '.0f')} turns)")


def _as_json(args: Any, results: list[tuple[int, bool, int, Setup, BudgetPoint]], restarts: dict[tuple[int, bool], Any],
             timings: list[Any]) -> dict[str, Any]:
    return {
        "hours": args.hours, "seeds": args.seeds, "memory_tokens": args.memory_tokens, "recall_tokens": args.recall_tokens,
        "per_kind": args.per_kind, "wordings": args.wordings, "summaries": REDUCER_LABEL,
        "runs": [{"seed": s, "null": not plant, "budget": b, "setup": setup, **p.to_json()} for s, plant, b, setup, p in results],
        "restart": [{"seed": s, "null": not plant, "cut_hours": r.cut_hours, "first": r.first.share, "asked": r.asked.share,
                     "first_by_kind": r.first.by_kind, "asked_by_kind": r.asked.by_kind, "missing_asked": list(r.asked.missing),
                     "notes_tokens": r.notes_tokens} for (s, plant), r in restarts.items()],
        "retrieval": [_timing_json(s, t) for s, t in zip(args.seeds, timings, strict=True)],
    }


def _print(args: Any, results: list[tuple[int, bool, int, Setup, BudgetPoint]], restarts: dict[tuple[int, bool], Any],
           timings: list[Any]) -> None:
    def pts(budget: int, setup: Setup, plant: bool) -> list[BudgetPoint]:
        return [p for _s, pl, b, st, p in results if b == budget and st == setup and pl == plant]

    planted = max((p.planted for *_k, p in results), default=0)
    print(f"synthetic day: {args.hours:g} h, seeds {','.join(map(str, args.seeds))}, {planted} facts said in conversation "
          f"({len(KINDS)} kinds x {args.per_kind}, {args.wordings} wordings), window {args.window}, output reserve {args.output_reserve}, "
          f"notes {args.memory_tokens} and recall {args.recall_tokens} tokens")
    print(f"summaries: {REDUCER_LABEL}, timed at 4,000 tok/s prefill and 50 tok/s decode; ranges over the seeds; "
          "(null) = the same day with nothing said")
    print("last prompt = the day's last prompt holds the fact; asked = the prompt of a turn in which its speaker asks "
          "about it without its probe")
    head = (f"{'budget':>7} {'setup':<16} {'last prompt':>11} {'(null)':>7} {'asked':>9} {'(null)':>7} "
            f"{'where: verbatim/recalled/memory/notes':>38} {'memory tok/req':>14} {'recall tok/turn':>15} "
            f"{'append-only':>11} {'summ/trim':>9} {'summ cut':>8} {'longest summ':>12}")
    print()
    print(head)
    print("-" * len(head))
    for budget in args.budgets:
        for setup in args.setups:
            said, null = pts(budget, setup, True), pts(budget, setup, False)
            where = "/".join(_span([float(p.found.get(w, 0)) for p in said], ".0f") for w in WHERE)
            summ = [p for p in said if p.summary_requests]
            print(
                f"{budget:>7} {setup:<16} {_pct([p.recall or 0 for p in said]):>11} {_pct([p.recall or 0 for p in null]):>7} "
                f"{_pct([p.asked or 0 for p in said]):>9} {_pct([p.asked or 0 for p in null]):>7} {where:>38} "
                f"{_span([p.memory_tokens_per_request for p in said], ',.0f'):>14} "
                f"{_span([p.recall_tokens_per_turn for p in said], '.0f'):>15} "
                f"{_pct([p.append_only_share for p in said]):>11} "
                f"{_span([p.summary_requests / p.trims if p.trims else 0.0 for p in summ], '.2f'):>9} "
                f"{_span([float(p.summaries_cut) for p in summ], '.0f'):>8} "
                f"{_span([float(p.summary_max_line_tokens) for p in summ], '.0f'):>12}"
            )
    print()
    print("per kind (facts found / said, summed over the seeds), last prompt | asked:")
    kinds_head = f"{'budget':>7} {'setup':<16} " + " ".join(f"{k:>13}" for k in KINDS)
    print(kinds_head)
    print("-" * len(kinds_head))
    for budget in args.budgets:
        for setup in [x for x in SETUPS[2:] if x in args.setups]:
            said = pts(budget, setup, True)
            cells = []
            for k in KINDS:
                last = [p.by_kind.get(k, [0, 0]) for p in said]
                asked = [p.asked_by_kind.get(k, [0, 0]) for p in said]
                cells.append(f"{sum(x[0] for x in last)}/{sum(x[1] for x in last)}|{sum(x[0] for x in asked)}/{sum(x[1] for x in asked)}")
            print(f"{budget:>7} {setup:<16} " + " ".join(f"{c:>13}" for c in cells))
    print()
    said_r = [r for (_s, plant), r in restarts.items() if plant]
    null_r = [r for (_s, plant), r in restarts.items() if not plant]
    print(f"restart after {args.cut:g} h (notes block {_span([float(r.notes_tokens) for r in said_r], ',.0f')} tokens): "
          f"first prompt {_pct([r.first.share for r in said_r])} (null {_pct([r.first.share for r in null_r])}), "
          f"a first turn that asks {_pct([r.asked.share for r in said_r])} (null {_pct([r.asked.share for r in null_r])})")
    per_kind = ", ".join(
        f"{k} {sum(r.asked.by_kind.get(k, (0, 0))[0] for r in said_r)}/{sum(r.asked.by_kind.get(k, (0, 0))[1] for r in said_r)}"
        for k in KINDS)
    print(f"  asked, per kind: {per_kind}")
    print()
    inday = [p for p in (p for *_k, p in results) if p.recall_ms_median]
    print(f"{_timing_line(timings)}; in the day's own archive, all turns: "
          f"{_span([p.recall_ms_median for p in inday], '.2f')} ms median")


if __name__ == "__main__":
    sys.exit(main())

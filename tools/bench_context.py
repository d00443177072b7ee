"""Benchmark the context manager on a synthetic Emil-like session (emil.offline.synthetic).

Prints three tables:

1. Per-turn assembly cost at a ~36,000-token history (window 65,536, output reserve 6,144):
   the manager's incremental cached count vs a naive whole re-render + re-tokenize, measured
   side by side on the same histories, with a check that both give the same number.
2. Prefix reuse over four hours of synthetic play: the share of requests whose prompt extends
   the previous one unchanged, and the tokens that must be prefilled again per hour, with and
   without Qwen's ``preserve_thinking``.
3. Count accuracy: the 4-chars-per-token heuristic against the exact Qwen3.5/3.6 count, per
   content category.

    python3 tools/bench_context.py [--seed 0] [--steps 300] [--history-tokens 36000] [--hours 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_float, positive_int
from emil.context.budget import Budget
from emil.context.history import History
from emil.context.manager import ContextManager
from emil.model.family import DEFAULT_FAMILY, ModelFamily, family_for_model
from emil.model.tokens import TokenCounter
from emil.offline.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_turns,
)

WINDOW = 65536
OUTPUT_RESERVE = 6144


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _manager(family: ModelFamily, preserve: bool) -> ContextManager:
    return ContextManager(
        family.tokenizer(),
        Budget(WINDOW, output_reserve=OUTPUT_RESERVE),
        SYSTEM_PROMPT,
        emil_tool_specs(),
        preserve_thinking=preserve,
        family=family,
    )


def bench_cost(family: ModelFamily, seed: int, steps: int, history_tokens: int) -> dict[str, Any]:
    """Per-request cost at a steady ~history_tokens history (oldest turns dropped untimed)."""
    manager = _manager(family, preserve=False)
    counter = manager.counter
    assert family.template is not None, "the naive baseline renders the family's template"
    template = family.template()
    tools = manager.tools
    session = synthetic_turns(seed)
    history = History()
    while not history.turns or manager.count(history) < history_tokens:
        history = grow(history, True, list(next(session).messages))
    incremental_ms: list[float] = []
    naive_ms: list[float] = []
    sizes: list[int] = []
    mismatches = 0
    done = 0
    manager.assemble(history)  # warm: the history before the benchmark was already counted
    while done < steps:
        for new_turn, messages in request_steps(next(session)):
            if new_turn:
                # Keep the history at its size (outside the timed region): the oldest turn goes.
                while manager.count(history) > history_tokens and len(history.turns) > 1:
                    history = History(history.turns[1:], history.memory)
            history = grow(history, new_turn, messages)
            t0 = time.perf_counter()
            assembly = manager.assemble(history)
            _wire = assembly.messages  # built on first read; a live request reads it
            t1 = time.perf_counter()
            wire = [manager.system.to_openai(), *(m.to_openai() for m in history.messages())]
            naive = counter.count(template.render(wire, tools))
            t2 = time.perf_counter()
            incremental_ms.append((t1 - t0) * 1000)
            naive_ms.append((t2 - t1) * 1000)
            sizes.append(assembly.predicted_tokens)
            mismatches += naive != assembly.predicted_tokens
            done += 1
            if done >= steps:
                break
    return {
        "requests": done,
        "prompt_tokens_median": statistics.median(sizes),
        "prompt_tokens_min": min(sizes),
        "prompt_tokens_max": max(sizes),
        "incremental_median_ms": statistics.median(incremental_ms),
        "incremental_p95_ms": _percentile(incremental_ms, 0.95),
        "naive_median_ms": statistics.median(naive_ms),
        "naive_p95_ms": _percentile(naive_ms, 0.95),
        "ratio_median": statistics.median(naive_ms) / statistics.median(incremental_ms),
        "count_mismatches": mismatches,
    }


def bench_prefix(family: ModelFamily, seed: int, hours: float, preserve: bool) -> dict[str, Any]:
    """One simulated session of `hours` of game time, from an empty history."""
    manager = _manager(family, preserve)
    session = synthetic_turns(seed)
    history = History()
    start: float | None = None
    requests = extends = trims = 0
    prefill = total = 0
    horizons: list[float] = []
    trim_ms: list[float] = []
    for turn in session:
        start = turn.t if start is None else start
        if turn.t - start > hours * 3600:
            break
        for new_turn, messages in request_steps(turn):
            history = grow(history, new_turn, messages)
            t0 = time.perf_counter()
            assembly = manager.assemble(history, now=turn.t)
            elapsed_ms = (time.perf_counter() - t0) * 1000
            history = assembly.history
            requests += 1
            if assembly.trims:
                trim_ms.append(elapsed_ms)
            extends += assembly.extends_previous
            trims += bool(assembly.trims)
            total += assembly.predicted_tokens
            prefill += assembly.predicted_tokens - assembly.shared_prefix_tokens
            if assembly.horizon_s is not None:
                horizons.append(assembly.horizon_s)
    first_requests = 1  # the first request has no previous prompt to extend
    return {
        "preserve_thinking": preserve,
        "requests": requests,
        "extends_share": extends / max(1, requests - first_requests),
        "trim_requests": trims,
        "prompt_tokens_per_hour": total / hours,
        "prefill_tokens_per_hour": prefill / hours,
        "reuse_share_tokens": 1 - prefill / total if total else 0.0,
        "horizon_s_final": horizons[-1] if horizons else None,
        "trim_ms_median": statistics.median(trim_ms) if trim_ms else None,
        "horizon_s_min_after_warmup": min(horizons[len(horizons) // 2 :]) if horizons else None,
    }


def bench_accuracy(counter: TokenCounter, seed: int, turns: int) -> list[dict[str, Any]]:
    """chars/token per content category and the 4-chars heuristic's error against exact."""
    pieces: dict[str, list[str]] = {
        "tool results": [],
        "tool-call arguments": [],
        "reasoning prose": [],
        "tool specs": [json.dumps(t, ensure_ascii=False) for t in emil_tool_specs()],
        "chat / events": [],
        "status lines": [],
    }
    session = synthetic_turns(seed)
    for _ in range(turns):
        for message in next(session).messages:
            if message.role == "tool":
                pieces["tool results"].append(message.content or "")
            elif message.role == "assistant":
                pieces["tool-call arguments"].extend(c["arguments"] for c in message.tool_calls)
                if message.reasoning:
                    pieces["reasoning prose"].append(message.reasoning)
                if message.content:
                    pieces["chat / events"].append(message.content)
            else:
                pieces["chat / events"].append(message.content or "")
                if message.status:
                    pieces["status lines"].append(message.status)
    rows = []
    for category, texts in pieces.items():
        chars = sum(len(t) for t in texts)
        exact = sum(counter.count(t) for t in texts)
        heuristic = chars / 4
        rows.append(
            {
                "category": category,
                "pieces": len(texts),
                "chars": chars,
                "exact_tokens": exact,
                "chars_per_token": chars / exact if exact else 0.0,
                "heuristic_tokens": round(heuristic),
                "heuristic_error_pct": 100 * (heuristic - exact) / exact if exact else 0.0,
            }
        )
    return rows


def _print_cost(cost: dict[str, Any], history_tokens: int) -> None:
    print(f"## 1. Per-request assembly cost at a ~{history_tokens:,}-token history")
    print(f"window {WINDOW:,}, output reserve {OUTPUT_RESERVE:,}; {cost['requests']} requests, "
          f"prompt {cost['prompt_tokens_min']:,}-{cost['prompt_tokens_max']:,} tokens "
          f"(median {cost['prompt_tokens_median']:,.0f})")  # fmt: skip
    print()
    print("| method | median ms | p95 ms |")
    print("|---|---:|---:|")
    print(f"| incremental (cached blocks, ContextManager.assemble) | {cost['incremental_median_ms']:.2f} | {cost['incremental_p95_ms']:.2f} |")  # fmt: skip
    print(f"| naive (whole re-render + re-tokenize) | {cost['naive_median_ms']:.2f} | {cost['naive_p95_ms']:.2f} |")  # fmt: skip
    print()
    print(f"speed-up (median): {cost['ratio_median']:.1f}x; counts differing from the naive "
          f"count: {cost['count_mismatches']} of {cost['requests']}")  # fmt: skip
    print()


def _print_prefix(rows: list[dict[str, Any]], hours: float) -> None:
    print(f"## 2. Prefix reuse over {hours:g} h of synthetic play (from an empty history)")
    print()
    print("| preserve_thinking | requests | prompts extending the previous | requests that trimmed (median ms) | prompt tokens/h | re-prefilled tokens/h | token reuse | horizon at end |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        horizon = "n/a" if r["horizon_s_final"] is None else f"{r['horizon_s_final'] / 60:.0f} min"
        trim = "" if r["trim_ms_median"] is None else f" ({r['trim_ms_median']:.0f} ms)"
        print(f"| {r['preserve_thinking']} | {r['requests']} | {100 * r['extends_share']:.1f}% | {r['trim_requests']}{trim} | "
              f"{r['prompt_tokens_per_hour']:,.0f} | {r['prefill_tokens_per_hour']:,.0f} | {100 * r['reuse_share_tokens']:.1f}% | {horizon} |")  # fmt: skip
    print()


def _print_accuracy(rows: list[dict[str, Any]]) -> None:
    print("## 3. Count accuracy of the 4-chars heuristic vs exact (Qwen3.5/3.6 tokenizer)")
    print()
    print(
        "| content | pieces | chars | exact tokens | chars/token | heuristic tokens | heuristic error |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['category']} | {r['pieces']} | {r['chars']:,} | {r['exact_tokens']:,} | "
              f"{r['chars_per_token']:.2f} | {r['heuristic_tokens']:,} | {r['heuristic_error_pct']:+.1f}% |")  # fmt: skip
    print()


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=positive_int, default=300, help="timed requests for table 1")
    parser.add_argument("--history-tokens", type=positive_int, default=36000)
    parser.add_argument("--hours", type=positive_float, default=4.0, help="game time of the prefix-reuse session (4: long enough to trim at 36k)")
    parser.add_argument("--accuracy-turns", type=positive_int, default=300)
    parser.add_argument("--tokenizer", default=DEFAULT_FAMILY)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )
    args = parser.parse_args(argv)

    family = family_for_model(args.tokenizer)
    if family is None:
        parser.error(f"--tokenizer {args.tokenizer!r} names no shipped model family")
    counter = family.tokenizer()
    cost = bench_cost(family, args.seed, args.steps, args.history_tokens)
    prefix = [bench_prefix(family, args.seed, args.hours, preserve) for preserve in (False, True)]
    accuracy = bench_accuracy(counter, args.seed, args.accuracy_turns)
    if args.json:
        print(json.dumps({"cost": cost, "prefix": prefix, "accuracy": accuracy}, indent=2))
        return 0
    print(f"# bench_context (tokenizer: {counter.name}; seed {args.seed})")
    print()
    _print_cost(cost, args.history_tokens)
    _print_prefix(prefix, args.hours)
    _print_accuracy(accuracy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

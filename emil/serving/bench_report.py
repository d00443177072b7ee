"""Bench reports side by side: the JSON a run writes, a saved one read back, the table.

A figure is only compared with one measured the same way (:func:`methodology_differences`
names where two runs disagree); ratios are to the first config's median. The measuring itself
is :mod:`emil.serving.bench`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emil.exceptions import ConfigurationError
from emil.serving.bench import BenchResult, Methodology

__all__ = ["compare_table", "load_report", "methodology_differences", "report_json"]


def compare_table(configs: Sequence[BenchResult | dict[str, Any]]) -> str:
    """Side-by-side table, ratios to the first config's median.

    Takes fresh results or config entries of a saved report (see :func:`load_report`).
    """
    rows = [c.to_dict() if isinstance(c, BenchResult) else c for c in configs]
    header = (
        f"{'config':<20} {'tok/s med':>9} {'min-max':>15} {'TTFT med':>9} "
        f"{'accept':>7} {'mean len':>8} {'ratio':>6}"
    )
    lines = [header, "-" * len(header)]
    first = rows[0]["tok_s"]["median"] if rows else None
    for row in rows:
        tok = row["tok_s"]
        median = tok["median"]
        spread = f"{tok['min']:.1f}-{tok['max']:.1f}" if median is not None else "-"
        ttft = f"{row['ttft_s']['median']:.3f}s" if row.get("ttft_s") else "-"
        spec = row.get("spec_decode") or {}
        rate, length = spec.get("acceptance_rate"), spec.get("mean_acceptance_length")
        ratio = f"{median / first:.2f}x" if first and median is not None else "-"
        shown = f"{median:>9.1f}" if median is not None else f"{'-':>9}"
        lines.append(
            f"{str(row['label'])[:20]:<20} {shown} {spread:>15} {ttft:>9} "
            f"{(f'{rate:.0%}' if rate is not None else '-'):>7} "
            f"{(f'{length:.2f}' if length is not None else '-'):>8} {ratio:>6}"
        )
    kinds = {row["headline"] for row in rows}
    lines.append(
        "tok/s = "
        + (
            "(tokens-1)/(latency-TTFT), streamed"
            if kinds == {"decode_tps"}
            else "completion_tokens/latency (prefill included)"
            if kinds == {"e2e_tps"}
            else "MIXED figures: not comparable"
        )
    )
    return "\n".join(lines)


def load_report(path: Path) -> dict[str, Any]:
    """A report written by an earlier run (to compare with, like for like)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read bench report ({exc})") from exc
    if not isinstance(report, dict) or report.get("tool") != "bench_throughput":
        raise ConfigurationError(f"{path}: not a bench_throughput report")
    return report


def methodology_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The methodology fields two reports disagree on (N and warm-ups aside: they change the
    spread, not what is measured)."""
    ignored = {"requests", "warmups"}
    keys = (a.keys() | b.keys()) - ignored
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in sorted(keys) if a.get(k) != b.get(k)]


def report_json(results: Sequence[BenchResult], methodology: Methodology) -> dict[str, Any]:
    """The JSON a run writes: methodology, each config with its server, and ratios."""
    configs = [r.to_dict() for r in results]
    first = configs[0]["tok_s"]["median"] if configs else None
    for config in configs:
        median = config["tok_s"]["median"]
        config["ratio_to_first"] = median / first if first and median is not None else None
    return {
        "tool": "bench_throughput",
        "simulated": any(r.server.is_double for r in results),
        "methodology": methodology.to_dict(),
        "configs": configs,
    }

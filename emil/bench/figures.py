"""The bench's figures: per task and endpoint, success with a Wilson interval, the medians, the
server's token counts, tool-call validity and why runs failed; a table, JSON and a PNG."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emil.bench.runner import RunResult

__all__ = ["TaskFigures", "figures", "format_table", "plot", "to_json", "unplayed", "wilson"]


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval (95 % by default) of a success rate; (0, 1) for no runs."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class TaskFigures:
    """One task on one endpoint, over its runs."""

    task: str
    kind: str
    endpoint: str
    runs: int
    """Runs played: a run the world could not stage (reason ``error: ...``) is not the model's
    score, so it is left out of every figure but ``unplayed`` and the reasons."""
    successes: int
    low: float
    high: float
    mean_credit: float
    """Mean partial credit (fraction of steps met)."""
    median_turns: float | None
    median_game_s: float | None
    prompt_tokens: int
    completion_tokens: int
    tool_calls: int
    invalid_calls: int
    reasons: dict[str, int] = field(default_factory=dict)
    unplayed: int = 0
    """Runs that could not be played (``error: ...``), beside ``runs``."""

    @property
    def rate(self) -> float:
        return self.successes / self.runs if self.runs else 0.0

    @property
    def validity(self) -> float | None:
        return (self.tool_calls - self.invalid_calls) / self.tool_calls if self.tool_calls else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def unplayed(r: RunResult) -> bool:
    """A run the world could not stage or the session could not start: no score of the model's."""
    return r.reason.startswith("error")


def figures(results: list[RunResult]) -> list[TaskFigures]:
    """Per (endpoint, task), in the order first seen."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.endpoint, r.task), []).append(r)
    out = []
    for (endpoint, task), every in groups.items():
        rs = [r for r in every if not unplayed(r)]
        wins = sum(r.success for r in rs)
        low, high = wilson(wins, len(rs))
        out.append(TaskFigures(
            task=task, kind=every[0].kind, endpoint=endpoint, runs=len(rs), successes=wins, low=low, high=high,
            mean_credit=sum(r.fraction for r in rs) / len(rs) if rs else 0.0,
            median_turns=_median([float(r.turns) for r in rs]),
            median_game_s=_median([r.game_s for r in rs]),
            prompt_tokens=sum(r.prompt_tokens for r in every), completion_tokens=sum(r.completion_tokens for r in every),
            tool_calls=sum(r.tool_calls for r in rs), invalid_calls=sum(r.invalid_calls for r in rs),
            reasons=dict(Counter(r.reason for r in every if not r.success)), unplayed=len(every) - len(rs),
        ))
    return out


def _overall(rows: list[TaskFigures], endpoint: str) -> tuple[int, int, float]:
    mine = [f for f in rows if f.endpoint == endpoint]
    runs = sum(f.runs for f in mine)
    wins = sum(f.successes for f in mine)
    credit = sum(f.mean_credit * f.runs for f in mine) / runs if runs else 0.0
    return wins, runs, credit


def format_table(rows: list[TaskFigures], names: dict[str, str] | None = None) -> str:
    """The text table: one line per task and endpoint, then a total per endpoint."""
    names = names or {}
    head = (f"{'task':<18} {'endpoint':<10} {'success':>9} {'95% interval':>13} {'credit':>6} {'turns':>5} "
            f"{'game s':>6} {'prompt tok':>10} {'compl tok':>9} {'valid calls':>11}  failures")
    lines = [head, "-" * len(head)]
    for f in rows:
        valid = f"{f.tool_calls - f.invalid_calls}/{f.tool_calls}" if f.tool_calls else "-"
        reasons = ", ".join(f"{k} x{v}" for k, v in sorted(f.reasons.items())) or "-"
        turns = f"{f.median_turns:.0f}" if f.median_turns is not None else "-"
        game = f"{f.median_game_s:.0f}" if f.median_game_s is not None else "-"
        lines.append(
            f"{f.task:<18} {names.get(f.endpoint, f.endpoint)[:10]:<10} {f.successes:>3}/{f.runs:<3} {f.rate:>3.0%} "
            f"[{f.low:>4.0%}, {f.high:>4.0%}] {f.mean_credit:>6.2f} {turns:>5} {game:>6} {f.prompt_tokens:>10,} "
            f"{f.completion_tokens:>9,} {valid:>11}  {reasons}"
        )
    lines.append("-" * len(head))
    for endpoint in dict.fromkeys(f.endpoint for f in rows):
        wins, runs, credit = _overall(rows, endpoint)
        low, high = wilson(wins, runs)
        left = sum(f.unplayed for f in rows if f.endpoint == endpoint)
        lines.append(f"{'ALL':<18} {names.get(endpoint, endpoint)[:10]:<10} {wins:>3}/{runs:<3} "
                     f"{(wins / runs if runs else 0):>3.0%} [{low:>4.0%}, {high:>4.0%}] {credit:>6.2f}"
                     + (f"  ({left} run(s) not played, not scored)" if left else ""))
    return "\n".join(lines)


def to_json(results: list[RunResult], rows: list[TaskFigures], meta: dict[str, Any]) -> dict[str, Any]:
    """Everything: the settings, each run, the per-task figures and the totals."""
    totals = {}
    for endpoint in dict.fromkeys(f.endpoint for f in rows):
        wins, runs, credit = _overall(rows, endpoint)
        low, high = wilson(wins, runs)
        totals[endpoint] = {"successes": wins, "runs": runs, "rate": wins / runs if runs else 0.0,
                            "unplayed": sum(f.unplayed for f in rows if f.endpoint == endpoint),
                            "low": low, "high": high, "mean_credit": credit}
    return {
        "meta": meta,
        "runs": [r.to_json() for r in results],
        "tasks": [{**f.__dict__, "rate": f.rate, "validity": f.validity} for f in rows],
        "totals": totals,
    }


def plot(rows: list[TaskFigures], path: Path, names: dict[str, str] | None = None) -> Path:
    """Success rate per task, one bar per endpoint, with the Wilson interval as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = names or {}
    tasks = list(dict.fromkeys(f.task for f in rows))
    endpoints = list(dict.fromkeys(f.endpoint for f in rows))
    by = {(f.task, f.endpoint): f for f in rows}
    width = 0.8 / max(1, len(endpoints))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.55 * len(tasks) * max(1, len(endpoints))), 4.8), dpi=100)
    for i, endpoint in enumerate(endpoints):
        xs, ys, lo, hi = [], [], [], []
        for t, task in enumerate(tasks):
            f = by.get((task, endpoint))
            if f is None:
                continue
            xs.append(t + (i - (len(endpoints) - 1) / 2) * width)
            ys.append(f.rate)
            lo.append(f.rate - f.low)
            hi.append(f.high - f.rate)
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=names.get(endpoint, endpoint))
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=40, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (95% Wilson interval)")
    ax.set_title("Emil play bench: success per task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path

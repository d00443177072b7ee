"""A budget sweep as a terminal table and as a PNG an operator can read at a glance."""

from __future__ import annotations

from pathlib import Path

from emil.offline.budget_sweep import SweepResult
from emil.offline.simulate import BudgetPoint

__all__ = ["format_side_by_side", "format_sweep", "plot_sweep"]


def _minutes(v: float | None, hours: float) -> str:
    # Never trimmed: Emil remembers the whole session, which is a lower bound on the horizon.
    value = hours * 60 if v is None else v
    text = f"{value:.2f}" if value < 1 else f"{value:.1f}"
    return f">{text}" if v is None else text


def _recall(p: BudgetPoint) -> str:
    return "-" if p.recall is None else f"{p.recall * 100:.0f}%"


def format_sweep(result: SweepResult) -> str:
    """One row per budget point, then the recommendation and the throughput."""
    recall = any(p.planted for p in result.points)
    summaries = any(p.summary_requests for p in result.points)
    head = (
        f"{'window':>7} {'reserve':>7} {'budget':>7} {'trims/h':>8} {'evict/trim':>10} "
        f"{'horizon med':>11} {'horizon min':>11} {'peak':>7} {'overflow':>8} "
        f"{'append-only':>11} {'re-prefill/h':>12}"
        + (f" {'recall':>6}" if recall else "")
        + (f" {'summ/trim':>9}" if summaries else "")
    )
    lines = [
        f"sessions: {', '.join(result.sessions)}",
        f"tokenizer: {result.tokenizer}",
        *(
            [f"preserve_thinking: {', '.join('on' if p else 'off' for p in result.preserve_thinking)}"]
            if result.preserve_thinking
            else []
        ),
        "horizon = minutes of game time Emil still holds verbatim, over requests from the first "
        "trim on ('>N' = never trimmed in N minutes)",
        *(
            ["recall = facts said in the day's conversation that its last prompt still holds (verbatim, recalled, "
             "memory note or notes block)"]
            if recall
            else []
        ),
        *(
            [f"summaries: the summarise rung with {result.summariser or 'a summary writer'}, timed as a served model"]
            if summaries
            else []
        ),
        *(
            [
                f"budgets are in ESTIMATED tokens (chars / {result.assume_chars_per_token:g}), as a "
                "chars/token harness would count; peak and overflow are real tokens"
            ]
            if result.assume_chars_per_token
            else []
        ),
        "",
        head,
        "-" * len(head),
    ]
    for p in result.points:
        mark = " <" if p == result.recommended else ""
        lines.append(
            f"{p.window:>7} {p.output_reserve:>7} {p.prompt_budget:>7} {p.trims_per_hour:>8.1f} "
            f"{p.evicted_per_trim:>10.1f} {_minutes(p.horizon_median_min, p.hours):>11} "
            f"{_minutes(p.horizon_min_min, p.hours):>11} {p.peak_prompt_tokens:>7} "
            f"{p.overflows:>8} {p.append_only_share * 100:>10.1f}% "
            f"{p.reprefill_tokens_per_hour:>12,.0f}"
            + (f" {_recall(p):>6}" if recall else "")
            + (f" {(p.summary_requests / p.trims if p.trims else 0.0):>9.2f}" if summaries else "")
            + mark
        )
    lines.append("")
    r = result.recommended
    if r is None:
        lines.append(
            f"no budget leaves {result.slack} tokens of slack under window - output reserve "
            "without overflow; serve a larger window or reserve less output"
        )
    else:
        lines.append(
            f"recommended: prompt budget {r.prompt_budget} (window {r.window} - output reserve "
            f"{r.output_reserve} leaves {r.window - r.output_reserve - r.prompt_budget} >= slack "
            f"{result.slack}): median horizon {_minutes(r.horizon_median_min, r.hours)} min, "
            f"minimum {_minutes(r.horizon_min_min, r.hours)} min, {r.trims_per_hour:.1f} trims/h"
        )
    lines.append(
        f"simulated {result.requests_simulated:,} requests in {result.seconds:.2f} s = "
        f"{result.turns_per_s:,.0f} turns/s"
    )
    return "\n".join(lines)


def format_side_by_side(recorded: SweepResult, synthetic: SweepResult) -> str:
    """The recorded sessions and the synthetic day at the same budgets, one row per budget."""
    other = {(p.window, p.output_reserve, p.prompt_budget): p for p in synthetic.points}
    head = (
        f"{'window':>7} {'budget':>7} | {'recorded: trims/h':>17} {'horizon':>8} {'append':>7} | "
        f"{'synthetic: trims/h':>18} {'horizon':>8} {'append':>7} {'recall':>6}"
    )
    lines = [
        f"side by side: recorded ({', '.join(recorded.sessions)}) and synthetic ({', '.join(synthetic.sessions)})",
        head,
        "-" * len(head),
    ]
    for r in recorded.points:
        s = other.get((r.window, r.output_reserve, r.prompt_budget))
        if s is None:
            continue
        lines.append(
            f"{r.window:>7} {r.prompt_budget:>7} | {r.trims_per_hour:>17.1f} {_minutes(r.horizon_median_min, r.hours):>8} "
            f"{r.append_only_share * 100:>6.1f}% | {s.trims_per_hour:>18.1f} {_minutes(s.horizon_median_min, s.hours):>8} "
            f"{s.append_only_share * 100:>6.1f}% {_recall(s):>6}"
        )
    return "\n".join(lines)


def plot_sweep(result: SweepResult, path: str | Path, *, title: str | None = None) -> Path:
    """Horizon (left axis) and trim rate (right axis) against the prompt budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[int, int], list[BudgetPoint]] = {}
    for p in result.points:
        groups.setdefault((p.window, p.output_reserve), []).append(p)
    fig, ax = plt.subplots(figsize=(8, 4.6 + 0.3 * len(groups)), dpi=100)
    ax2 = ax.twinx()
    colors = ["tab:blue", "tab:green", "tab:purple", "tab:brown"]
    for i, ((window, reserve), pts) in enumerate(sorted(groups.items())):
        pts = sorted(pts, key=lambda p: p.prompt_budget)
        color = colors[i % len(colors)]
        label = f"window {window:,}, reserve {reserve:,}" if len(groups) > 1 else None
        x = [p.prompt_budget / 1000 for p in pts]
        hours = max((p.hours for p in pts), default=0.0)
        horizon = [p.horizon_median_min if p.horizon_median_min is not None else hours * 60 for p in pts]
        ax.plot(x, horizon, "o-", color=color, label=f"median horizon{' (' + label + ')' if label else ''}")
        never = [(xi, h) for xi, h, p in zip(x, horizon, pts, strict=True) if p.horizon_median_min is None]
        if never:  # never trimmed: the whole session is remembered (a lower bound), hollow marks
            ax.plot(*zip(*never, strict=True), "o", color=color, mfc="white", ms=8,
                    label="never trimmed (horizon >= session)" if i == 0 else None)
        hmin = [p.horizon_min_min if p.horizon_min_min is not None else hours * 60 for p in pts]
        ax.plot(x, hmin, ":", color=color, label=f"shortest horizon{' (' + label + ')' if label else ''}")
        ax2.plot(x, [p.trims_per_hour for p in pts], "s--", color="tab:red", alpha=0.8 if i == 0 else 0.4,
                 label="trims per hour" if i == 0 else None)
        limit = (window - reserve) / 1000
        ax.axvline(limit, color="grey", lw=0.8)
        ax.axvspan((window - reserve - result.slack) / 1000, limit, color="grey", alpha=0.12)
    r = result.recommended
    if r is not None:
        ax.axvline(r.prompt_budget / 1000, color="black", lw=1.5)
        y = r.horizon_median_min if r.horizon_median_min is not None else r.hours * 60
        ax.annotate(
            f"recommended {r.prompt_budget:,}\nmedian horizon {y:.1f} min\n{r.trims_per_hour:.1f} trims/h",
            xy=(r.prompt_budget / 1000, y), xytext=(0.3, 0.8), textcoords="axes fraction",
            ha="left", va="top", fontsize=9, arrowprops={"arrowstyle": "->", "lw": 0.8},
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.7"},
        )
    unit = (
        f"thousand ESTIMATED tokens, chars/{result.assume_chars_per_token:g}"
        if result.assume_chars_per_token
        else "thousand tokens"
    )
    ax.set_xlabel(f"prompt budget ({unit}; grey band = last slack before window - reserve)")
    ax.set_ylabel("memory horizon (minutes of game time)")
    ax2.set_ylabel("trims per hour", color="tab:red")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax2.set_ylim(0, ax2.get_ylim()[1] * 1.15)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    # Below the axes: the curves and the recommendation keep the whole plot area.
    ax.legend(
        handles[0] + handles2[0], handles[1] + handles2[1], loc="upper center",
        bbox_to_anchor=(0.5, -0.14), ncol=3 if len(groups) == 1 else 2, fontsize=8, frameon=False,
    )
    hours = sum(p.hours for p in result.points) / max(1, len(result.points))
    span = f"{hours:.1f} h" if hours >= 1 else f"{hours * 60:.1f} min"
    ax.set_title(
        title
        or f"Context budget sweep over {span} of play ({', '.join(result.sessions)[:60]}); "
        f"tokenizer {result.tokenizer.split(' ')[0]}",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out

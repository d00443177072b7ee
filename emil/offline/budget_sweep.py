"""Many budgets over many sessions: the sweep, and the budget it recommends.

Each (window, output reserve, prompt budget) is one :func:`emil.offline.simulate.simulate`
over every trace; points run in forked processes when ``jobs`` > 1 (each is independent, the
result is the same as with one process). The recommendation is the largest budget that leaves
the asked slack under window - output reserve and never overflows.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from emil.context.budget import Budget
from emil.model.cached import CachedCounter
from emil.model.tokens import TokenCounter
from emil.offline.recall import WHERE
from emil.offline.simulate import BudgetPoint, ManagerFactory, SharedCaches, simulate
from emil.offline.summaries import SummaryModel
from emil.offline.trace import SessionTrace

__all__ = ["SweepResult", "default_budgets", "recommend", "sweep"]


def default_budgets(
    window: int,
    output_reserve: int,
    *,
    points: int = 10,
    low: int = 8192,
    peak: int | None = None,
    floor: int = 0,
    slack: int | None = None,
) -> list[int]:
    """Evenly spaced prompt budgets up to window - output reserve, plus the budget that leaves
    exactly ``slack`` (the one a recommendation can pick).

    From ``low`` when the session fills the window; when its untrimmed ``peak`` is smaller, from
    a sixth of the peak (at least ``floor``, the smallest prompt that can work) up to the peak,
    rounded down to 100 tokens.
    """
    high = window - output_reserve
    extra = {high - slack} if slack is not None and high - slack > 0 else set()
    if peak is not None and peak < high:
        lo = -(-max(512, peak // 6, floor) // 100) * 100  # up to a round 100, never below floor
        if lo >= peak:
            return sorted({peak, high} | extra)
        step = (peak - lo) / (points - 2)
        spread = {max(100, int(lo + i * step) // 100 * 100) for i in range(points - 1)}
        return sorted(spread | {high} | extra)
    if high <= low:
        return sorted({high} | extra)
    step = (high - low) / (points - 1)
    return sorted({round(low + i * step) for i in range(points)} | extra)


@dataclass(frozen=True)
class SweepResult:
    """Every budget point of a sweep, with its inputs, throughput and recommendation."""

    sessions: tuple[str, ...]
    tokenizer: str
    slack: int
    points: tuple[BudgetPoint, ...]
    recommended: BudgetPoint | None
    requests_simulated: int
    seconds: float
    assume_chars_per_token: float | None = None
    """Set when budgets were in estimated tokens (chars / this); sizes stay real tokens."""
    preserve_thinking: tuple[bool, ...] = ()
    """Per session, whether earlier turns' reasoning stayed in the prompt."""
    summariser: str | None = None
    """What wrote the summaries (:attr:`SummaryModel.label`); None = a sweep without them."""

    @property
    def turns_per_s(self) -> float:
        return self.requests_simulated / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "sessions": list(self.sessions),
            "tokenizer": self.tokenizer,
            "slack": self.slack,
            "points": [p.to_json() for p in self.points],
            "recommended": None if self.recommended is None else self.recommended.to_json(),
            "requests_simulated": self.requests_simulated,
            "seconds": round(self.seconds, 3),
            "turns_per_s": round(self.turns_per_s, 1),
            "assume_chars_per_token": self.assume_chars_per_token,
            "preserve_thinking": list(self.preserve_thinking),
            "summariser": self.summariser,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepResult:
        """A result back from :meth:`to_json` (to redraw a plot without simulating again)."""
        points = tuple(BudgetPoint.from_json(p) for p in data["points"])
        rec = data.get("recommended")
        return cls(
            sessions=tuple(data["sessions"]),
            tokenizer=data["tokenizer"],
            slack=data["slack"],
            points=points,
            recommended=None if rec is None else BudgetPoint.from_json(rec),
            requests_simulated=data["requests_simulated"],
            seconds=data["seconds"],
            assume_chars_per_token=data.get("assume_chars_per_token"),
            preserve_thinking=tuple(data.get("preserve_thinking", ())),
            summariser=data.get("summariser"),
        )


def _merge(points: Sequence[BudgetPoint]) -> BudgetPoint:
    """One point over several sessions: counts summed, rates over the summed hours."""
    if len(points) == 1:
        return points[0]
    p0 = points[0]
    hours = sum(p.hours for p in points)
    trims = sum(p.trims for p in points)
    requests = sum(p.requests for p in points)
    medians = [p.horizon_median_min for p in points if p.horizon_median_min is not None]
    minima = [p.horizon_min_min for p in points if p.horizon_min_min is not None]
    weight = sum(max(p.requests - 1, 0) for p in points)
    return BudgetPoint(
        window=p0.window,
        output_reserve=p0.output_reserve,
        prompt_budget=p0.prompt_budget,
        requests=requests,
        hours=round(hours, 4),
        trims=trims,
        trims_per_hour=round(trims / hours, 2) if hours > 0 else 0.0,
        evicted_per_trim=round(sum(p.evicted_per_trim * p.trims for p in points) / trims, 1) if trims else 0.0,
        horizon_median_min=round(statistics.median(medians), 2) if medians else None,
        horizon_min_min=min(minima) if minima else None,
        peak_prompt_tokens=max(p.peak_prompt_tokens for p in points),
        first_prompt_tokens=max(p.first_prompt_tokens for p in points),
        overflows=sum(p.overflows for p in points),
        append_only_share=round(
            sum(p.append_only_share * max(p.requests - 1, 0) for p in points) / weight, 4
        ) if weight else 1.0,
        reprefill_tokens_per_hour=round(sum(p.reprefill_tokens_per_hour * p.hours for p in points) / hours, 1) if hours > 0 else 0.0,
        seconds=sum(p.seconds for p in points),
        prefix_reuse=round(sum(p.prefix_reuse * max(p.requests - 1, 0) for p in points) / weight, 4) if weight else 1.0,
        planted=sum(p.planted for p in points),
        found={w: sum(p.found.get(w, 0) for p in points) for w in WHERE},
        summary_requests=sum(p.summary_requests for p in points),
        summaries_used=sum(p.summaries_used for p in points),
        summaries_cancelled=sum(p.summaries_cancelled for p in points),
        summary_prompt_tokens=sum(p.summary_prompt_tokens for p in points),
        summary_completion_tokens=sum(p.summary_completion_tokens for p in points),
    )


def recommend(points: Iterable[BudgetPoint], slack: int) -> BudgetPoint | None:
    """The largest budget with ``slack`` tokens left under window - output reserve and no
    overflow; among several windows, the largest such budget overall."""
    ok = [
        p for p in points
        if p.prompt_budget + slack <= p.window - p.output_reserve and p.overflows == 0
    ]
    return max(ok, key=lambda p: (p.prompt_budget, -p.window), default=None)


# Worker state for parallel sweeps: set before the pool forks, so traces and the tokenizer are
# inherited instead of pickled (a day of play is tens of thousands of messages).
_WORK: dict[str, Any] = {}


def _run_point(args: tuple[int, int, int]) -> tuple[BudgetPoint, int]:
    window, reserve, prompt_budget = args
    traces: Sequence[SessionTrace] = _WORK["traces"]
    b = Budget.of(window, reserve, prompt_budget, **_WORK["extra"])
    per_trace = [
        simulate(
            t, b, _WORK["counter"], manager_factory=_WORK["factory"],
            assume_chars_per_token=_WORK["assume"], shared=_WORK["shared"], summaries=_WORK["summaries"],
            recall_tokens=_WORK["recall_tokens"],
        )
        for t in traces
    ]
    return _merge(per_trace), sum(p.requests for p in per_trace)


def sweep(
    traces: Sequence[SessionTrace],
    counter: TokenCounter,
    *,
    windows: Sequence[int],
    output_reserves: Sequence[int] = (6144,),
    budgets: Sequence[int] | None = None,
    slack: int = 4096,
    low_water: float | None = None,
    manager_factory: ManagerFactory | None = None,
    progress: Callable[[BudgetPoint], None] | None = None,
    jobs: int = 1,
    assume_chars_per_token: float | None = None,
    summaries: SummaryModel | None = None,
    recall_tokens: int = 0,
) -> SweepResult:
    """Simulate every (window, output reserve, budget) over every trace; recommend one.

    ``jobs`` > 1 simulates budget points in that many forked processes (each point is
    independent; the result is the same as with one process). ``summaries`` and
    ``recall_tokens`` (retrieval into each turn, for traces that carry an archive): see
    :func:`simulate`.
    """
    started = time.perf_counter()
    _WORK.update(
        traces=traces, counter=CachedCounter(counter), factory=manager_factory,
        shared=SharedCaches(),
        assume=assume_chars_per_token, summaries=summaries, recall_tokens=recall_tokens,
        extra={} if low_water is None else {"low_water": low_water},
    )
    simulated = 0

    def run_all(configs: list[tuple[int, int, int]]) -> list[BudgetPoint]:
        nonlocal simulated
        if jobs > 1 and len(configs) > 1 and "fork" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                results = list(pool.map(_run_point, configs))
        else:
            results = [_run_point(c) for c in configs]
        out = []
        for point, requests in results:
            simulated += requests
            if progress is not None:
                progress(point)
            out.append(point)
        return out

    points: list[BudgetPoint] = []
    try:
        for window in windows:
            for reserve in output_reserves:
                top = window - reserve
                if budgets:
                    points += run_all([(window, reserve, b) for b in budgets if b <= top])
                    continue
                # Largest budget first: its peak is the session's untrimmed size, which decides
                # where the interesting budgets are (a short session never fills a big window).
                (first,) = run_all([(window, reserve, top)])
                chosen = default_budgets(
                    window, reserve, peak=first.peak_prompt_tokens,
                    floor=first.first_prompt_tokens, slack=slack,
                )
                points += [*run_all([(window, reserve, b) for b in chosen if b != top]), first]
    finally:
        _WORK.clear()
    return SweepResult(
        sessions=tuple(t.name for t in traces),
        preserve_thinking=tuple(t.preserve_thinking for t in traces),
        tokenizer=counter.name,
        slack=slack,
        points=tuple(points),
        recommended=recommend(points, slack),
        requests_simulated=simulated,
        seconds=time.perf_counter() - started,
        assume_chars_per_token=assume_chars_per_token,
        summariser=summaries.label if summaries is not None else None,
    )

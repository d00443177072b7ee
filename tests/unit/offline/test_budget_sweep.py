"""tune_budget's simulator: a crafted session whose trims at a given budget are known."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.ladder import LadderConfig, Rung, Trim
from emil.context.manager import ContextManager
from emil.context.rungs import RUNGS, fold_note, register_rung
from emil.model.cached import CachedCounter
from emil.model.resolve import get_token_counter
from emil.offline.budget_report import format_sweep, plot_sweep
from emil.offline.budget_sweep import SweepResult, default_budgets, recommend, sweep
from emil.offline.recall import PlantedFact, find_fact, recall
from emil.offline.simulate import SharedCaches, simulate
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import day_trace, synthetic_day, synthetic_trace
from emil.offline.trace import SessionTrace
from emil.testing.reducer import REDUCER_LABEL, reducer_summary_text

SYSTEM = "You are Emil, a helpful NPC."
TURN_S = 60.0
WINDOW, RESERVE = 16384, 2048


def _turns(n: int) -> list[tuple[Message, ...]]:
    """n equal-sized turns: an observation (digits tokenise one per digit, so every turn costs
    the same) and a short answer, one minute of game time apart."""
    return [
        (
            Message.observation(f"[events]\n- alex says: step {i:04d} " + "walk north and look around " * 12, event_time=1000.0 + i * TURN_S),
            Message.assistant("On my way."),
        )
        for i in range(n)
    ]


class FoldConstant(Rung):
    """``fold`` with one constant line per turn: every fold costs the same and the note never
    grows, which keeps the arithmetic below exact."""

    name = "fold_constant"

    def apply(self, trim: Trim) -> None:
        while trim.over and len(trim.history.turns) > 1:
            oldest = trim.history.turns[0]
            if not trim.try_fold(fold_note(trim.history.memory, "- earlier", oldest, trim)):
                return


@pytest.fixture
def fold_constant() -> Iterator[None]:
    register_rung(FoldConstant)
    yield
    RUNGS.pop(FoldConstant.name)


def _manager(budget: Budget, trace: SessionTrace) -> ContextManager:
    config = LadderConfig(rungs=("fold_constant", "evict", "cut_newest"), memory_max_tokens=1)
    return ContextManager("qwen3.6", budget, trace.system_prompt, trace.tools, ladder=config)


def _expected(turns: list[tuple[Message, ...]], budget: Budget) -> dict[str, object]:
    """Replay the ladder's contract arithmetically: over budget -> fold the oldest whole turns
    into the (constant-size) memory note until at or under the low-water mark."""
    m = _manager(budget, SessionTrace("x", (), system_prompt=SYSTEM))
    open_ = m.count(History().start_turn(turns[0][0]))
    one = m.count(History().start_turn(turns[0][0]).append(turns[0][1]).start_turn(turns[1][0]))
    per_turn = one - open_
    with_note = History((turns[1][:1],), Message.memory("[memory] Earlier events, folded from older turns (oldest first):\n- earlier"))
    note = m.count(with_note) - m.count(History().start_turn(turns[1][0]))
    budget_tokens, target = budget.prompt_budget, int(budget.prompt_budget * budget.low_water)
    first, memory = 0, False  # index of the oldest kept turn; whether the note exists
    trims, evicted, peak, horizons, trimmed = 0, 0, 0, [], False
    for i in range(len(turns)):
        size = open_ + (i - first) * per_turn + (note if memory else 0)
        if size > budget_tokens:
            trims, trimmed = trims + 1, True
            while size > target and first < i:
                first, size = first + 1, size - per_turn + (0 if memory else note)
                memory = True
                evicted += 2
        peak = max(peak, size)
        if trimmed:
            horizons.append((i - first) * TURN_S)
    return {
        "trims": trims,
        "evicted": evicted / trims if trims else 0.0,
        "peak": peak,
        "median": round(statistics.median(horizons) / 60, 2) if horizons else None,
        "min": round(min(horizons) / 60, 2) if horizons else None,
        "per_turn": per_turn,
    }


@pytest.mark.parametrize("prompt_budget", [2000, 3000, 4500])
@pytest.mark.usefixtures("fold_constant")
def test_trims_at_a_budget_are_the_ones_the_ladder_contract_implies(prompt_budget: int) -> None:
    turns = _turns(60)
    trace = SessionTrace.from_turns(turns, system_prompt=SYSTEM, model_family="qwen3.6")
    budget = Budget(WINDOW, RESERVE, margin=WINDOW - RESERVE - prompt_budget)
    want = _expected(turns, budget)
    got = simulate(trace, budget, get_token_counter("qwen3.6"), manager_factory=_manager)
    assert got.requests == 60
    assert got.hours == pytest.approx(59 * TURN_S / 3600, abs=1e-4)
    assert got.trims == want["trims"] and got.trims > 0
    assert got.evicted_per_trim == pytest.approx(want["evicted"], abs=0.05)
    assert got.peak_prompt_tokens == want["peak"]
    assert got.horizon_median_min == want["median"]
    assert got.horizon_min_min == want["min"]
    assert got.overflows == 0
    # Only trimming requests break the prefix: every other request appends to the previous one.
    assert got.append_only_share == pytest.approx((59 - got.trims) / 59, abs=1e-4)


def test_a_budget_above_the_peak_never_trims() -> None:
    trace = SessionTrace.from_turns(_turns(10), system_prompt=SYSTEM, model_family="qwen3.6")
    got = simulate(trace, Budget(WINDOW, RESERVE, margin=0), get_token_counter("qwen3.6"))
    assert (got.trims, got.horizon_median_min, got.horizon_min_min) == (0, None, None)
    assert got.append_only_share == 1.0 and got.reprefill_tokens_per_hour == 0.0


def test_sweep_recommends_the_largest_budget_with_the_slack(tmp_path: Path) -> None:
    trace = SessionTrace.from_turns(_turns(40), system_prompt=SYSTEM, model_family="qwen3.6")
    result = sweep(
        [trace], get_token_counter("qwen3.6"), windows=[WINDOW], output_reserves=[RESERVE],
        budgets=[3000, 6000, 9000, 12000, 14336], slack=2048,
    )
    assert [p.prompt_budget for p in result.points] == [3000, 6000, 9000, 12000, 14336]
    assert result.recommended is not None and result.recommended.prompt_budget == 12000
    assert recommend(result.points, slack=0) == result.points[-1]
    assert recommend(result.points, slack=20000) is None
    # Trim rate falls and the horizon grows as the budget grows.
    rates = [p.trims_per_hour for p in result.points]
    assert rates == sorted(rates, reverse=True) and rates[0] > 0
    assert result.requests_simulated == 5 * 40
    text = format_sweep(result)
    assert "recommended: prompt budget 12000" in text and "turns/s" in text
    again = SweepResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.points == result.points and again.recommended == result.recommended
    # The same sweep in two forked processes gives the same points (timings aside).
    parallel = sweep(
        [trace], get_token_counter("qwen3.6"), windows=[WINDOW], output_reserves=[RESERVE],
        budgets=[3000, 6000, 9000, 12000, 14336], slack=2048, jobs=2,
    )
    assert [replace(p, seconds=0) for p in parallel.points] == [replace(p, seconds=0) for p in result.points]
    png = plot_sweep(result, tmp_path / "sweep.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_default_budgets_end_at_window_minus_reserve() -> None:
    budgets = default_budgets(65536, 6144)
    assert budgets[0] == 8192 and budgets[-1] == 65536 - 6144 and len(budgets) == 10
    # A short session that never fills the window: budgets spread below its peak.
    small = default_budgets(65536, 6144, peak=6000, floor=1500, slack=4096)
    assert small[0] == 1500 and small[-3] == 6000 and small[-2:] == [55296, 59392]


def test_sweep_without_budgets_looks_below_a_short_sessions_peak() -> None:
    trace = SessionTrace.from_turns(_turns(30), system_prompt=SYSTEM, model_family="qwen3.6")
    result = sweep([trace], get_token_counter("qwen3.6"), windows=[WINDOW], output_reserves=[RESERVE])
    peak = max(p.peak_prompt_tokens for p in result.points)
    assert result.points[-1].prompt_budget == WINDOW - RESERVE
    assert result.points[-2].prompt_budget == WINDOW - RESERVE - 4096  # the default slack
    assert result.recommended == result.points[-2]
    assert any(p.trims > 0 for p in result.points) and all(p.prompt_budget <= peak for p in result.points[:-2])
    assert all(p.overflows == 0 for p in result.points)  # no budget below the first prompt


def test_a_budget_in_estimated_tokens_lets_real_prompts_overflow() -> None:
    # The field notes' failure: a budget in chars/4 "tokens" on content that runs at about 2.5
    # chars/token lets through prompts far bigger than the budget, and past the window.
    turns = [
        (
            Message.observation(json.dumps({"blocks": [[i, 64 + j, -7 * j] for j in range(20)]}), event_time=60.0 * i),
            Message.assistant("ok"),
        )
        for i in range(60)
    ]
    trace = SessionTrace.from_turns(turns, system_prompt=SYSTEM, model_family="qwen3.6")
    counter = get_token_counter("qwen3.6")
    window, reserve, estimated = 8192, 2048, 5500
    b = Budget(window, reserve, margin=window - reserve - estimated)
    exact = simulate(trace, b, counter)
    assert exact.peak_prompt_tokens <= estimated and exact.overflows == 0
    guessed = simulate(trace, b, counter, assume_chars_per_token=4.0)
    assert guessed.peak_prompt_tokens > window - reserve
    assert guessed.overflows > 0
    result = sweep([trace], counter, windows=[window], output_reserves=[reserve], budgets=[estimated], assume_chars_per_token=4.0)
    assert "ESTIMATED tokens (chars / 4)" in format_sweep(result)


def test_shared_caches_change_nothing_but_speed() -> None:
    """A budget simulated after another one with the sweep's shared counters gives the very
    same figures as the same budget simulated alone."""
    trace = synthetic_trace(hours=1.0, seed=3)
    counter = CachedCounter(get_token_counter("qwen3.6"))
    shared = SharedCaches()

    def budget(prompt_budget: int) -> Budget:
        return Budget(window=WINDOW, output_reserve=RESERVE, margin=WINDOW - RESERVE - prompt_budget)

    simulate(trace, budget(6000), counter, shared=shared)  # warms the shared caches
    warm = simulate(trace, budget(5000), counter, shared=shared)
    alone = simulate(trace, budget(5000), get_token_counter("qwen3.6"))
    assert warm.trims > 3  # the ladder really ran
    assert replace(warm, seconds=0.0) == replace(alone, seconds=0.0)


def test_a_recorded_session_is_swept_with_its_own_preserve_thinking(tmp_path: Path) -> None:
    sample = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "demo-session.jsonl"
    lines = sample.read_text().splitlines()
    for preserve in (True, False):
        header = {**json.loads(lines[0]), "preserve_thinking": preserve}
        path = tmp_path / f"{preserve}.jsonl"
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
        assert SessionTrace.from_recording(path).preserve_thinking is preserve


def test_kept_reasoning_makes_every_turn_bigger_and_every_prompt_append_only() -> None:
    """A thinking session swept with and without preserve_thinking: kept reasoning costs tokens
    (more trims at the same budget) and keeps prompts append-only between trims."""
    # 22,000: room for the history beside the 23 tools' specs (3,165 tokens since issue #14)
    budget = Budget(window=22000, output_reserve=6144)
    qwen = get_token_counter("qwen3.6")
    kept = simulate(synthetic_trace(hours=2.0, seed=3, reasoning=True, preserve_thinking=True), budget, qwen)
    dropped = simulate(synthetic_trace(hours=2.0, seed=3, reasoning=True, preserve_thinking=False), budget, qwen)
    assert kept.trims > dropped.trims > 0
    assert kept.append_only_share > 0.95 > dropped.append_only_share


def test_tune_budget_says_which_preserve_thinking_it_swept(capsys: pytest.CaptureFixture[str]) -> None:
    from tools.tune_budget import main

    assert main(["--synthetic-hours", "0.2", "--budgets", "9000", "--jobs", "1", "--no-preserve-thinking"]) == 0
    assert "preserve_thinking: off" in capsys.readouterr().out
    assert main(["--synthetic-hours", "0.2", "--budgets", "9000", "--jobs", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["preserve_thinking"] == [True]


@pytest.mark.parametrize("spec", ["abc", "1:9:0", "8000:9000"])
def test_a_bad_budget_list_is_refused_with_the_expected_form(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tools.tune_budget import main

    with pytest.raises(SystemExit) as exit_:
        main(["--synthetic-hours", "0.1", "--budgets", spec])
    assert exit_.value.code == 2
    assert "a,b,c or lo:hi:step" in capsys.readouterr().err


def test_a_day_with_summaries_measures_recall_and_asks_at_most_once_per_trim() -> None:
    """The synthetic day through the default ladder (notes refreshed at trims, the summarise rung
    with the text reducer double timed as a served model): recall of the planted facts, summary
    requests and their tokens, prefix reuse."""
    day = synthetic_day(4.0, seed=2)
    budget = Budget(window=16000, output_reserve=4096)
    qwen = get_token_counter("qwen3.6")
    digest = simulate(replace(day_trace(day), steps=tuple(s for s in day_trace(day).steps if s.op != "notes")), budget, qwen)
    full = simulate(day_trace(day), budget, qwen, summaries=SummaryModel(reducer_summary_text, REDUCER_LABEL))
    planted = sum(1 for f in day.planted if f.t <= day.turns[-1].t)
    assert full.planted == digest.planted == planted > 5
    assert full.recall is not None and digest.recall is not None and full.recall > digest.recall
    assert full.found["notes"] > 0 and digest.found["notes"] == 0
    assert 0 < full.summaries_used <= full.summary_requests <= full.trims + 1
    assert full.summary_prompt_tokens > full.summary_completion_tokens > 0
    assert 0.9 < full.prefix_reuse <= 1.0 and full.append_only_share > 0.9


def test_recall_says_where_a_fact_is() -> None:
    fact = PlantedFact(0.0, "alex gave Emil 3 bread", (("alex", "bread"),), "player")
    said = Message.observation('[events]\n- you picked up 3 bread (tossed by alex)')
    note = Message.memory("[notes] ...\n- alex: gave you 3 bread")
    assert find_fact(History().start_turn(said), fact) == "verbatim"
    assert find_fact(History(notes=note).start_turn(Message.observation("[events] none")), fact) == "notes"
    assert find_fact(History().start_turn(Message.observation("alex\nbread")), fact) is None  # not in one line
    r = recall(History(notes=note), [fact, PlantedFact(1.0, "later", (("x",),), "place")], now=0.5)
    assert (r.planted, r.share, r.missing) == (1, 1.0, ())


def test_tune_budget_sets_recorded_and_synthetic_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    from tools.tune_budget import main

    soak = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "soak-session.jsonl"
    assert main([str(soak), "--synthetic-hours", "0.5", "--budgets", "4400,6100", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "side by side: recorded" in out and "recall" in out
    rows = [line for line in out.splitlines() if line.startswith("  12800    4400 |")]
    assert len(rows) == 1 and rows[0].rstrip().endswith("%")

"""Budget arithmetic in real tokens; calibration widens the margin on disagreement."""

from __future__ import annotations

import pytest

from emil.context.budget import Budget, Calibration
from emil.exceptions import BudgetError


def test_prompt_budget_is_window_minus_output_minus_margin() -> None:
    budget = Budget(65536, output_reserve=6144, margin=256, low_water=0.8)
    assert budget.prompt_budget == 59136
    assert Budget(65536, output_reserve=6144, margin=1000).prompt_budget == 58392


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"window": 4096, "output_reserve": 6144}, "window 4096 - output reserve 6144"),
        ({"window": 0}, "window 0"),
        ({"window": 8192, "low_water": 1.5}, "low_water"),
    ],
)
def test_impossible_budgets_name_their_numbers(kwargs: dict[str, float], text: str) -> None:
    with pytest.raises(BudgetError, match=text):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_exact_predictions_keep_the_base_margin() -> None:
    calibration = Calibration(base_margin=100)
    for n in (1000, 2000, 3000):
        calibration.observe(n, n)
    assert calibration.margin == 100
    report = calibration.report()
    assert (report.samples, report.exact, report.worst_under) == (3, 3, 0)


def test_under_counts_widen_the_margin_and_over_counts_do_not_shrink_it() -> None:
    calibration = Calibration(base_margin=100, widen=1.5)
    calibration.observe(1000, 1040)  # server saw 40 more than we predicted
    assert calibration.margin == 160
    calibration.observe(1000, 900)
    assert calibration.margin == 160
    report = calibration.report()
    assert report.worst_under == 40 and report.worst_over == 100
    assert report.mean_error == pytest.approx(-30.0)


def test_calibration_forgets_old_errors() -> None:
    calibration = Calibration(base_margin=0, window=2)
    calibration.observe(10, 30)
    calibration.observe(10, 10)
    calibration.observe(10, 10)
    assert calibration.margin == 0
    assert Calibration().report().samples == 0


def test_a_report_without_samples_says_nothing_went_wrong() -> None:
    report = Calibration(base_margin=100).report()
    assert (report.samples, report.exact, report.mean_error) == (0, 0, 0.0)
    assert (report.worst_under, report.worst_over, report.margin) == (0, 0, 100)


def test_a_report_of_exact_predictions_has_no_worst_case() -> None:
    calibration = Calibration(base_margin=100)
    calibration.observe(500, 500)
    report = calibration.report()
    assert (report.worst_under, report.worst_over, report.mean_error, report.margin) == (0, 0, 0.0, 100)


def test_one_token_off_either_way_is_reported() -> None:
    calibration = Calibration(base_margin=10, widen=2.0)
    calibration.observe(500, 501)  # one under
    calibration.observe(500, 499)  # one over
    report = calibration.report()
    assert (report.worst_under, report.worst_over) == (1, 1)
    assert report.margin == calibration.margin == 12


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"window": 100, "output_reserve": -1, "margin": 0},
        {"window": 100, "output_reserve": 0, "margin": -1},
    ],
)
def test_a_negative_or_empty_part_is_an_invalid_budget(kwargs: dict[str, int]) -> None:
    with pytest.raises(BudgetError, match="invalid budget"):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_the_smallest_budgets_that_hold() -> None:
    assert Budget(1, output_reserve=0, margin=0).prompt_budget == 1  # one token of room is room
    assert Budget(100, output_reserve=0, margin=0, low_water=1.0).prompt_budget == 100
    with pytest.raises(BudgetError, match="no room for a prompt"):
        Budget(100, output_reserve=50, margin=50)  # exactly nothing left
    with pytest.raises(BudgetError, match="low_water"):
        Budget(100, output_reserve=0, margin=0, low_water=0.0)


def test_the_calibration_defaults_a_256_margin_over_64_recent_samples() -> None:
    calibration = Calibration()
    assert calibration.margin == 256
    calibration.observe(100, 200)  # 100 under, then 64 exact: the under-count is forgotten
    for _ in range(64):
        calibration.observe(100, 100)
    assert calibration.margin == 256
    calibration.observe(100, 110)
    for _ in range(63):
        calibration.observe(100, 100)
    assert calibration.margin == 256 + 15  # 63 later it is still in the window


def test_of_builds_the_auto_budget_or_the_asked_prompt_budget_with_its_sources() -> None:
    auto = Budget.of(32768, 4096, sources={"window": "server max_model_len"})
    assert (auto.prompt_budget, auto.margin) == (32768 - 4096 - 256, 256)
    asked = Budget.of(32768, 4096, 20000, sources={"prompt budget": "setting prompt_budget"})
    assert (asked.prompt_budget, asked.margin) == (20000, 32768 - 4096 - 20000)
    # sources are shown, never compared: the same numbers are the same budget
    assert asked == Budget.of(32768, 4096, 20000)
    assert asked.explain() == (
        "prompt budget 20000 (window 32768 - output reserve 4096 - margin 8672; "
        "prompt budget from setting prompt_budget)"
    )
    assert auto.explain(margin=300).startswith("prompt budget 28372 (window 32768 - output reserve 4096 - margin 300;")


def test_of_refuses_a_prompt_budget_that_leaves_less_than_the_margin_asked() -> None:
    assert Budget.of(1000, 100, 900).prompt_budget == 900  # no margin asked: all the room may go
    with pytest.raises(BudgetError, match=r"prompt_budget 901 > window 1000 - output_reserve 100 = 900; lower"):
        Budget.of(1000, 100, 901)
    with pytest.raises(BudgetError, match=r"prompt_budget 800 > window 1000 - output_reserve 100 - margin 256 = 644"):
        Budget.of(1000, 100, 800, min_margin=256)
    assert Budget.of(1000, 100, 644, min_margin=256).margin == 256

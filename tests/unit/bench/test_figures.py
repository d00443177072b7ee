"""The bench's figures: the Wilson interval, the per-task table, JSON, the picture, the CLI's
one-line errors and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.bench.figures import figures, format_table, plot, to_json, wilson
from emil.bench.runner import RunResult, _failure_reason


def test_wilson_interval() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    low, high = wilson(0, 10)
    assert low == 0.0 and 0.25 < high < 0.35  # 0/10 is not "certainly never"
    low, high = wilson(10, 10)
    assert 0.65 < low < 0.75 and high == 1.0
    low, high = wilson(5, 10)
    assert low < 0.5 < high and abs((0.5 - low) - (high - 0.5)) < 1e-9
    # the textbook values (Wilson 1927; z = 1.96)
    for (k, n), want in {(5, 10): (0.2366, 0.7634), (0, 10): (0.0, 0.2775), (1, 4): (0.0456, 0.6994),
                         (16, 17): (0.7302, 0.9895), (17, 17): (0.8157, 1.0)}.items():
        got = wilson(k, n)
        assert abs(got[0] - want[0]) < 5e-4 and abs(got[1] - want[1]) < 5e-4, (k, n, got)


def _run(task: str, endpoint: str, ok: bool, **kw: object) -> RunResult:
    r = RunResult(task, "social", endpoint, 0, "t", success=ok, fraction=1.0 if ok else 0.0, turns=2, game_s=5.0,
                  prompt_tokens=100, completion_tokens=10, tool_calls=2, invalid_calls=0 if ok else 1,
                  reason="" if ok else "timed out")
    r.__dict__.update(kw)
    return r


def test_figures_table_json_and_plot(tmp_path: Path) -> None:
    results = [_run("follow", "A", True), _run("follow", "A", False), _run("follow", "B", False), _run("stay", "A", True)]
    rows = figures(results)
    follow_a = next(f for f in rows if f.task == "follow" and f.endpoint == "A")
    assert (follow_a.runs, follow_a.successes, follow_a.reasons) == (2, 1, {"timed out": 1})
    assert follow_a.validity == 3 / 4 and follow_a.prompt_tokens == 200
    table = format_table(rows)
    assert "follow" in table and "timed out x1" in table and "ALL" in table
    data = to_json(results, rows, {"runs": 2})
    assert json.loads(json.dumps(data))["totals"]["A"]["successes"] == 2
    png = plot(rows, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_that_could_not_be_played_is_not_scored() -> None:
    """A world fault on one endpoint's run must not count as that model's failure (an A/B would
    lean against it): the run is kept out of the rate, credit, medians and validity, and shown."""
    error = _run("follow", "A", False, reason="error: Emil's client does not see ['alex']", turns=0, game_s=0.0,
                 tool_calls=0, invalid_calls=0, prompt_tokens=50, completion_tokens=5)
    rows = figures([_run("follow", "A", True), error, _run("follow", "A", True)])
    (row,) = rows
    assert (row.runs, row.successes, row.unplayed, row.rate, row.mean_credit) == (2, 2, 1, 1.0, 1.0)
    assert row.median_turns == 2 and row.median_game_s == 5.0 and row.validity == 1.0
    assert row.reasons == {"error: Emil's client does not see ['alex']": 1}
    assert (row.prompt_tokens, row.completion_tokens) == (250, 25)  # what the server served, every run
    table = format_table(rows)
    assert "2/2" in table and "1 run(s) not played" in table
    (alone,) = figures([error])
    assert (alone.runs, alone.mean_credit, alone.median_turns, alone.validity) == (0, 0.0, None, None)
    assert to_json([error], figures([error]), {})["totals"]["A"] == {
        "successes": 0, "runs": 0, "rate": 0.0, "unplayed": 1, "low": 0.0, "high": 1.0, "mean_credit": 0.0}


def test_failure_reasons_most_telling_first() -> None:
    assert _failure_reason(_run("x", "A", False, goal_reasons=["wrong target: bob got 2 diamond"])) == "wrong target"
    assert _failure_reason(_run("x", "A", False, refused=1)) == "refused"
    assert _failure_reason(_run("x", "A", False, tool_calls=2, invalid_calls=2)) == "invalid call"
    assert _failure_reason(_run("x", "A", False, tool_calls=0)) == "no tool call"
    assert _failure_reason(_run("x", "A", False, tool_calls=1, invalid_calls=0, reason="out of turns")) == "out of turns"


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--runs", "0", "--endpoint", "http://127.0.0.1:9/v1"], 2, "must be a positive integer"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--tasks", "nope"], 2, "unknown task(s) nope"),
        ([], 2, "--endpoint URL is required"),
        (["--oracle", "--endpoint", "http://127.0.0.1:9/v1"], 2, "leave out --endpoint"),
        (["--endpoint", "http://127.0.0.1:9/v1"], 3, "cannot reach endpoint http://127.0.0.1:9/v1"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--vs", "http://127.0.0.1:9/v1"], 2, "same endpoint and model"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--vs", "http://127.0.0.1:8/v1"], 3, "cannot reach endpoint"),
        (["--endpoint", "http://127.0.0.1:9/v1", "--warmup", "-1"], 2, "--warmup"),
    ],
)
def test_bad_arguments_and_an_unreachable_endpoint_are_one_line(
    argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.bench_play import main

    try:
        got = main(argv)
    except SystemExit as exc:  # argparse's errors
        got = int(exc.code or 0)
    assert got == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines


def test_the_totals_weigh_each_task_by_its_runs() -> None:
    """ALL and the JSON totals: successes and runs summed, credit the mean over every run (a
    task of 3 runs weighs three times a task of 1), the interval of the sum."""
    results = [_run("follow", "A", False, fraction=0.5), _run("follow", "A", False, fraction=0.5),
               _run("follow", "A", True), _run("stay", "A", False, fraction=0.0)]
    rows = figures(results)
    assert [(f.task, f.kind, f.runs, f.successes, round(f.mean_credit, 4)) for f in rows] == [
        ("follow", "social", 3, 1, 0.6667), ("stay", "social", 1, 0, 0.0)]
    data = to_json(results, rows, {"runs": 3, "seed": 7})
    assert set(data) == {"meta", "runs", "tasks", "totals"} and data["meta"] == {"runs": 3, "seed": 7}
    assert [r["task"] for r in data["runs"]] == ["follow", "follow", "follow", "stay"]
    follow = data["tasks"][0]
    assert follow["task"] == "follow" and abs(follow["rate"] - 1 / 3) < 1e-9 and follow["validity"] == 4 / 6  # 2 calls a run, 1 invalid in each failed run
    total = data["totals"]["A"]
    assert (total["successes"], total["runs"], total["unplayed"]) == (1, 4, 0)
    assert total["rate"] == 0.25 and abs(total["mean_credit"] - 0.5) < 1e-9  # (0.5 + 0.5 + 1 + 0) / 4
    assert (total["low"], total["high"]) == wilson(1, 4)
    all_line = format_table(rows).splitlines()[-1]
    assert all_line.split()[:4] == ["ALL", "A", "1/4", "25%"] and all_line.endswith(" 0.50"), all_line


def test_the_table_reads_as_documented() -> None:
    """The table an operator reads (docs/play-bench.md shows it): columns, endpoint names cut
    to 10 characters or given names, failures counted, totals per endpoint, unplayed runs said,
    and a task none of whose runs could be played shown as such, not as a zero of the model's."""
    rows = figures([_run("follow", "http://127.0.0.1:8000/v1", True), _run("follow", "http://127.0.0.1:8000/v1", False),
                    _run("stay", "B", False, reason="error: no world"), _run("stay", "B", True),
                    _run("stay", "B", False, reason="wrong target"), _run("come", "C", False, reason="error: kicked")])
    assert format_table(rows, {"B": "base"}).splitlines() == [
        "task               endpoint     success  95% interval credit turns game s prompt tok compl tok valid calls  failures",
        "-" * 116,
        "follow             http://127   1/2   50% [  9%,  91%]   0.50     2      5        200        20         3/4  timed out x1",
        "stay               base         1/2   50% [  9%,  91%]   0.50     2      5        300        30         3/4  error: no world x1, wrong target x1",
        "come               C            0/0    0% [  0%, 100%]   0.00     -      -        100        10           -  error: kicked x1",
        "-" * 116,
        "ALL                http://127   1/2   50% [  9%,  91%]   0.50",
        "ALL                base         1/2   50% [  9%,  91%]   0.50  (1 run(s) not played, not scored)",
        "ALL                C            0/0    0% [  0%, 100%]   0.00  (1 run(s) not played, not scored)",
    ]

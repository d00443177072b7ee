"""The order a bench plays in: warm-ups first and apart, then A and B in turn on the same
task and run (tools/bench_play.py's ``--vs`` is this order, played)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.bench.runner import schedule
from emil.bench.tasks import SUITE

A, B = ("http://127.0.0.1:8000/v1", "auto"), ("http://127.0.0.1:8001/v1", "other")
T1, T2 = SUITE[0], SUITE[1]


def _order(slots: list) -> list[tuple[str, str, int]]:
    return [(s.task.id, s.endpoint[-6:-3], s.run) for s in slots]


def test_two_endpoints_take_turns_on_each_task_and_run() -> None:
    slots = schedule([T1, T2], [A, B], runs=2, warmup=0)
    assert _order(slots) == [
        (T1.id, "000", 0), (T1.id, "001", 0), (T2.id, "000", 0), (T2.id, "001", 0),
        (T1.id, "000", 1), (T1.id, "001", 1), (T2.id, "000", 1), (T2.id, "001", 1),
    ]
    assert [s.model for s in slots[:2]] == ["auto", "other"]
    assert not any(s.warmup for s in slots)


def test_warm_ups_come_first_on_the_first_task_and_are_marked() -> None:
    slots = schedule([T1, T2], [A, B], runs=1, warmup=2)
    warm = [s for s in slots if s.warmup]
    assert slots[: len(warm)] == warm
    assert _order(warm) == [(T1.id, "000", -1), (T1.id, "001", -1), (T1.id, "000", -2), (T1.id, "001", -2)]
    assert len(slots) - len(warm) == 2 * 2  # the scored runs are all still there


def test_one_endpoint_and_nothing_to_play() -> None:
    assert _order(schedule([T1], [A], runs=3, warmup=0)) == [(T1.id, "000", r) for r in range(3)]
    assert schedule([], [A, B], runs=3, warmup=1) == []
    assert schedule([T1], [], runs=3, warmup=1) == []


def test_two_models_on_one_server_are_two_endpoints_in_the_figures() -> None:
    from tools.bench_play import _label

    one = [A, (A[0], "lora-1")]
    assert _label(A[0], "auto", one) != _label(A[0], "lora-1", one)
    assert _label(A[0], "auto", [A, B]) == A[0]  # two servers: the URL alone


def test_the_tool_plays_the_order_and_discards_the_warm_ups(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """tools/bench_play.py's loop over a world DOUBLE (no server): every slot is played in
    order, warm-ups are printed as discarded and kept out of the results."""
    import anyio

    import tools.bench_play as bench_play
    from emil.bench.runner import RunResult

    played: list[tuple[str, str, int]] = []

    class World:
        def __init__(self, options: object) -> None: ...

        async def __aenter__(self) -> World:
            return self

        async def __aexit__(self, *exc: object) -> None: ...

        async def play(self, task: object, endpoint: str, model: str, run: int) -> RunResult:
            played.append((task.id, endpoint, run))  # type: ignore[attr-defined]
            return RunResult(task.id, "social", endpoint, run, "t", reason="timed out")  # type: ignore[attr-defined]

    monkeypatch.setattr(bench_play, "BenchWorld", World)
    args = bench_play._parser().parse_args(["--endpoint", A[0], "--vs", B[0], "--runs", "2", "--warmup", "1",
                                            "--tasks", f"{T1.id},{T2.id}"])
    results = anyio.run(bench_play._bench, args, [T1, T2], tmp_path)
    assert played[:2] == [(T1.id, A[0], -1), (T1.id, B[0], -1)]
    assert [(r.task, r.endpoint, r.run) for r in results] == played[2:] and len(results) == 8
    out = capsys.readouterr().out
    assert out.count("(discarded)") == 2 and "8/8" in out

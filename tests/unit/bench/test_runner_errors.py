"""How a run that cannot be played is scored: a fault of the run is a failed run with its
reason; a configuration error stops the bench (every run would fail the same way, and scoring
it would put the operator's mistake down as the model's 0). The world is not started: the run's
play is replaced, the rest of :meth:`BenchWorld.play` is the real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emil.bench.runner import BenchOptions, BenchWorld
from emil.bench.tasks import SUITE
from emil.exceptions import BudgetError

URL = "http://127.0.0.1:9/v1"


def _world(tmp_path: Path, fault: BaseException) -> BenchWorld:
    world = BenchWorld(BenchOptions(workdir=tmp_path))

    async def play(*_: Any) -> None:
        raise fault

    world._play = play  # type: ignore[method-assign]
    return world


async def test_a_fault_of_one_run_is_a_failed_run_with_its_reason(tmp_path: Path) -> None:
    world = _world(tmp_path, ExceptionGroup("session", [RuntimeError("the bot's client left")]))
    r = await world.play(SUITE[0], URL, "auto", 0)
    assert r.success is False
    assert r.reason == "error: the bot's client left"


@pytest.mark.parametrize("grouped", [False, True])
async def test_a_configuration_error_stops_the_bench(tmp_path: Path, grouped: bool) -> None:
    error = BudgetError("prompt budget 6912 < pinned 7115; raise the window or lower output_reserve")
    world = _world(tmp_path, ExceptionGroup("session", [error]) if grouped else error)
    with pytest.raises(BudgetError) as caught:
        await world.play(SUITE[0], URL, "auto", 0)
    assert caught.value is error

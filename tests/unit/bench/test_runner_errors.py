"""How a run that cannot be played is scored: a fault of the run is a failed run with its
reason; a configuration error stops the bench (every run would fail the same way, and scoring
it would put the operator's mistake down as the model's 0). The world is not started: the run's
play is replaced, the rest of :meth:`BenchWorld.play` is the real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from emil.bench.runner import STAGING_QUIET_S, BenchOptions, BenchWorld, _drop_staging_events
from emil.bench.tasks import SUITE
from emil.exceptions import BudgetError

URL = "http://127.0.0.1:9/v1"


def _world(tmp_path: Path, fault: BaseException) -> BenchWorld:
    world = BenchWorld(BenchOptions(workdir=tmp_path))

    async def play(*_: Any) -> None:
        raise fault

    world._play = play  # type: ignore[method-assign]
    return world


async def test_a_fault_of_one_run_is_a_failed_run_with_its_reason(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    world = _world(tmp_path, ExceptionGroup("session", [RuntimeError("the bot's client left")]))
    r = await world.play(SUITE[0], URL, "auto", 0)
    assert r.success is False
    assert r.reason == "error: the bot's client left"
    (trace,) = [t async for t in anyio.Path(tmp_path).glob("*/error.txt")]  # kept in the run's folder
    assert "RuntimeError: the bot's client left" in await trace.read_text()
    (line,) = [r for r in caplog.records if r.name == "emil.bench"]
    assert line.exc_info is None and str(trace) in line.getMessage()


@pytest.mark.parametrize("grouped", [False, True])
async def test_a_configuration_error_stops_the_bench(tmp_path: Path, grouped: bool) -> None:
    error = BudgetError("prompt budget 6912 < pinned 7115; raise the window or lower output_reserve")
    world = _world(tmp_path, ExceptionGroup("session", [error]) if grouped else error)
    with pytest.raises(BudgetError) as caught:
        await world.play(SUITE[0], URL, "auto", 0)
    assert caught.value is error


class _World:
    """A session's world whose events are what staging made, then quiet (or then gone)."""

    def __init__(self, made: int, then_gone: bool) -> None:
        self.made, self.then_gone, self.read = made, then_gone, 0

    async def events(self) -> Any:
        for _ in range(self.made):
            self.read += 1
            yield {"kind": "action_finished", "action": "go_to"}
        if not self.then_gone:
            await anyio.sleep_forever()


class _Session:
    def __init__(self, world: _World) -> None:
        self.agent = type("Agent", (), {"world": world})()


@pytest.mark.parametrize("then_gone", [False, True])
async def test_staging_events_are_dropped_before_play(then_gone: bool) -> None:
    world = _World(3, then_gone)
    with anyio.fail_after(5):
        dropped = await _drop_staging_events(_Session(world))  # type: ignore[arg-type]
    assert (dropped, world.read) == (3, 3)


async def test_no_staging_events_waits_only_the_quiet_window() -> None:
    started = anyio.current_time()
    assert await _drop_staging_events(_Session(_World(0, False))) == 0  # type: ignore[arg-type]
    assert anyio.current_time() - started < STAGING_QUIET_S + 2


def test_the_recording_adds_tokens_and_trims_but_not_turns(tmp_path: Path) -> None:
    """Turns are counted in play from the player's first line; the recording (which holds every
    turn, staging's included) must not count them again."""
    from emil.agent.turnstats import TurnStats
    from emil.bench.runner import RunResult, _read_recording
    from emil.recording import Recorder

    rec = Recorder(tmp_path / "session.jsonl")
    for n in (1, 2):
        stats = TurnStats(turn=n, reason="bob spoke", started=0.0)
        stats.trims = n
        rec.write(stats.record())
    rec.close()
    result = RunResult("answer_by_name", "social", URL, 0, "tag", turns=1)
    _read_recording(tmp_path / "session.jsonl", result)
    assert result.turns == 1
    assert result.trims == 3

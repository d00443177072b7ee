"""The scripted oracle scores 100 %: every task can be done within its limits, and its checker
sees it done. The oracle is a SCRIPTED player served by the vLLM-dialect double (not a model): it
knows each task's answer. Everything else is real: the embedded flying-squid server, the players'
mineflayer clients, Emil's live session (startup checks, loop, context, trust guard, bot).

Before play, every run's world is read once: no task may score anything in the world as set up
(the checker fails honestly where its goal is not met, in the real world). One world and one
double for the module; each run has its own arena and its own Emil session.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from emil.bench.runner import BenchOptions, BenchWorld, RunResult
from emil.bench.tasks import SUITE, Task
from emil.testing.oracle import Oracle
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow

RESULTS: list[RunResult] = []


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle()


@pytest.fixture(scope="module")
async def bench(anyio_backend: str, oracle: Oracle, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[BenchWorld, str]]:
    options = BenchOptions(workdir=tmp_path_factory.mktemp("bench"), on_run_start=oracle.start_run)
    async with VLLMDouble(oracle, window=32768) as double, BenchWorld(options) as world:
        yield world, double.base_url


@pytest.mark.timeout(150)
@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
async def test_the_oracle_does_every_task(task: Task, bench: tuple[BenchWorld, str], oracle: Oracle) -> None:
    world, url = bench
    started = time.monotonic()
    r = await world.play(task, url, "auto", 0)
    RESULTS.append(r)
    print(f"{task.id}: {r.wall_s} s wall, {r.game_s} s of play, {r.turns} turns, trims {r.trims}")
    assert r.score_before == 0.0, f"{task.id}: the world as set up already scores {r.score_before}"
    assert r.success, f"{task.id}: {r.reason}: {r.detail} (steps {r.met}; {r.goal_reasons}; actions {r.actions})"
    assert r.game_s <= task.limit_s and time.monotonic() - started < task.limit_s + 60
    assert r.tool_calls and r.invalid_calls == 0
    assert not oracle.lines, f"lines the oracle never saw answered: {oracle.lines}"
    assert r.prompt_tokens > 0 and r.completion_tokens > 0  # the counts come from the server's usage
    if task.kind == "memory":
        assert r.trims >= 1, "the memory task's prompt was never trimmed before the question"


async def test_the_recordings_are_kept(bench: tuple[BenchWorld, str]) -> None:
    world, _ = bench
    assert RESULTS, "no run played"
    assert all((Path(world.options.workdir) / f"{r.task}-{r.run}-{r.tag}" / "session.jsonl").exists() for r in RESULTS)

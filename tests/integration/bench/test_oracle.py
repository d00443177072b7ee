"""The scripted oracle scores 100 %: every task can be done within its limits, and its checker
sees it done. The oracle is a SCRIPTED player served by the vLLM-dialect double (not a model): it
knows each task's answer. Everything else is real: the embedded flying-squid server, the players'
mineflayer clients, Emil's live session (startup checks, loop, context, trust guard, bot).

Before play, every run's world is read once: no task may score anything in the world as set up
(the checker fails honestly where its goal is not met, in the real world). One world and one
double for the whole suite (one test: the world's clients live in its own task group); each run
has its own arena and its own Emil session.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from emil.bench.figures import figures, format_table
from emil.bench.runner import BenchOptions, BenchWorld
from emil.bench.tasks import SUITE
from emil.testing.oracle import Oracle
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1500)
async def test_the_oracle_does_every_task(tmp_path: Path) -> None:
    oracle = Oracle()
    options = BenchOptions(workdir=tmp_path, on_run_start=oracle.start_run)
    problems: list[str] = []
    results = []
    async with VLLMDouble(oracle, window=32768) as double, BenchWorld(options) as world:
        for task in SUITE:
            started = time.monotonic()
            r = await world.play(task, double.base_url, "auto", 0)
            results.append(r)
            print(f"{task.id}: {r.wall_s} s wall, {r.game_s} s of play, {r.turns} turns, trims {r.trims}", flush=True)
            if r.score_before != 0.0:
                problems.append(f"{task.id}: the world as set up already scores {r.score_before}")
            if not r.success:
                problems.append(f"{task.id}: {r.reason}: {r.detail} (steps {r.met}; {r.goal_reasons}; actions {r.actions})")
                continue
            if not (r.game_s <= task.limit_s and time.monotonic() - started < task.limit_s + 150):
                problems.append(f"{task.id}: over its limit ({r.game_s} s of play, {r.wall_s} s in all)")
            if not r.tool_calls or r.invalid_calls:
                problems.append(f"{task.id}: {r.tool_calls} calls, {r.invalid_calls} invalid")
            if oracle.lines:
                problems.append(f"{task.id}: lines the oracle never saw: {oracle.lines}")
            if not (r.prompt_tokens > 0 and r.completion_tokens > 0):  # the server's usage was read
                problems.append(f"{task.id}: no token counts")
            if task.kind == "memory" and r.trims < 1:
                problems.append(f"{task.id}: the prompt was never trimmed before the question")
            if not (tmp_path / f"{r.task}-{r.run}-{r.tag}" / "session.jsonl").exists():
                problems.append(f"{task.id}: no recording")
    print(format_table(figures(results)))
    assert not problems, "\n".join(problems)

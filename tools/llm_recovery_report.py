"""Print how overflow recovery behaves for each vLLM wording, against the vLLM-dialect DOUBLE.

Window 8192, output 1024; Emil's prediction is the 4-chars/token heuristic while the double counts
2.6 chars/token (the miscalibration of the field notes). For each wording: the prompt sizes the
server received and the limits the policy asked the assembler for.

    /work/venv/bin/python tools/llm_recovery_report.py
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.llm.client import OpenAIClient
from emil.llm.recovery import complete_with_recovery
from emil.llm.recovery_steps import RecoveryEvent
from emil.testing.brains import fixed_reply
from emil.testing.script import Reply
from emil.testing.vllm_double import VLLMDouble
from emil.testing.vllm_wordings import WORDINGS, Wording
from tests.integration.llm.conftest import Assembler, server_counter

W, M = 8192, 1024
LONG = Reply(content="fine, " * 300, completion_tokens=M)


async def _run(wording: Wording, budget: int, exact_count: bool = False) -> None:
    assemble = Assembler(200, budget=budget, output=M)
    events: list[RecoveryEvent] = []
    async with (
        VLLMDouble(fixed_reply(LONG), window=W, wording=wording, counter=server_counter) as double,
        OpenAIClient(double.base_url) as llm,
    ):
        await llm.discover()
        await complete_with_recovery(
            llm, assemble, window=W, on_event=events.append,
            count_exact=llm.count_prompt_tokens if exact_count else None,
        )
    families = sorted({e.family or "" for e in events if e.kind == "overflow"})
    sizes = " -> ".join(str(s) for s in double.prompt_sizes)
    print(f"{wording:12s} budget {budget:5d} count_exact {exact_count!s:5s} "
          f"server prompts {sizes:24s} limits {assemble.limits} {families}")


async def main() -> None:
    for wording in WORDINGS:
        await _run(wording, W - M)
    await _run("clamp", 4900)
    await _run("at_least", W - M, exact_count=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)  # the policy logs each overflow at WARNING
    anyio.run(main)

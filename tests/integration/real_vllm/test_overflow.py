"""A real overflow 400 from the real vLLM, parsed, recovered from with a smaller prompt, recorded.

The server is right about sizes, so Emil is made wrong on purpose. The persona is long (an
operator's lore section, about 6,000 tokens) and a player chats in katakana, a few lines at a
time, until Emil's prompt is about 13,500-14,300 tokens; so far Emil counts exactly. Then its
token counter starts counting katakana at 60% of its real size, and a flood of ten-odd lines
arrives, which Emil takes in one turn: the real prompt is past the served window of 16,384
while Emil believes it is under its budget. The server refuses it (HTTP 400, its own wording,
the prompt's size only as a lower bound); Emil reads the window from the message, asks
/tokenize for the exact size, widens its margin and sends a strictly smaller prompt (older
history dropped; the current turn's opening is pinned), which the server answers. The
recording shows the overflow, the retry and a turn that did not fail; the next turn fits.

(Usage after every answer recalibrates Emil, and blocks already counted keep their count, so an
undercount that grows a little per turn is absorbed without any overflow: only a jump within
one turn gets past it, as a new, miscounted kind of text arriving at once does.)
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from emil.model.family import family_by_name
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    EventRecord,
    OverflowRecord,
    RecoveryRecord,
    RequestRecord,
    TurnRecord,
)
from emil.serving.cpu_vllm import CpuVLLMServer
from tests.integration.agent.services import running_world

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
KATAKANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲン"
LORE_LINE = (
    "The village of Oakhollow keeps its granary by the river; the miller, the smith and the "
    "shepherd meet at dusk by the well to trade news of creepers, wolves and lost sheep.\n"
)


WINDOW = 16384
LINE_TOKENS = 240


def _katakana_line(i: int) -> str:
    """A chat line of 250 katakana (240 real tokens), different for every ``i``."""
    return "".join(KATAKANA[(i * 7 + k * k) % len(KATAKANA)] for k in range(250))


def _long_persona(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    shutil.copytree(PROMPTS, folder)
    persona = folder / "persona.md.j2"
    lore = "\n## Lore of the village\n" + LORE_LINE * 150
    persona.write_text(persona.read_text(encoding="utf-8") + lore, encoding="utf-8")
    return folder


@pytest.mark.timeout(420, func_only=True)
async def test_a_real_overflow_is_recovered_with_a_smaller_prompt_and_recorded(
    real_vllm: CpuVLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter: Any = family_by_name("qwen3").tokenizer()  # the instance Emil's session counts with
    exact = counter.count

    def wrong_on_purpose(text: str) -> int:
        real: int = exact(text)
        return int(real * 0.6) if KATAKANA[0] in text else real

    async with running_world(
        tmp_path, None, endpoint=real_vllm.base_url, output_reserve=16,
        prompts_dir=_long_persona(tmp_path), chat_debounce_s=3.0, observation_cap_tokens=8000,
    ) as world:
        sent = 0

        async def burst(lines: int) -> None:
            """``lines`` lines of katakana at once; returns when Emil has answered them all."""
            nonlocal sent
            for _ in range(lines):
                await world.say(_katakana_line(sent))
                sent += 1

            def settled() -> bool:
                records = world.records()
                heard = sum(
                    isinstance(r, EventRecord) and r.event.get("kind") == "chat"
                    and r.event.get("sender") == "alex" for r in records
                )
                return heard >= sent and isinstance(records[-1], TurnRecord)

            await world.wait_for(f"{sent} lines answered", settled, within=120)

        def last_prompt() -> int:
            answers = [r for r in world.records() if isinstance(r, CompletionRecord)]
            return answers[-1].prompt_tokens or 0 if answers else 0

        while last_prompt() < 13_500:
            await burst(3)
        exact_so_far = last_prompt()
        flood = math.ceil((WINDOW + 200 - exact_so_far) / LINE_TOKENS)
        believed = exact_so_far + 0.6 * flood * LINE_TOKENS + 150
        assert believed < WINDOW - 16 - 256, (exact_so_far, flood)  # the design's premise
        monkeypatch.setattr(counter, "count", wrong_on_purpose)
        await burst(flood)
        turns = sum(isinstance(r, TurnRecord) for r in world.records())
        await world.say("are you still there?")
        await world.wait_for(
            "a turn after the recovery",
            lambda: sum(isinstance(r, TurnRecord) for r in world.records()) > turns,
            within=90,
        )
        await world.stop_agent()
        records = world.records()
    monkeypatch.undo()

    overflows = [r for r in records if isinstance(r, OverflowRecord)]
    assert overflows, "the flood did not overflow the real server"
    overflow = overflows[0]
    assert overflow.window == real_vllm.options.max_model_len == WINDOW
    assert overflow.prompt_tokens is not None and overflow.prompt_tokens > overflow.window
    # vLLM 0.32 words it as 0.33 does ("...your prompt contains at least N input tokens, which
    # exceeds this limit even without any output tokens"), N being where it stopped counting
    assert overflow.message == "v0.33-prompt-alone" and overflow.prompt_is_lower_bound
    turn = overflow.turn
    requests = [r for r in records if isinstance(r, RequestRecord) and r.turn == turn]
    answers = [r for r in records if isinstance(r, CompletionRecord) and r.turn == turn]
    retries = [r for r in records if isinstance(r, RecoveryRecord) and r.turn == turn]
    assert retries and retries[0].limit is not None
    first, retried = requests[0], requests[-1]
    assert first.attempt == 0 and retried.attempt >= 1
    assert retried.predicted_tokens is not None and first.predicted_tokens is not None
    assert retried.predicted_tokens < first.predicted_tokens
    assert retried.limit is not None and retried.predicted_tokens <= retried.limit
    # The server's own count of the prompt that was answered: strictly smaller, and it fit.
    (answer,) = answers
    assert answer.prompt_tokens is not None
    assert answer.prompt_tokens < overflow.prompt_tokens
    assert answer.prompt_tokens < overflow.window
    (summary,) = [r for r in records if isinstance(r, TurnRecord) and r.turn == turn]
    assert summary.overflow_recoveries == 1 and not summary.failed
    assert not [r for r in records if isinstance(r, ErrorRecord)]

"""A live session with a real trained model as Emil: the embedded world, a real player bot.

The player asks; the model's tool calls come back through vLLM's hermes parser (with
``tool_choice`` "required", vLLM's structured outputs), Emil's validation, the trust guard and
the bot into the world, and the check reads the world: what the player's own bot heard Emil
say in chat, and where Emil's body is. Every request of the session, whose history holds the
model's own tool calls and their results, must be predicted exactly: Emil's count equals the
server's ``usage.prompt_tokens``, counted both ways Emil can count a model of no shipped
family: with the served model's own files (``tokenizer`` = the model directory) and, with
nothing set, with the server's ``/tokenize``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from emil.recording import (
    CompletionRecord,
    HeaderRecord,
    Record,
    RequestRecord,
    ToolResultRecord,
    TurnRecord,
)
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.serving.real_model import default_model_dir
from tests.integration.agent.services import World, running_world

SETTINGS: dict[str, Any] = {
    "tool_choice": "required",
    "temperature": 0.0,
    "output_reserve": 256,  # the window is 8,192 tokens; Emil's prompt starts near 3,900
    "step_limit": 3,  # a small model that never waits still ends its turn soon
    "summary_max_tokens": 0,
}


def _pairs(records: list[Record]) -> list[tuple[RequestRecord, CompletionRecord]]:
    """Each completion with the request it answers (the last attempt of its turn and step)."""
    sent = {(r.turn, r.step): r for r in records if isinstance(r, RequestRecord)}
    return [(sent[(r.turn, r.step)], r) for r in records if isinstance(r, CompletionRecord)]


def _miscounted(records: list[Record]) -> list[tuple[int, int, int | None, int | None]]:
    return [
        (q.turn, q.step, q.predicted_tokens, a.prompt_tokens)
        for q, a in _pairs(records)
        if q.predicted_tokens != a.prompt_tokens
    ]


def _family(records: list[Record]) -> str | None:
    return next(r.model_family for r in records if isinstance(r, HeaderRecord))


async def _distance(world: World, name: str) -> float | None:
    """How far the player's own bot sees ``name`` (None: not in sight)."""
    snap = await world.player.snapshot()
    for p in snap.players:
        if p.get("name") == name and isinstance(p.get("distance"), int | float):
            return float(p["distance"])
    return None


async def _turns(world: World, lines: list[str], *, within: float) -> None:
    def turns() -> int:
        return sum(isinstance(r, TurnRecord) for r in world.records())

    for i, line in enumerate(lines, start=1):
        await world.say(line)
        await world.wait_for(f"turn {i}", lambda i=i: turns() >= i, within=within)


async def test_the_model_answers_the_player_in_the_world_and_every_request_is_counted_exactly(
    real_model: CpuVLLMServer, tmp_path: Path
) -> None:
    async with running_world(
        tmp_path, None, endpoint=real_model.base_url, tokenizer=str(default_model_dir()), **SETTINGS
    ) as world:
        start = await _distance(world, "Emil")
        await _turns(world, ["hi Emil! I'm alex, say hello to me", "Emil, come to me please"], within=120)
        with anyio.move_on_after(10):  # what the last turn set off: chat delivery, a walk
            while not world.heard:  # noqa: ASYNC110 - the listener fills it
                await anyio.sleep(0.2)
        end = await _distance(world, "Emil")
        await world.stop_agent()
        records = world.records()

    results = [r for r in records if isinstance(r, ToolResultRecord) and r.step > 0]
    acted = [r for r in results if r.ok and r.name != "wait"]
    print("calls:", [(r.name, r.arguments, r.ok, r.rule, r.text[:60]) for r in results])
    print("heard:", world.heard, "distance:", start, "->", end)
    # The model's calls reached the world: the player's own bot heard Emil, or Emil moved.
    moved = start is not None and end is not None and end < start - 1
    assert acted and (world.heard or moved), (results, world.heard, start, end)
    assert all(r.rule for r in acted), acted  # every call that acted passed the guard's table

    assert _family(records) == "model-dir"  # counted with the model's own tokenizer and template
    pairs = _pairs(records)
    with_history = [q for q, _ in pairs if q.turn > 1 or q.step > 1]
    assert with_history, "no request carried the model's own calls back"
    assert not _miscounted(records), f"predicted != server: {_miscounted(records)} of {len(pairs)}"


async def test_counted_by_the_servers_tokenize_when_nothing_names_the_model(
    real_model: CpuVLLMServer, tmp_path: Path
) -> None:
    async with running_world(tmp_path, None, endpoint=real_model.base_url, **SETTINGS) as world:
        await _turns(world, ["alex here. Emil, what do you have?", "thanks Emil"], within=100)
        await world.stop_agent()
        records = world.records()
    assert _family(records) == "server"
    pairs = _pairs(records)
    # a call (a wait too), then a request whose history holds it
    assert len(pairs) >= 2 and any(c.tool_calls for _, c in pairs[:-1]), [type(r).__name__ for r in records]
    assert not _miscounted(records), f"predicted != server: {_miscounted(records)} of {len(pairs)}"

"""Record a session with the real agent loop and context manager (test helper).

The world and the model are doubles (named so): a world double that plays a list of game
events, one turn at a time, and answers tool calls with fixed JSON; a scripted completer that
looks around on every observation and then answers in text. Everything between them is
today's code: perception, the agent loop, the context manager with its trim ladder and the
recorder, so replaying the file must rebuild every request exactly.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from emil.agent.context_port import ManagedContext
from emil.agent.loop import Agent
from emil.config import Settings
from emil.context.budget import Budget
from emil.context.manager import ContextManager
from emil.exceptions import ServerFault
from emil.llm.types import ChatRequest, Completion, ToolCall, Usage
from emil.recording import HeaderRecord, Recorder
from emil.world.events import Chat, GameEvent, ItemCollected
from emil.world.port import TurnContext
from emil.world.tool import Outcome
from tests.unit.offline.crafted import LOOK_AND_SAY_TOOLS

SYSTEM = "You are Emil, a friendly villager on this Minecraft server. Use tools for actions."
TOOLS = LOOK_AND_SAY_TOOLS


def events(n: int, start: float = 1_780_000_000.0) -> list[GameEvent]:
    """n turn-starting events, 30 s of game time apart (urgent chat and plain item pickups)."""
    out: list[GameEvent] = []
    for i in range(n):
        t = start + 30.0 * i
        if i % 2 == 0:
            out.append(Chat(t=t, sender="alex", text=f"Emil, what do you see? ({i})"))
        else:
            out.append(ItemCollected(t=t, item="oak_log", count=i))
    return out


class PlayedWorldDouble:
    """A world double: plays events one turn at a time; tool results are fixed JSON."""

    def __init__(self, evs: list[GameEvent], turn_done: Callable[[], int]) -> None:
        self._events = evs
        self._turn_done = turn_done

    async def events(self) -> AsyncIterator[GameEvent]:
        for index, event in enumerate(self._events):
            # The agent exposes no turn-ended event; poll its stats (a test double, 5 ms steps).
            while self._turn_done() < index:  # noqa: ASYNC110
                await anyio.sleep(0.005)
            yield event
        while self._turn_done() < len(self._events):  # noqa: ASYNC110
            await anyio.sleep(0.005)

    async def snapshot(self) -> Mapping[str, Any]:
        return {"position": [10, 64, -3], "health": 20.0, "food": 18.0}

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return ()

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        if call.name == "look_around":
            blocks = [{"name": "oak_log", "pos": [i, 64, -i], "count": i + 1} for i in range(40)]
            return Outcome(True, json.dumps({"ok": True, "blocks": blocks}), elapsed_ms=12.0)
        return Outcome(True, json.dumps({"ok": True}), elapsed_ms=3.0)

    async def abort(self) -> None:
        return None


def _brain(request: ChatRequest, n: int) -> Completion:
    last = request.messages[-1]
    usage = Usage(prompt_tokens=request.predicted_prompt_tokens or 0, completion_tokens=9)
    if last["role"] == "tool":
        return Completion(content=f"I see {len(last['content'])} bytes of world.", usage=usage)
    call = ToolCall(id=f"call_{n}", name="look_around", raw_arguments='{"radius": 8}', arguments={"radius": 8})
    return Completion(tool_calls=[call], reasoning="Let me look first.", usage=usage)


async def record_session(
    path: Path, *, turns: int = 8, window: int = 8192, output_reserve: int = 1024, prompt_budget: int = 4000,
    append: bool = False, unanswered: frozenset[int] = frozenset(),
) -> Path:
    """Run the real agent over ``turns`` events and write its recording to ``path`` (``append``:
    continue it, as ``recording_append`` does). The model calls numbered in ``unanswered``
    (1 = the first) get no answer: the server faults, and that turn fails after its request."""
    budget = Budget(window, output_reserve=output_reserve, margin=window - output_reserve - prompt_budget)
    manager = ContextManager("qwen3.6", budget, SYSTEM, TOOLS)
    context = ManagedContext(manager, SYSTEM, TOOLS)
    calls = 0

    async def completer(assemble: Callable[[int | None], ChatRequest], on_event: Callable[[Any], None]) -> Completion:
        nonlocal calls
        calls += 1
        request = assemble(None)
        if calls in unanswered:
            raise ServerFault("the LLM server answered 200 with html (a test's fault)", body="<html>")
        return _brain(request, calls)

    with Recorder(path, append=append) as recorder:
        recorder.write(
            HeaderRecord(
                model="Qwen/Qwen3.6-35B-A3B", tokenizer=manager.counter.name, window=window,
                output_reserve=output_reserve, prompt_budget=prompt_budget, system_prompt=SYSTEM,
                tools=TOOLS, bot_name="Emil", settings={"tokenizer": "auto"},
            )
        )
        agent: Agent
        world = PlayedWorldDouble(events(turns), lambda: sum(1 for t in agent.stats.turns if t.ended is not None))
        agent = Agent(
            world=world, context=context, completer=completer, recorder=recorder,
            settings=Settings(output_reserve=output_reserve, stream=False, preserve_thinking=False),
        )
        with anyio.fail_after(60):
            await agent.run()
    return path

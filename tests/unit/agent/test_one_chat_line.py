"""One chat line from the turn engine to the bot: the live stack of Emil's body, counted.

The live session stacks the body as the loop's action scope around memory around the body
(docs/architecture.md, "Emil's body"). This drives a real :class:`~emil.agent.loop.Agent` over
that stack (memory with a real store, the body with a real guard) with a bot double that, when
``say`` reaches it, notes the Python frames between :meth:`TurnEngine.dispatch` and itself.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import JsonValue

from emil.agent.loop import Agent
from emil.config import Settings
from emil.memory import Learner, MemoryStore, RememberingWorld
from emil.recording import Recorder
from emil.trust.ledger import Ledger
from emil.world.actions import BotWorld, validate_tool_call
from emil.world.events import Chat, GameEvent
from emil.world.guard import Guard
from emil.world.tool import ActionPolicy
from emil.world.wire import ActionResult, Snapshot
from tests.unit.agent.doubles import ContextDouble, answer, scripted_completer, tool

pytestmark = pytest.mark.anyio

LAYERS = ["_LiveWorld.run_tool", "RememberingWorld.run_tool", "BotWorld.run_tool", "_Chat.guarded"]
"""The chain docs/architecture.md states for a ``say``: four layers, each doing something."""


class _Bot:
    """A bot double: events pushed by the test; ``act`` notes the frames that led to it."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[GameEvent]
        self._recv: MemoryObjectReceiveStream[GameEvent]
        self.send, self._recv = anyio.create_memory_object_stream[GameEvent](8)
        self.chains: list[list[str]] = []
        self.said: list[JsonValue] = []

    @property
    def events(self) -> AsyncIterator[GameEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[GameEvent]:
        async for event in self._recv:
            yield event

    async def act(self, name: str, args: Mapping[str, JsonValue] | None = None, timeout: float = 60.0, *,  # noqa: ASYNC109
                  job: bool = False) -> ActionResult:
        names = [f.frame.f_code.co_qualname for f in inspect.stack()[1:]]
        below = names.index("TurnEngine.dispatch")
        self.chains.append(list(reversed(names[:below])))
        self.said.append((args or {}).get("text"))
        return ActionResult(ok=True, result={})

    async def snapshot(self) -> Snapshot:
        return Snapshot(connected=True, health=20.0, food=20)

    async def abort(self) -> None:
        return None

    def close(self) -> None:
        self.send.close()
        self._recv.close()


async def test_a_say_reaches_the_bot_through_four_layers(tmp_path: Path) -> None:
    bot = _Bot()
    try:
        await _one_turn(bot, tmp_path)
    finally:
        bot.close()
    assert bot.said == ["hello alex"]
    assert bot.chains == [LAYERS], bot.chains


async def _one_turn(bot: _Bot, tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path / "data")
    body = BotWorld(bot, ActionPolicy(), guard=Guard(Settings(), Ledger()))
    world = RememberingWorld(body, Learner(store))
    replies = [answer(validate_tool_call(tool("say", '{"text": "hello alex"}'))), answer(content="done")]
    completer, _ = scripted_completer(lambda request: replies.pop(0))
    with Recorder(tmp_path / "rec.jsonl") as recorder:
        agent = Agent(world=world, context=ContextDouble(), completer=completer, recorder=recorder,
                      settings=Settings(chat_debounce_s=0.0))
        await bot.send.send(Chat(sender="alex", text="Emil, say hello"))
        with anyio.fail_after(10):
            await agent.run(max_turns=1)
    store.close()

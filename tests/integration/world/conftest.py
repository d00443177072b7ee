"""Shared fixtures: one embedded server, Emil and a player per test module (keeps CI fast)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest

from emil.config import Settings
from emil.llm.types import ToolCall
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.trust.ledger import Ledger
from emil.world.actions import BotWorld
from emil.world.bridge import Bot
from emil.world.events import GameEvent
from emil.world.guard import Guard
from emil.world.port import TurnContext
from emil.world.setup import ensure_js_deps
from emil.world.tool import ActionPolicy, Outcome
from emil.world.wire import BotSettings


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def js_deps() -> None:
    ensure_js_deps(progress=True)


@pytest.fixture(scope="module")
async def server(anyio_backend: str) -> AsyncIterator[EmbeddedServer]:
    async with EmbeddedServer() as srv:
        yield srv


OPERATORS = frozenset({"Alex"})
"""The modules' operator: Alex, the player bot. Other names (Steve) ask as ordinary players."""

_WORLDS: dict[int, BotWorld] = {}


@pytest.fixture(scope="module")
async def emil(server: EmbeddedServer) -> AsyncIterator[Bot]:
    """The module's Emil, with ONE guard for the module as live play has (one per Emil, its
    ledger in memory here): the guard sees every event as it arrives, as the live loop's world
    port does, so it remembers the chests Emil placed; :func:`act` sends calls through it."""
    guard = Guard(Settings(operators=tuple(sorted(OPERATORS))), Ledger())
    async with Bot.connect(BotSettings(port=server.port, operators=OPERATORS)) as bot:
        emit = bot._emit

        def observed(event: GameEvent) -> None:
            guard.observe(event)
            emit(event)

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bot, "_emit", observed)
            _WORLDS[id(bot)] = BotWorld(bot, ActionPolicy(settings=guard.settings), guard=guard)
            try:
                yield bot
            finally:
                _WORLDS.pop(id(bot), None)


def guard_of(emil: Bot) -> Guard:
    """The module Emil's guard (its ledger, its chat caps)."""
    guard = _WORLDS[id(emil)].guard
    assert guard is not None
    return guard


async def act(emil: Bot, call: ToolCall, *requesters: str) -> Outcome:
    """One tool call as one turn of the live loop: the world port's snapshot (the guard squares
    its ledger with the inventory), the turn begun on these players' words (none: Emil acts on
    its own), the call through the module's one guard."""
    world = _WORLDS[id(emil)]
    await world.snapshot()
    turn = TurnContext.of(*requesters, limit_s=120.0)
    await world.begin_turn(turn)
    return await world.run_tool(call, turn)


@pytest.fixture(scope="module")
async def alex(server: EmbeddedServer, emil: Bot) -> AsyncIterator[PlayerBot]:
    async with PlayerBot(server.port, "Alex") as player:
        yield player


Y = 5
"""The superflat world's standing height (ground blocks at y=4)."""


def tool(name: str, **arguments: Any) -> ToolCall:
    """A model's tool call, as the agent loop would hand it to ``dispatch``."""
    return ToolCall(id="t", name=name, raw_arguments=json.dumps(arguments), arguments=arguments)


async def place(
    server: EmbeddedServer, emil: Bot, alex: PlayerBot, e: tuple[float, float], a: tuple[float, float]
) -> None:
    """Teleport Emil and Alex, heal and feed both, clear queued events (once both clients see it
    done and no reflex of Emil's is still running).

    The reflexes matter: /heal sends health 20 before food 20, so a hungry Emil left by the last
    test starts eating on the first packet; his eating (equip, consume) then moves items while
    this test runs, e.g. merges a /give of the same food into no net change (no item_collected).
    So does a fight the last test left: a blow the server handled after the teleport knocks the
    player off his spot (seen: Alex 2.8 blocks off after a defend reflex fought him), so a player
    found off his spot is sent there again.
    """
    await emil.act("stop", {})
    await alex.do("chat", text=f"/tp Emil {e[0]} {Y} {e[1]}")
    await alex.do("chat", text=f"/tp Alex {a[0]} {Y} {a[1]}")
    await server.command("heal Emil")
    await server.command("heal Alex")

    last: dict[str, Any] = {}
    sent_again = dict.fromkeys(("Emil", "Alex"), anyio.current_time())

    async def again(name: str, at: tuple[float, float]) -> None:
        now = anyio.current_time()
        if now - sent_again[name] >= 1.0:  # once a second at most: a teleport takes a moment
            sent_again[name] = now
            await alex.do("chat", text=f"/tp {name} {at[0]} {Y} {at[1]}")
            await server.command(f"heal {name}")

    async def settled() -> bool:
        snap = await emil.snapshot()
        mine = await alex.do("position")
        reflexes = (snap.model_extra or {}).get("reflexes") or {}
        last.update(emil=snap.position, health=snap.health, food=snap.food, reflexes=reflexes, job=snap.job, alex=mine,
                    alex_health=(await alex.do("health"))["health"])
        if not any(reflexes.values()):
            if not near(snap.position, e):
                await again("Emil", e)
            if not near(mine, a):
                await again("Alex", a)
        return (
            near(snap.position, e) and near(mine, a)
            and snap.health == 20 and snap.food == 20 and not any(reflexes.values())
            and last["alex_health"] == 20
        )

    try:
        await eventually(settled, timeout=15, what=f"Emil at {e} (fed, no reflex running) and Alex at {a}, both healed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {last}") from None
    drain(emil)


async def give_emil(server: EmbeddedServer, emil: Bot, item: str, count: int = 1) -> None:
    """``/give Emil <item> <count>`` and wait until his inventory holds them.

    The condition, not the item_collected event: that event is a diff of inventory totals
    coalesced over 150 ms, so any other change of the same item in that window (eating it,
    an equip's clicks) can merge the /give away. One test checks the event itself."""
    before = (await emil.snapshot()).inventory.get(item, 0)
    await server.command(f"give Emil {item} {count}")

    async def arrived() -> bool:
        return (await emil.snapshot()).inventory.get(item, 0) >= before + count

    await eventually(arrived, timeout=10, what=f"{count} {item} more in Emil's inventory (had {before})")


def near(position: dict[str, float] | None, at: tuple[float, float], within: float = 1.0) -> bool:
    """A position dict is within ``within`` blocks of ``at`` (x, z), on both axes."""
    return position is not None and abs(position["x"] - at[0]) < within and abs(position["z"] - at[1]) < within


async def next_event(bot: Bot, match: Callable[[Any], bool], timeout: float = 10.0) -> GameEvent:  # noqa: ASYNC109
    """The first event (from now on, skipping others) that matches; fails after ``timeout``."""
    with anyio.fail_after(timeout):
        async for event in bot.events:
            if match(event):
                return event
    raise AssertionError("event stream ended")


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0, what: str = "condition") -> None:  # noqa: ASYNC109
    """Poll a world condition (another client's view has no event to wait on) until it holds."""
    with anyio.move_on_after(timeout):
        while not await check():  # noqa: ASYNC110 - the condition lives in another process
            await anyio.sleep(0.1)
        return
    raise AssertionError(f"{what} did not hold within {timeout} s")


async def stays(check: Callable[[], Awaitable[bool]], window: float, what: str) -> None:
    """Check that a world condition holds all through ``window`` seconds (something must NOT
    happen: only a window can show that; a slow machine only makes it less sensitive)."""
    with anyio.move_on_after(window):
        while True:
            if not await check():
                raise AssertionError(f"{what} stopped holding within {window} s")
            await anyio.sleep(0.1)
    if not await check():
        raise AssertionError(f"{what} stopped holding at the end of {window} s")


def drain(bot: Bot) -> list[GameEvent]:
    """Everything already queued (so a test only sees events it caused)."""
    out = []
    while True:
        try:
            out.append(bot.events.receive_nowait())
        except anyio.WouldBlock:
            return out

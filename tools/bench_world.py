"""Benchmark the world bridge on the embedded server: event latency, action round trip, reflex.

    python3 tools/bench_world.py [--events 60] [--actions 60] [--reflex 15] [--mob 15] [--craft 10] [--smelt 3]

Prints milliseconds, median and p95:
- event latency: a server-side cause (a console whisper written to the server) to the GameEvent
  arriving in Python; also its last leg alone (JS emit time -> Python receive).
- action round trip: Bot.act("stop") wall time, and its overhead (wall time minus the JS
  action's own elapsed_ms); Bot.snapshot() wall time.
- reflex reaction: a real player's hit (sent by the second mineflayer bot) to that player's
  client seeing Emil's counter-swing (hit -> server -> Emil's reflex -> server -> player).
- mob reflex reaction: a summoned zombie's hit on Emil (its arm swing, sent by the server in the
  same tick as the damage) to Emil's counter-swing, both as the watching player's client sees
  them (zombie hit -> Emil's reflex -> server -> player).
- craft round trips: the craft tool through dispatch and the bridge, sticks in the 2x2 grid and a
  wooden pickaxe at a crafting table beside Emil (open the table, click, take, close).
- smelt round trip: the smelt tool, one raw_iron with coal in a furnace beside Emil, from the call
  to the ingot in the inventory; 200 server ticks (10 s) of it are the furnace's cooking time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_int
from emil.llm.types import ToolCall
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.world.actions import dispatch
from emil.world.bridge import Bot
from emil.world.events import Chat
from emil.world.wire import BotSettings


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"{name:<38} n={len(xs):<3} median {statistics.median(xs):7.2f} ms   p95 {p95:7.2f} ms"


async def drain(bot: Bot) -> None:
    while True:
        try:
            bot.events.receive_nowait()
        except anyio.WouldBlock:
            return


async def bench_events(server: EmbeddedServer, bot: Bot, n: int) -> tuple[list[float], list[float]]:
    total, last_leg = [], []
    for i in range(n):
        await drain(bot)
        token = f"ping{i}"
        t0 = time.time()
        await server.command(f"tell Emil {token}")
        with anyio.fail_after(5):
            async for ev in bot.events:
                if isinstance(ev, Chat) and ev.text == token:
                    t1 = time.time()
                    total.append((t1 - t0) * 1000)
                    last_leg.append((t1 - ev.t) * 1000)
                    break
        await anyio.sleep(0.02)
    return total, last_leg


async def bench_actions(bot: Bot, n: int) -> tuple[list[float], list[float], list[float]]:
    wall, overhead, snaps = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        res = await bot.act("stop", {})
        dt = (time.perf_counter() - t0) * 1000
        wall.append(dt)
        overhead.append(dt - res.elapsed_ms)
        t0 = time.perf_counter()
        await bot.snapshot()
        snaps.append((time.perf_counter() - t0) * 1000)
    return wall, overhead, snaps


async def bench_reflex(server: EmbeddedServer, bot: Bot, alex: PlayerBot, n: int) -> list[float]:
    out = []
    for _ in range(n):
        await bot.act("stop", {})
        await alex.do("chat", text="/tp Emil 0 5 0")
        await alex.do("chat", text="/tp Alex 2 5 0")
        await server.command("heal Emil")
        await server.command("heal Alex")
        await anyio.sleep(1.0)
        alex.events.clear()
        hit = (await alex.do("attack", name="Emil"))["t"]
        with anyio.fail_after(5):
            while True:
                swings = [e["t"] for e in alex.events if e["event"] == "swing" and e.get("name") == "Emil"]
                if swings:
                    out.append((swings[0] - hit) * 1000)
                    break
                await anyio.sleep(0.01)
    await bot.act("stop", {})
    return out


async def bench_mob_reflex(server: EmbeddedServer, bot: Bot, alex: PlayerBot, n: int) -> list[float]:
    out = []
    for _ in range(n):
        await bot.act("stop", {})
        await server.command("kill @e[type=zombie]")
        await alex.do("chat", text="/tp Emil 0.5 5 0.5")
        await alex.do("chat", text="/tp Alex -12.5 5 0.5")  # watching, never nearer than Emil
        await server.command("heal Emil")
        await anyio.sleep(0.8)
        alex.events.clear()
        await server.command("summon zombie 3 5 0.5")
        with anyio.fail_after(10):
            while True:
                hits = [e["t"] for e in alex.events if e["event"] == "swing" and e.get("name") == "zombie"]
                swings = [e["t"] for e in alex.events if e["event"] == "swing" and e.get("name") == "Emil"]
                after = [t for t in swings if hits and t >= hits[0]]
                if after:
                    out.append((after[0] - hits[0]) * 1000)
                    break
                await anyio.sleep(0.01)
    await bot.act("stop", {})
    await server.command("kill @e[type=zombie]")
    return out


async def _tool(bot: Bot, name: str, **arguments: object) -> float:
    """One tool call through dispatch, as the agent loop makes it; its wall time in ms."""
    call = ToolCall(id="b", name=name, raw_arguments=json.dumps(arguments), arguments=dict(arguments))
    t0 = time.perf_counter()
    out = await dispatch(bot, call)
    dt = (time.perf_counter() - t0) * 1000
    if not out.ok:
        raise SystemExit(f"bench_world: {name} failed: {out.text}")
    return dt


async def _stock(server: EmbeddedServer, bot: Bot, **items: int) -> None:
    await server.command("clear Emil")
    for item, count in items.items():
        await server.command(f"give Emil {item} {count}")
    with anyio.fail_after(10):
        while (await bot.snapshot()).inventory != items:  # noqa: ASYNC110 - the inventory lives in Node
            await anyio.sleep(0.05)


async def bench_craft(server: EmbeddedServer, bot: Bot, alex: PlayerBot, n: int) -> tuple[list[float], list[float]]:
    grid, table = [], []
    await bot.act("stop", {})
    await alex.do("chat", text="/tp Emil 0.5 5 -20.5")
    await anyio.sleep(1.0)
    await _stock(server, bot, crafting_table=1)
    await bot.act("place", {"item": "crafting_table", "x": 2, "y": 5, "z": -20}, timeout=20, job=True)
    for _ in range(n):
        await _stock(server, bot, oak_planks=2)
        grid.append(await _tool(bot, "craft", item="stick", count=4))
        await _stock(server, bot, oak_planks=3, stick=2)
        table.append(await _tool(bot, "craft", item="wooden_pickaxe"))
    return grid, table


async def bench_smelt(server: EmbeddedServer, bot: Bot, alex: PlayerBot, n: int) -> list[float]:
    out = []
    await bot.act("stop", {})
    await alex.do("chat", text="/tp Emil 0.5 5 20.5")
    await anyio.sleep(1.0)
    await _stock(server, bot, furnace=1)
    await bot.act("place", {"item": "furnace", "x": 2, "y": 5, "z": 20}, timeout=20, job=True)
    for _ in range(n):
        await _stock(server, bot, raw_iron=1, coal=1)
        out.append(await _tool(bot, "smelt", item="raw_iron", count=1, wait_s=30))
    return out


async def main(args: argparse.Namespace) -> None:
    async with (
        EmbeddedServer() as server,
        Bot.connect(BotSettings(port=server.port)) as bot,
        PlayerBot(server.port, "Alex") as alex,
    ):
        await anyio.sleep(1.0)
        ev_total, ev_leg = await bench_events(server, bot, args.events)
        wall, overhead, snaps = await bench_actions(bot, args.actions)
        reflex = await bench_reflex(server, bot, alex, args.reflex)
        mob = await bench_mob_reflex(server, bot, alex, args.mob)
        grid, table = await bench_craft(server, bot, alex, args.craft)
        smelt = await bench_smelt(server, bot, alex, args.smelt)
    print(summary("event latency (server cause -> Python)", ev_total))
    print(summary("  of which JS emit -> Python", ev_leg))
    print(summary("action round trip act('stop')", wall))
    print(summary("  overhead (minus JS elapsed)", overhead))
    print(summary("snapshot() round trip", snaps))
    print(summary("reflex: hit -> counter-swing seen", reflex))
    print(summary("mob: zombie hit -> counter-swing seen", mob))
    print(summary("craft tool: 4 sticks in the 2x2 grid", grid))
    print(summary("craft tool: pickaxe at a table", table))
    print(summary("smelt tool: 1 raw_iron (10 s cooking)", smelt))


if __name__ == "__main__":
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=positive_int, default=60)
    parser.add_argument("--actions", type=positive_int, default=60)
    parser.add_argument("--reflex", type=positive_int, default=15)
    parser.add_argument("--mob", type=positive_int, default=15)
    parser.add_argument("--craft", type=positive_int, default=10)
    parser.add_argument("--smelt", type=positive_int, default=3)
    anyio.run(main, parser.parse_args())

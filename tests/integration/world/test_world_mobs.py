"""Hostile mobs, the reflexes that answer them, and the sky, on the real embedded server.

A zombie is summoned by a console command; it is a server entity that every client sees, that
walks to the nearest survival player and hits through the server's damage path. Alex (a second,
plain mineflayer client) watches from a distance the zombie never picks over Emil.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import pytest

from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.world.bridge import Bot
from emil.world.events import Damage, HostileNearby, Reflex, TimeOfDay, Weather
from tests.integration.world.conftest import (
    Y,
    act,
    drain,
    eventually,
    give_emil,
    next_event,
    place,
    tool,
)

pytestmark = pytest.mark.slow


async def zombies(alex: PlayerBot) -> list[dict[str, Any]]:
    """The zombies Alex's client knows of."""
    return [e for e in await alex.do("entities") if e["name"] == "zombie"]


@pytest.fixture(autouse=True)
async def no_zombie_outlives_its_test(server: EmbeddedServer, alex: PlayerBot) -> AsyncIterator[None]:
    """A zombie left by a failed test would attack Emil in the next one."""
    yield
    await server.command("kill @e[type=zombie]")

    async def gone() -> bool:
        return not await zombies(alex)

    await eventually(gone, timeout=5, what="no zombie left")


async def test_a_summoned_zombie_reaches_clients_and_walks_to_emil(
    server: EmbeddedServer, emil: Bot, alex: PlayerBot
) -> None:
    await place(server, emil, alex, (0, 0), (-14, 0))
    await server.command(f"summon zombie 10.5 {Y} 0.5")
    ev = await next_event(emil, lambda e: isinstance(e, HostileNearby))
    assert isinstance(ev, HostileNearby) and ev.name == "zombie" and ev.distance <= 16
    seen = await zombies(alex)
    assert len(seen) == 1, seen

    async def close_to_emil() -> bool:
        z = await zombies(alex)
        return bool(z) and math.hypot(z[0]["x"] - 0.0, z[0]["z"] - 0.0) < 2.5

    # the walk is counted in server ticks, which stretch when the machine is loaded
    await eventually(close_to_emil, timeout=20, what="the zombie walks up to Emil")


async def test_a_zombie_attack_is_answered_by_the_defend_reflex(
    server: EmbeddedServer, emil: Bot, alex: PlayerBot
) -> None:
    await place(server, emil, alex, (0, 0), (-14, 0))
    await give_emil(server, emil, "iron_sword")
    assert (await emil.snapshot()).held == "iron_sword"
    await server.command(f"summon zombie 3.5 {Y} 0.5")
    dmg = await next_event(emil, lambda e: isinstance(e, Damage), timeout=10)
    assert isinstance(dmg, Damage) and dmg.attacker == "zombie" and dmg.amount > 0
    ref = await next_event(emil, lambda e: isinstance(e, Reflex) and e.reflex == "defend")
    assert isinstance(ref, Reflex) and "zombie" in ref.detail

    async def killed() -> bool:
        return not await zombies(alex)

    await eventually(killed, timeout=20, what="Emil kills the zombie")
    snap = await emil.snapshot()
    assert snap.health is not None and 0 < snap.health < 20


async def test_the_unstuck_reflex_fires_in_a_cage_and_the_goal_resumes(
    server: EmbeddedServer, emil: Bot, alex: PlayerBot
) -> None:
    x, z = 30, 30
    await place(server, emil, alex, (x + 0.5, z + 0.5), (x + 8.5, z + 0.5))
    # bedrock on all six sides: no path, nothing to dig, nothing to tower with
    cage = [(x, Y + 2, z)]
    cage += [(x + dx, y, z + dz) for y in (Y, Y + 1) for dx, dz in ((1, 0), (-1, 0), (0, 1), (0, -1))]
    cage += [(x, Y - 1, z)]  # the floor last: once Emil stands on bedrock, his client has the cage
    for bx, by, bz in cage:
        await server.command(f"setblock {bx} {by} {bz} bedrock")

    async def caged() -> bool:
        return (await emil.snapshot()).model_dump().get("standing_on") == "bedrock"

    await eventually(caged, what="the cage reaches Emil's client")
    out = await act(emil, tool("follow", player="Alex", range=2))
    assert out.ok, out.text
    ref = await next_event(emil, lambda e: isinstance(e, Reflex) and e.reflex == "unstuck", timeout=10)
    assert isinstance(ref, Reflex) and "no progress" in ref.detail
    for bx, by, bz in cage:
        if (by, bx) in ((Y, x + 1), (Y + 1, x + 1)):
            await server.command(f"setblock {bx} {by} {bz} air")  # open the side towards Alex

    async def reached() -> bool:
        p = (await emil.snapshot()).position
        return p is not None and math.hypot(p["x"] - (x + 8.5), p["z"] - (z + 0.5)) < 3.5

    await eventually(reached, timeout=15, what="Emil resumes following Alex")
    assert (await act(emil, tool("stop"))).ok


async def test_time_and_weather_changes_reach_emil(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await server.command("time set 1000")

    async def day() -> bool:
        t = (await emil.snapshot()).time_of_day
        return t is not None and 1000 <= t < 12000

    await eventually(day, what="the day reaches Emil")
    drain(emil)
    await server.command("time set 13000")
    ev = await next_event(emil, lambda e: isinstance(e, TimeOfDay))
    assert isinstance(ev, TimeOfDay) and ev.phase == "night" and 13000 <= ev.time_of_day < 13100
    await server.command("weather rain")
    ev = await next_event(emil, lambda e: isinstance(e, Weather))
    assert isinstance(ev, Weather) and ev.raining
    await server.command("weather clear")
    ev = await next_event(emil, lambda e: isinstance(e, Weather))
    assert isinstance(ev, Weather) and not ev.raining
    await server.command("time set 1000")
    ev = await next_event(emil, lambda e: isinstance(e, TimeOfDay))
    assert isinstance(ev, TimeOfDay) and ev.phase == "day"

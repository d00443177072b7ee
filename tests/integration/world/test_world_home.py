"""Beds, chests and building on the real embedded server: Emil's sleep, store, take and build.

Each tool runs through the module Emil's one guard, its tool class and the bridge (conftest's
``act``), as the agent loop runs it;
Alex, a second plain mineflayer client, checks the world with mineflayer's own APIs
(``bot.sleep``, ``bot.openContainer``, ``bot.dig``), so what Emil did is what the server holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.trust.ledger import chest_key
from emil.world.bridge import Bot
from tests.integration.world.conftest import Y, act, drain, eventually, guard_of, tool

pytestmark = pytest.mark.slow


async def stock(server: EmbeddedServer, emil: Bot, alex: PlayerBot, e: tuple[float, float], a: tuple[float, float],
                **items: int) -> None:
    """Emil and Alex on these spots, healed, Emil holding exactly these items."""
    await act(emil, tool("stop"))

    async def there(name: str, at: tuple[float, float]) -> bool:
        p = (await emil.snapshot()).position if name == "Emil" else await alex.do("position")
        return p is not None and abs(p["x"] - at[0]) < 1 and abs(p["z"] - at[1]) < 1

    for name, at in (("Emil", e), ("Alex", a)):
        await alex.do("chat", text=f"/tp {name} {at[0]} {Y} {at[1]}")
        await eventually(lambda: there(name, at), what=f"{name} at {at}")  # noqa: B023 - awaited here
    await server.command("clear Emil")
    await server.command("heal Emil")

    async def emptied() -> bool:
        snap = await emil.snapshot()
        return snap.inventory == {} and snap.health == 20

    await eventually(emptied, what="Emil's inventory cleared and health full")
    for item, count in items.items():
        await server.command(f"give Emil {item} {count}")

    async def arrived() -> bool:
        return (await emil.snapshot()).inventory == items

    await eventually(arrived, what=f"Emil holds {items}")
    drain(emil)


@pytest.fixture(autouse=True)
async def daytime_and_no_monsters(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> AsyncIterator[None]:
    """Each test starts in the morning with nobody asleep and nothing hostile about."""
    yield
    await server.command("kill @e[type=zombie]")
    if await alex.do("sleeping"):
        await alex.do("wake")
    await act(emil, tool("stop"))
    await server.command("time set 1000")


async def test_sleep_says_why_not(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (0.5, 20.5), (-18.5, 20.5))
    out = await act(emil, tool("sleep"))
    assert not out.ok and "it is day (time" in out.text and "only at night" in out.text
    await server.command("time set 13000")
    await eventually(lambda: _night(emil), what="night reaches Emil")
    out = await act(emil, tool("sleep"))
    assert not out.ok and "no bed within 32 blocks and none in the inventory" in out.text

    # a bed 18 blocks off, and a zombie within 8 blocks of it (going for Alex, who is nearer):
    # Emil refuses before walking anywhere
    await alex.do("look", yaw=0)  # mineflayer yaw 0 looks north: the head goes to z - 1
    await server.command("give Alex red_bed 1")
    await eventually(lambda: _holds(alex, "red_bed"), what="Alex holds a bed")
    await alex.do("place", item="red_bed", x=-18, y=Y, z=18)
    await eventually(lambda: _block(alex, -18, 17, "red_bed"), what="both halves of the bed")
    await server.command(f"summon zombie -12.5 {Y} 17.5")

    async def emil_sees_it() -> bool:
        return any(m["name"] == "zombie" for m in (await emil.snapshot()).mobs)

    await eventually(emil_sees_it, what="Emil sees the zombie")
    out = await act(emil, tool("sleep"))
    assert not out.ok and "cannot sleep with monsters nearby: zombie" in out.text, out.text
    # the server says so too, as vanilla does, to a client that asks it anyway
    await alex.do("use_block", x=-18, y=Y, z=17)
    await eventually(lambda: _heard(alex, "You may not rest now; there are monsters nearby"), what="the server's refusal")
    assert not await alex.do("sleeping")


async def test_the_night_passes_when_every_player_sleeps(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (20.5, 40.5), (30.5, 40.5), white_bed=1)
    await server.command("time set 14000")
    await eventually(lambda: _night(emil), what="night reaches Emil")
    # Emil's bed comes out of the inventory; Alex is awake, so the night goes on
    out = await act(emil, tool("sleep", wait_s=2))
    assert out.ok, out.text
    assert "(placed it there from the inventory)" in out.text and "still night (1 of 2 players asleep)" in out.text
    assert (await emil.snapshot()).sleeping
    assert "asleep in bed" in (await act(emil, tool("status"))).text
    # Alex lies down with mineflayer's own bot.sleep: now everybody sleeps, and after 100 ticks
    # the clock jumps to the morning and everybody wakes
    await alex.do("look", yaw=3.14159)  # south: the head goes to z + 1
    await server.command("give Alex white_bed 1")
    await eventually(lambda: _holds(alex, "white_bed"), what="Alex holds a bed")
    await alex.do("place", item="white_bed", x=30, y=Y, z=42)
    await eventually(lambda: _block(alex, 30, 43, "white_bed"), what="Alex's bed")
    assert await alex.do("sleep", x=30, y=Y, z=42)
    out = await act(emil, tool("sleep", wait_s=20))
    assert out.ok and out.text.startswith("slept in bed and woke up in the morning"), out.text
    morning = (await emil.snapshot()).time_of_day
    assert morning is not None and morning < 1000
    assert not await alex.do("sleeping") and not (await emil.snapshot()).sleeping


async def test_a_wake_by_night_is_no_morning(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    """Hurt in bed, Emil wakes at night: the tool says the clock it saw, not a morning."""
    await stock(server, emil, alex, (20.5, 36.5), (0.5, 36.5))  # Emil's bed from the last test is near
    await server.command("time set 14000")
    await eventually(lambda: _night(emil), what="night reaches Emil")
    result: dict[str, Any] = {}

    async def run() -> None:
        result["out"] = await act(emil, tool("sleep", wait_s=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)

        async def asleep() -> bool:
            return (await emil.snapshot()).sleeping

        await eventually(asleep, timeout=20, what="Emil asleep")
        await server.command("hurt Emil 1")
    out = result["out"]
    assert out.ok and "woke up while it was still night (time 1" in out.text, out.text
    assert "the night did not pass" in out.text and "morning" not in out.text
    assert not (await emil.snapshot()).sleeping


async def test_a_long_job_gets_emil_out_of_bed(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (20.5, 36.5), (0.5, 36.5))  # Emil's bed from the last test is near
    await server.command("time set 14000")
    await eventually(lambda: _night(emil), what="night reaches Emil")
    out = await act(emil, tool("sleep", wait_s=1))
    assert out.ok and "lying in the bed at" in out.text, out.text
    out = await act(emil, tool("go_to", x=14, y=Y, z=36, range=1))
    assert out.ok, out.text
    assert not (await emil.snapshot()).sleeping


async def test_store_and_take_say_what_was_not_there(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (-20.5, -20.5), (-24.5, -20.5), chest=1, cobblestone=20, dirt=5)
    out = await act(emil, tool("store", items={"cobblestone": 20}), "Steve")
    assert not out.ok and "no chest within 32 blocks" in out.text
    # Steve, an ordinary player, has Emil place a chest and use it: the module's one guard saw
    # Emil place it (its ledger remembers), so the chest is Emil's and anyone may have him use it
    assert (await act(emil, tool("place", item="chest", x=-22, y=Y, z=-22), "Steve")).ok
    assert guard_of(emil).ledger.chest_how(chest_key(-22, Y, -22)) == "emil"
    out = await act(emil, tool("store", items={"cobblestone": 20, "diamond": 1}), "Steve")
    assert out.ok and out.rule == "store.emil", (out.rule, out.text)
    assert out.text.startswith("stored 20 cobblestone in the chest at (-22, 5, -22)"), out.text
    assert "you did not have: 1 diamond" in out.text
    # another client opens the same chest with mineflayer's openContainer: the server kept it
    assert await alex.do("chest", x=-22, y=Y, z=-22) == {"cobblestone": 20}
    out = await act(emil, tool("take", items={"cobblestone": 5, "oak_log": 2}), "Steve")
    assert out.ok and out.rule == "take.emil", (out.rule, out.text)
    assert out.text.startswith("took 5 cobblestone from the chest at (-22, 5, -22)"), out.text
    assert "not in the chest: 2 oak_log" in out.text
    out = await act(emil, tool("take", items={"oak_log": 1}), "Steve")
    assert not out.ok and out.text.startswith("take failed: took nothing") and "not in the chest: 1 oak_log" in out.text
    assert (await emil.snapshot()).inventory == {"cobblestone": 5, "dirt": 5}
    assert await alex.do("chest", x=-22, y=Y, z=-22) == {"cobblestone": 15}
    # a chest under a solid block does not open (vanilla), and Emil says why
    await server.command("give Alex stone 1")
    await eventually(lambda: _holds(alex, "stone"), what="Alex holds stone")
    await alex.do("place", item="stone", x=-22, y=Y + 1, z=-22, sneak=True)  # sneaking: no chest window
    await eventually(lambda: _block(alex, -22, -22, "stone", y=Y + 1), what="the stone on the chest")
    out = await act(emil, tool("take", items={"cobblestone": 1}), "Steve")
    assert not out.ok and "cannot open: stone sits on it" in out.text
    # digging the chest drops what it held: item entities every client sees (or Alex, right
    # beside it, picks some up at once)
    await alex.do("chat", text="/tp Emil -20.5 5 -40.5")
    await alex.do("dig", x=-22, y=Y + 1, z=-22)
    before = await _loose_or_picked(alex)
    await alex.do("dig", x=-22, y=Y, z=-22)

    async def dropped() -> bool:
        return await _loose_or_picked(alex) - before >= 16  # 15 cobblestone and the chest itself

    await eventually(dropped, what="the chest's contents on the ground")


async def test_store_into_a_full_chest_and_take_into_a_full_inventory(
    server: EmbeddedServer, emil: Bot, alex: PlayerBot
) -> None:
    await stock(server, emil, alex, (-20.5, 20.5), (-30.5, 20.5), chest=1, dirt=28 * 64)
    assert (await act(emil, tool("place", item="chest", x=-22, y=Y, z=20), "Steve")).ok
    out = await act(emil, tool("store", items={"dirt": 28 * 64}), "Steve")
    assert out.ok, out.text
    assert out.text.startswith("stored 1728 dirt in the chest") and "did not fit (the chest is full): 64 dirt" in out.text
    out = await act(emil, tool("store", items={"dirt": 1}), "Steve")
    assert not out.ok and "did not fit (the chest is full): 1 dirt" in out.text
    await server.command("give Emil cobblestone 2240")  # 35 stacks: with the dirt, no slot is left
    await eventually(lambda: _counted(emil, "cobblestone", 2240), what="a full inventory")
    out = await act(emil, tool("take", items={"dirt": 10}), "Steve")
    assert not out.ok and "no room in your inventory for: 10 dirt" in out.text


async def test_build_a_pillar_and_a_shelter(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (40.5, -20.5), (46.5, -20.5), cobblestone=12)
    out = await act(emil, tool("build", blueprint="pillar", height=3, x=42, y=Y, z=-18))
    assert out.ok and out.text == "built a pillar of cobblestone at (42, 5, -18): placed 3", out.text
    for dy in range(3):
        await eventually(lambda: _block(alex, 42, -18, "cobblestone", y=Y + dy), what="the pillar")  # noqa: B023
    # a shelter takes 10 blocks; 9 are left: nothing is placed, and Emil says what is missing
    out = await act(emil, tool("build", blueprint="shelter"))
    assert not out.ok and "needs 10 cobblestone, you have 9: missing 1 cobblestone" in out.text
    await server.command("give Emil cobblestone 1")
    await eventually(lambda: _counted(emil, "cobblestone", 10), what="a tenth cobblestone")
    out = await act(emil, tool("build", blueprint="shelter"))
    assert out.ok and out.text == "built a shelter of cobblestone at (40, 5, -21): placed 10", out.text
    walls = [(41, Y, -21), (39, Y, -21), (40, Y, -20), (40, Y, -22), (41, Y + 1, -21), (39, Y + 1, -21),
             (40, Y + 1, -20), (40, Y + 1, -22), (41, Y + 2, -21), (40, Y + 2, -21)]
    for x, y, z in walls:
        await eventually(lambda: _block(alex, x, z, "cobblestone", y=y), what=f"the shelter block at {x} {y} {z}")  # noqa: B023
    out = await act(emil, tool("build", blueprint="pillar", block="oak_planks"))
    assert not out.ok and "needs 3 oak_planks, you have 0: missing 3 oak_planks" in out.text


async def test_build_is_abortable(server: EmbeddedServer, emil: Bot, alex: PlayerBot) -> None:
    await stock(server, emil, alex, (60.5, -40.5), (50.5, -40.5), dirt=10)
    result: dict[str, Any] = {}

    async def run() -> None:
        result["out"] = await act(emil, tool("build", blueprint="pillar", height=10, x=60, y=Y, z=-10))

    async def walking() -> bool:  # or already over: then its answer says why
        return "out" in result or (await emil.snapshot()).job == "build"

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await eventually(walking, what="the build under way")  # walking 30 blocks to the spot
        assert "out" not in result, f"the build ended before the stop: {result['out'].text}"
        assert (await act(emil, tool("stop"))).ok
    out = result["out"]
    assert not out.ok and "aborted" in out.text
    assert await alex.do("block", x=60, y=Y + 9, z=-10) != "dirt"  # not finished


async def _night(emil: Bot) -> bool:
    t = (await emil.snapshot()).time_of_day
    return t is not None and 12542 <= t <= 23459


async def _holds(player: PlayerBot, item: str) -> bool:
    return item in await player.do("inventory")


async def _counted(emil: Bot, item: str, n: int) -> bool:
    return (await emil.snapshot()).inventory.get(item) == n


async def _block(player: PlayerBot, x: int, z: int, name: str, *, y: int = Y) -> bool:
    return bool(await player.do("block", x=x, y=y, z=z) == name)


async def _heard(player: PlayerBot, text: str) -> bool:
    return any(text in m for m in player.messages())


async def _loose_or_picked(alex: PlayerBot) -> int:
    """Items on the ground by the chest at (-22, -22), plus the cobblestone and chests Alex holds."""
    held = await alex.do("inventory")
    return len(await _items_near(alex, -22, -22)) + held.get("cobblestone", 0) + held.get("chest", 0)


async def _items_near(player: PlayerBot, x: float, z: float) -> list[dict[str, Any]]:
    return [e for e in await player.do("entities") if e.get("name") == "item" and abs(e["x"] - x) < 4 and abs(e["z"] - z) < 4]

"""Crafting and smelting on the embedded server: mineflayer's own APIs, then Emil's tools.

A real mineflayer client (PlayerBot "Smith", driven over its JSON-lines bridge) crafts with
``bot.craft`` in its 2x2 grid and at a crafting table and smelts with ``bot.openFurnace``; the
server (flying-squid plus Emil's plugin) computes every result. Inventories are read as the
server sends them (``synced_inventory`` makes the server resend the whole window), so a result
that existed only in the client's prediction would fail these tests.

Emil's ``craft`` and ``smelt`` tools run through the module's one guard, the tool classes and the
bridge (conftest's ``act``), as the agent loop runs them, and Smith's client checks what they left in the world.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.world.bridge import Bot
from tests.integration.world.conftest import Y, act, drain, eventually, tool

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def smith(server: EmbeddedServer) -> AsyncIterator[PlayerBot]:
    async with PlayerBot(server.port, "Smith") as player:
        yield player


async def stock(server: EmbeddedServer, smith: PlayerBot, **items: int) -> None:
    """An empty inventory, then exactly these items, on the spot (0, 5, 0)."""
    await smith.do("chat", text="/tp Smith 0.5 5 0.5")
    await server.command("clear Smith")
    for item, count in items.items():
        await server.command(f"give Smith {item} {count}")

    async def arrived() -> bool:
        return bool(await smith.do("inventory") == items)

    await eventually(arrived, what=f"Smith holds {items}")


async def test_craft_in_the_inventory_grid(server: EmbeddedServer, smith: PlayerBot) -> None:
    await stock(server, smith, oak_log=2)
    await smith.do("craft", item="oak_planks", count=2)
    assert await smith.do("synced_inventory") == {"oak_planks": 8}
    await smith.do("craft", item="crafting_table", count=1)
    await smith.do("craft", item="stick", count=1)
    assert await smith.do("synced_inventory") == {"oak_planks": 2, "crafting_table": 1, "stick": 4}
    # the server really holds the crafted table: it lets Smith place it
    await smith.do("place", item="crafting_table", x=3, y=5, z=0)

    async def placed() -> bool:
        return bool(await smith.do("block", x=3, y=5, z=0) == "crafting_table")

    await eventually(placed, what="the crafted table stands")


async def test_craft_at_a_crafting_table(server: EmbeddedServer, smith: PlayerBot) -> None:
    await stock(server, smith, crafting_table=1, oak_planks=3, stick=2, cobblestone=8)
    await smith.do("place", item="crafting_table", x=-3, y=5, z=0)
    table = {"x": -3, "y": 5, "z": 0}
    out = await smith.do("craft", item="wooden_pickaxe", count=1, table=table)
    assert out["window_open"] is False  # mineflayer closed the table's window
    out = await smith.do("craft", item="furnace", count=1, table=table)
    assert await smith.do("synced_inventory") == {"wooden_pickaxe": 1, "furnace": 1}
    with pytest.raises(AssertionError, match="no recipe for wooden_pickaxe"):
        await smith.do("craft", item="wooden_pickaxe", count=1)  # a 3x3 recipe in the 2x2 grid


async def test_furnace_smelts_with_fuel_and_time(server: EmbeddedServer, smith: PlayerBot) -> None:
    await stock(server, smith, furnace=1, coal=2, raw_iron=1)
    await smith.do("place", item="furnace", x=0, y=5, z=3)
    out = await smith.do("smelt", x=0, y=5, z=3, input="raw_iron", fuel="coal", count=1, timeout_ms=40000, timeout=60)
    assert (out["output"], out["count"]) == ("iron_ingot", 1)
    # vanilla's window properties: a coal burns 1600 ticks, a smelt takes 200
    assert (out["total_fuel_ticks"], out["total_progress_ticks"]) == (1600, 200)
    assert out["fuel"] > 0 and out["progress"] > 0
    assert out["elapsed_ms"] >= 5000  # it cooks for 200 server ticks, not at once
    assert await smith.do("synced_inventory") == {"iron_ingot": 1, "coal": 1}


async def test_a_forged_click_creates_nothing(server: EmbeddedServer, smith: PlayerBot) -> None:
    await stock(server, smith, stick=1)
    await smith.do("forged_click", item="diamond", count=64)

    async def corrected() -> bool:
        return "diamond" not in await smith.do("inventory")

    await eventually(corrected, what="the server corrects the client's forged slot")
    assert await smith.do("synced_inventory") == {"stick": 1}


async def stock_emil(server: EmbeddedServer, emil: Bot, smith: PlayerBot, at: tuple[float, float], **items: int) -> None:
    """Emil on the spot ``at`` (its chunks loaded) with an empty inventory, then exactly these items."""
    await act(emil, tool("stop"))

    async def there() -> bool:
        p = (await emil.snapshot()).position
        return p is not None and abs(p["x"] - at[0]) < 1 and abs(p["z"] - at[1]) < 1

    for _ in range(3):  # a /tp racing a just-joined player's own spawn position can be lost
        await smith.do("chat", text=f"/tp Emil {at[0]} {Y} {at[1]}")
        with anyio.move_on_after(3):
            while not await there():  # noqa: ASYNC110 - the position lives in another process
                await anyio.sleep(0.1)
        if await there():
            break
    await server.command("clear Emil")

    async def emptied() -> bool:
        return (await emil.snapshot()).inventory == {}

    await eventually(emptied, what="Emil's inventory cleared")
    drain(emil)
    for item, count in items.items():
        await server.command(f"give Emil {item} {count}")

    async def arrived() -> bool:
        return await there() and (await emil.snapshot()).inventory == items

    snap = await emil.snapshot()
    await eventually(arrived, timeout=10, what=f"Emil at {at} holds {items} (was at {snap.position} with {snap.inventory})")


async def fails(emil: Bot, name: str, fragment: str, **arguments: Any) -> str:
    """The tool call fails, saying ``fragment``; its text."""
    out = await act(emil, tool(name, **arguments))
    assert not out.ok and fragment in out.text, out.text
    return out.text


async def test_craft_tool_mixes_planks_and_places_a_table(server: EmbeddedServer, emil: Bot, smith: PlayerBot) -> None:
    await stock_emil(server, emil, smith, (60.5, 0.5), oak_planks=2, birch_planks=1, stick=2, crafting_table=1)
    # two kinds of planks in one recipe (minecraft-data lists the tag one kind at a time), and a
    # 3x3 recipe with no table near: the table comes out of the inventory
    out = await act(emil, tool("craft", item="wooden_pickaxe"))
    assert out.ok, out.text
    assert out.text.startswith("crafted 1 wooden_pickaxe") and "(placed it there from the inventory)" in out.text
    assert isinstance(out.data, dict) and out.data["used"] == {"oak_planks": 2, "birch_planks": 1, "stick": 2}
    assert (await emil.snapshot()).inventory == {"wooden_pickaxe": 1}
    table = out.data["table"]

    async def table_stands() -> bool:
        return bool(await smith.do("block", x=table["x"], y=table["y"], z=table["z"]) == "crafting_table")

    await eventually(table_stands, what="Smith sees the table Emil placed")


async def test_craft_tool_counts_items_and_uses_the_2x2_grid(server: EmbeddedServer, emil: Bot, smith: PlayerBot) -> None:
    await stock_emil(server, emil, smith, (40.5, -40.5), oak_log=1)
    out = await act(emil, tool("craft", item="oak_planks", count=4))
    assert out.ok and out.text == "crafted 4 oak_planks from 1 oak_log", out.text
    out = await act(emil, tool("craft", item="stick", count=1))
    assert out.ok and out.text.startswith("crafted 4 stick (asked for 1; the recipe makes several at a time)"), out.text
    assert out.data is not None and out.data["table"] is None  # no table anywhere near: the 2x2 grid
    assert (await emil.snapshot()).inventory == {"oak_planks": 2, "stick": 4}


async def test_craft_tool_says_exactly_what_is_missing(server: EmbeddedServer, emil: Bot, smith: PlayerBot) -> None:
    await stock_emil(server, emil, smith, (40.5, -40.5), oak_planks=1, stick=1)
    await fails(emil, "craft", "missing 1 stick (have 1 of 2), 2 any planks (11 kinds) (have 1 of 3)", item="wooden_pickaxe")
    text = await fails(emil, "craft", "9 iron_nugget (have 0 of 9)", item="iron_ingot")
    assert "smelted from raw_iron" in text
    await fails(emil, "craft", "bedrock has no crafting recipe", item="bedrock")
    await fails(emil, "craft", "'no_such_thing' is not an item name", item="no_such_thing")
    # enough for a table recipe, but no table within 32 blocks and none carried
    await stock_emil(server, emil, smith, (-120.5, 0.5), oak_planks=3, stick=2)
    await fails(emil, "craft", "no crafting_table within 32 blocks and none in the inventory", item="wooden_pickaxe")
    assert (await emil.snapshot()).inventory == {"oak_planks": 3, "stick": 2}  # nothing was used


async def test_smelt_tool_waits_reports_what_still_cooks_and_collects_it(
    server: EmbeddedServer, emil: Bot, smith: PlayerBot
) -> None:
    await stock_emil(server, emil, smith, (40.5, 0.5), furnace=1, raw_iron=2, coal=1)
    # 200 server ticks an item: 12 s see one ingot, the second is still cooking
    out = await act(emil, tool("smelt", item="raw_iron", count=2, wait_s=12))
    assert out.ok, out.text
    assert out.text.startswith("got 1 iron_ingot from raw_iron (burned 1 coal) in the furnace at")
    assert "(placed it there from the inventory)" in out.text
    assert "1 raw_iron still cooking there" in out.text and "smelt again there to collect" in out.text
    out = await act(emil, tool("smelt", item="raw_iron", count=1, wait_s=20))
    assert out.ok and out.text.startswith("got 1 iron_ingot from raw_iron"), out.text
    assert (await emil.snapshot()).inventory == {"iron_ingot": 2}


async def test_smelt_tool_failures(server: EmbeddedServer, emil: Bot, smith: PlayerBot) -> None:
    await stock_emil(server, emil, smith, (40.5, 0.5), raw_iron=1)
    await fails(emil, "smelt", "no fuel in the inventory", item="raw_iron")  # the last test's furnace is near
    await fails(emil, "smelt", "stick cannot be smelted", item="stick")
    await fails(emil, "smelt", "iron_ingot is smelted from raw_iron", item="iron_ingot")
    await stock_emil(server, emil, smith, (-120.5, 0.5), raw_iron=1, coal=1)
    await fails(emil, "smelt", "no furnace within 32 blocks and none in the inventory", item="raw_iron")
    assert (await emil.snapshot()).inventory == {"raw_iron": 1, "coal": 1}

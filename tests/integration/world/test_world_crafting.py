"""Crafting and smelting on the embedded server with mineflayer's own APIs, unchanged.

A real mineflayer client (PlayerBot "Smith", driven over its JSON-lines bridge) crafts with
``bot.craft`` in its 2x2 grid and at a crafting table and smelts with ``bot.openFurnace``; the
server (flying-squid plus Emil's plugin) computes every result. Inventories are read as the
server sends them (``synced_inventory`` makes the server resend the whole window), so a result
that existed only in the client's prediction would fail these tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from emil.world.player import PlayerBot
from emil.world.server import EmbeddedServer
from tests.integration.world.conftest import eventually

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

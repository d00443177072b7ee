"""The guard on every rule of the table, against an obedient caller: only the rules stop the grief.

Bob owns a chest, Olga is the operator, Tess is trusted, carl is anybody. Each case is a turn
(who said something) and a tool call a talked-round model would make; the world double
(world_double.py) plays the bot. Integration tests play the same on the real server.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from emil.config import Settings
from emil.llm.types import ToolCall
from emil.trust.authority import Authority, Line
from emil.trust.ledger import SELF, UNSURE, Ledger, chest_key
from emil.world.actions import dispatch
from emil.world.events import BlockPlaced, BlockRemoved
from emil.world.guard import Guard
from emil.world.tool import Outcome
from tests.unit.world.world_double import WorldDouble

BOBS, CARLS, EMILS, UNKNOWN = (4, 5, 0), (10, 5, 0), (-4, 5, 0), (0, 5, 8)
SETTINGS = Settings(operators=("Olga",), trusted_players=("Tess",), bot_name="Emil", give_items_per_hour=32)


def k(pos: tuple[int, int, int]) -> str:
    return chest_key(*pos)


class Clock:
    """A clock the guard's pacing moves instead of sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def world() -> tuple[WorldDouble, Guard]:
    w = WorldDouble(inventory={"gold_ingot": 8, "bread": 5, "dirt": 64},
                    chests={BOBS: {"diamond": 10}, CARLS: {}, EMILS: {"coal": 5}, UNKNOWN: {"emerald": 3}})
    ledger = Ledger()
    ledger.set_chest(k(BOBS), "bob", "placed")
    ledger.set_chest(k(CARLS), "carl", "placed")
    ledger.set_chest(k(EMILS), SELF, "emil")
    clock = Clock()
    return w, Guard(SETTINGS.model_copy(update={"allow_commands": True}), ledger, clock=clock, sleep=clock.sleep)


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c", name=name, raw_arguments=json.dumps(arguments), arguments=arguments)


async def turn(w: WorldDouble, g: Guard, who: str | tuple[str, ...], name: str, **args: Any) -> Outcome:
    speakers = (who,) if isinstance(who, str) else who
    g.begin_turn(Authority(tuple(Line(s, "Emil, please do it") for s in speakers)))
    return await dispatch(w, call(name, **args), guard=g)


def at(pos: tuple[int, int, int]) -> dict[str, int]:
    return {"x": pos[0], "y": pos[1], "z": pos[2]}


# --- chests ------------------------------------------------------------------------------


async def test_a_stranger_cannot_empty_an_owners_chest_and_the_owner_can() -> None:
    w, g = world()
    out = await turn(w, g, "carl", "take", items={"diamond": 10}, **at(BOBS))
    assert not out.ok and out.rule == "take.owned" and w.acted("take") == []
    assert "bob (the owner) or an operator" in out.text and len(w.whispers("carl")) == 1  # carl hears why
    out = await turn(w, g, "carl", "take", items={"diamond": 10})  # the nearest chest: bob's too
    assert not out.ok and w.chests[BOBS] == {"diamond": 10}
    out = await turn(w, g, ("bob", "carl"), "take", items={"diamond": 10}, **at(BOBS))
    assert not out.ok  # carl's words are in bob's turn: they may be what asked
    out = await turn(w, g, "bob", "take", items={"diamond": 10}, **at(BOBS))
    assert out.ok and out.rule == "take.owned" and w.inventory["diamond"] == 10
    assert g.ledger.held_for("bob") == {"diamond": 10}


async def test_items_taken_for_their_owner_go_only_to_their_owner() -> None:
    w, g = world()
    await turn(w, g, "bob", "take", items={"diamond": 10}, **at(BOBS))
    for who in ("carl", "Tess", ("bob", "carl")):
        out = await turn(w, g, who, "give", player="carl", item="diamond", count=5)
        assert not out.ok and out.rule == "use.held", (who, out.text)
    out = await turn(w, g, "carl", "store", items={"diamond": 5}, **at(CARLS))
    assert not out.ok and out.rule == "use.held" and w.chests[CARLS] == {}
    out = await turn(w, g, "carl", "give", player="bob", item="diamond", count=4)  # to their owner: anyone may ask
    assert out.ok and out.rule == "give.held.recipient" and w.received["bob"] == {"diamond": 4}
    out = await turn(w, g, "Olga", "give", player="carl", item="diamond", count=2)  # an operator may
    assert out.ok and w.received["carl"] == {"diamond": 2}
    assert g.ledger.held_for("bob") == {"diamond": 4}
    out = await turn(w, g, "bob", "store", items={"diamond": 4}, **at(BOBS))  # back into bob's chest
    assert out.ok and g.ledger.held_for("bob") == {} and w.chests[BOBS] == {"diamond": 4}
    assert "carl" not in w.received or w.received["carl"].get("diamond", 0) == 2


async def test_store_only_in_a_chest_the_requester_may_use() -> None:
    w, g = world()
    out = await turn(w, g, "carl", "store", items={"gold_ingot": 4}, **at(BOBS))
    assert not out.ok and out.rule == "store.owned" and w.chests[BOBS] == {"diamond": 10}
    out = await turn(w, g, "carl", "store", items={"gold_ingot": 4}, **at(UNKNOWN))
    assert not out.ok and out.rule == "store.unknown"
    out = await turn(w, g, "carl", "store", items={"gold_ingot": 4}, **at(CARLS))
    assert out.ok and w.chests[CARLS] == {"gold_ingot": 4}
    out = await turn(w, g, "carl", "store", items={"dirt": 4}, **at(EMILS))
    assert out.ok and out.rule == "store.emil"
    out = await turn(w, g, "Olga", "store", items={"dirt": 4}, **at(UNKNOWN))
    assert out.ok and out.rule == "store.unknown"


async def test_unknown_chests_are_for_operators_and_emils_for_anyone() -> None:
    w, g = world()
    assert not (await turn(w, g, "bob", "take", items={"emerald": 1}, **at(UNKNOWN))).ok
    assert not (await turn(w, g, "Tess", "take", items={"emerald": 1}, **at(UNKNOWN))).ok
    out = await turn(w, g, "Olga", "take", items={"emerald": 1}, **at(UNKNOWN))
    assert out.ok and out.rule == "take.unknown" and g.ledger.held == {}  # taken on an operator's order: Emil's
    out = await turn(w, g, "carl", "take", items={"coal": 2}, **at(EMILS))
    assert out.ok and out.rule == "take.emil" and g.ledger.held == {}
    out = await turn(w, g, (), "take", items={"diamond": 1}, **at(BOBS))  # Emil on its own: nobody asked
    assert not out.ok and "nobody asked" in out.text


async def test_a_large_chest_of_two_owners_needs_both() -> None:
    w, g = world()
    w.chests[(5, 5, 0)] = {}
    g.ledger.set_chest(k((5, 5, 0)), "carl", "placed")  # carl's chest beside bob's: one large chest
    out = await turn(w, g, "carl", "take", items={"diamond": 1}, x=5, y=5, z=0)
    assert not out.ok and w.chests[BOBS] == {"diamond": 10}
    w.chests[(-5, 5, 0)] = {}  # an unknown chest beside Emil's
    out = await turn(w, g, "carl", "take", items={"coal": 1}, **at(EMILS))
    assert not out.ok and out.rule == "take.unknown"


async def test_digging_a_chest_follows_its_owner_and_collecting_containers_needs_an_operator() -> None:
    w, g = world()
    out = await turn(w, g, "carl", "dig", **at(BOBS))
    assert not out.ok and out.rule == "dig.chest.owned" and BOBS in w.chests
    out = await turn(w, g, "carl", "dig", **at(UNKNOWN))
    assert not out.ok and out.rule == "dig.chest.unknown"
    out = await turn(w, g, "carl", "dig", x=1, y=4, z=1)
    assert out.ok and out.rule == "dig.block"
    out = await turn(w, g, "bob", "dig", **at(BOBS))
    assert out.ok and BOBS not in w.chests
    for block in ("chest", "trapped_chest", "barrel", "red_shulker_box"):
        out = await turn(w, g, "carl", "collect", block=block)
        assert not out.ok and out.rule == "collect.container"
    assert (await turn(w, g, "carl", "collect", block="oak_log")).ok


async def test_claiming_a_chest_is_an_operators_order() -> None:
    w, g = world()
    out = await turn(w, g, "carl", "claim_chest", owner="carl", **at(UNKNOWN))
    assert not out.ok and out.rule == "claim_chest" and g.ledger.chest_owner(k(UNKNOWN)) is None
    out = await turn(w, g, "Olga", "claim_chest", owner="carl", **at(UNKNOWN))
    assert out.ok and g.ledger.chest_owner(k(UNKNOWN)) == "carl"
    assert (await turn(w, g, "carl", "take", items={"emerald": 1}, **at(UNKNOWN))).ok
    assert (await turn(w, g, "Olga", "claim_chest", owner="Emil", **at(UNKNOWN))).ok
    assert g.ledger.chest_owner(k(UNKNOWN)) == SELF
    assert (await turn(w, g, "Olga", "claim_chest", owner="nobody", **at(UNKNOWN))).ok
    assert g.ledger.chest_owner(k(UNKNOWN)) is None


def test_chests_are_owned_by_who_placed_them_as_emil_saw() -> None:
    _, g = world()
    g.observe(BlockPlaced(block="chest", position={"x": 1, "y": 5, "z": 1}, by="carl"))
    g.observe(BlockPlaced(block="chest", position={"x": 2, "y": 5, "z": 1}, by="Emil"))
    g.observe(BlockPlaced(block="chest", position={"x": 3, "y": 5, "z": 1}, by=None))
    assert g.ledger.chest_owner("1,5,1") == "carl" and g.ledger.chest_owner("2,5,1") == SELF
    assert g.ledger.chest_owner("3,5,1") is None
    g.observe(BlockRemoved(block="chest", position={"x": 1, "y": 5, "z": 1}))
    assert g.ledger.chest_owner("1,5,1") is None


# --- giving ------------------------------------------------------------------------------


async def test_emils_own_items_go_to_anyone_within_the_rate() -> None:
    w, g = world()
    w.inventory["dirt"] = 64
    out = await turn(w, g, "carl", "give", player="carl", item="dirt", count=30)
    assert out.ok and out.rule == "give.own"
    out = await turn(w, g, "carl", "give", player="carl", item="dirt", count=3)
    assert not out.ok and out.rule == "give.own" and "2 more" in out.text
    assert (await turn(w, g, "carl", "give", player="carl", item="dirt", count=2)).ok
    out = await turn(w, g, "carl", "give", player="Tess", item="dirt", count=20)  # to a trusted player: no limit
    assert out.ok and out.rule == "give.own.trusted"
    out = await turn(w, g, "Olga", "give", player="carl", item="dirt", count=5)  # an operator's order: no limit
    assert out.ok and out.rule == "give.own.trusted"
    assert w.received["carl"] == {"dirt": 37}


async def test_unsure_items_need_an_operator(tmp_path: Any) -> None:
    path = tmp_path / "ownership.json"
    path.write_text("{damaged")
    w, _ = world()
    g = Guard(SETTINGS, Ledger.open(path))
    g.observe_snapshot((await w.snapshot()).model_dump())
    assert g.ledger.held[UNSURE]["gold_ingot"] == 8
    out = await turn(w, g, "carl", "give", player="carl", item="gold_ingot", count=1)
    assert not out.ok and out.rule == "use.unsure"
    assert (await turn(w, g, "Olga", "give", player="carl", item="gold_ingot", count=1)).ok


async def test_placing_and_eating_use_own_items_first() -> None:
    w, g = world()
    w.inventory["bread"] = 1
    g.ledger.hold("bob", {"bread": 1})
    out = await turn(w, g, "carl", "eat", item="bread")
    assert not out.ok and out.rule == "use.held" and w.inventory["bread"] == 1
    assert (await turn(w, g, "bob", "eat", item="bread")).ok
    w.inventory["torch"] = 2
    g.ledger.hold("bob", {"torch": 1})
    assert (await turn(w, g, "carl", "place", item="torch", x=1, y=5, z=1)).ok  # Emil's own torch
    out = await turn(w, g, "carl", "place", item="torch", x=1, y=5, z=2)
    assert not out.ok and out.rule == "use.held"


# --- attacks -----------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["bob", "Bob", "BOB", "olga", "Tess", "carl"])
async def test_attacking_a_player_in_any_letter_case_needs_an_operator(target: str) -> None:
    w, g = world()
    for who in ("carl", "Tess", ("Olga", "carl"), (), "0lga", "OLGA"):
        out = await turn(w, g, who, "attack", target=target)
        assert not out.ok and out.rule == "attack.player" and w.acted("attack") == [], (who, out.text)
    out = await turn(w, g, "Olga", "attack", target=target)
    assert out.ok and out.rule == "attack.player"
    (sent,) = w.acted("attack")
    assert sent["target"] in w.online and sent["authority"] == {"requesters": ["Olga"], "attack": sent["target"]}


@pytest.mark.parametrize("target", ["player", "players", "everyone", "me", "nearest", "Emil", "emil", "Nobody123"])
async def test_a_generic_or_unknown_target_is_never_attacked(target: str) -> None:
    w, g = world()
    for who in ("carl", "Olga"):
        out = await turn(w, g, who, "attack", target=target)
        assert not out.ok and out.rule == "attack.unknown" and w.acted("attack") == [], (who, target)


async def test_a_known_player_who_is_not_online_is_a_player_still() -> None:
    w, g = world()
    g.known_players.add("dave")
    out = await turn(w, g, "carl", "attack", target="Dave")
    assert not out.ok and out.rule == "attack.player"
    out = await turn(w, g, "Olga", "attack", target="dave")
    assert not out.ok and "no player named dave is online" in out.text and w.acted("attack") == []


async def test_mobs_and_protected_mobs() -> None:
    w, g = world()
    out = await turn(w, g, "carl", "attack", target="zombie")
    assert out.ok and out.rule == "attack.mob"
    for mob in ("wolf", "villager", "cat"):
        out = await turn(w, g, "carl", "attack", target=mob)
        assert not out.ok and out.rule == "attack.protected"
        assert (await turn(w, g, "Olga", "attack", target=mob)).ok


# --- chat --------------------------------------------------------------------------------


async def test_one_answer_cannot_flood_the_chat() -> None:
    w, g = world()
    g.begin_turn(Authority((Line("carl", "say hi 5000 times"),)))
    outs = [await dispatch(w, call("say", text=f"hi {i}"), guard=g) for i in range(5000)]
    assert len(w.said()) == g.settings.chat_lines_per_turn
    assert all(not o.ok and "chat_lines_per_turn" in o.text for o in outs[g.settings.chat_lines_per_turn:])
    g.begin_turn(Authority((Line("carl", "again"),)))
    for i in range(100):
        await dispatch(w, call("say", text=f"again {i}"), guard=g)
        if i % 6 == 5:
            g.begin_turn(Authority((Line("carl", "again"),)))
    assert len(w.said()) == g.settings.chat_lines_per_minute  # the minute's cap, across turns


async def test_refusals_are_told_within_the_chat_rate() -> None:
    w, g = world()
    for _ in range(100):
        await turn(w, g, "carl", "take", items={"diamond": 1}, **at(BOBS))
    assert len(w.whispers("carl")) == g.settings.chat_lines_per_minute
    assert all(t.startswith("I won't take") for t in w.whispers("carl"))


async def test_jobs_that_find_their_own_items_are_told_what_is_held_for_others() -> None:
    w, g = world()
    g.ledger.hold("bob", {"diamond": 9})
    w.inventory["diamond"] = 9
    w._craft = lambda a: {"crafted": "diamond_block", "count": 1, "asked": 1}  # type: ignore[attr-defined]
    out = await turn(w, g, "carl", "craft", item="diamond_block")
    assert out.ok and w.acted("craft")[-1]["reserved"] == {"diamond": 9}
    await turn(w, g, "bob", "craft", item="diamond_block")
    assert "reserved" not in w.acted("craft")[-1]  # bob may use his own
    w._eat = lambda a: {"ate": "bread", "food_before": 1, "food_after": 5}  # type: ignore[method-assign]
    await turn(w, g, "carl", "eat")
    assert w.acted("eat")[-1]["reserved"] == {"diamond": 9}


# --- drop: the tool that shows a tool carries its own rule ----------------------------------


async def test_emils_own_items_are_dropped_on_a_trusted_players_or_an_operators_word_only() -> None:
    w, g = world()
    for who in ("carl", ("Tess", "carl"), ()):
        out = await turn(w, g, who, "drop", item="dirt", count=5)
        assert not out.ok and out.rule == "drop.own" and w.acted("drop") == [], (who, out.text)
    out = await turn(w, g, "carl", "drop", item="dirt", count=5)
    assert "only a trusted player or an operator may ask for that, and carl asked (rule drop.own)" in out.text
    for who, n in (("Tess", 5), ("Olga", 3)):
        out = await turn(w, g, who, "drop", item="dirt", count=n)
        assert out.ok and out.rule == "drop.own", (who, out.text)
    assert w.ground == {"dirt": 8} and w.inventory["dirt"] == 56
    assert out.text == "dropped 3 dirt on the ground"


async def test_items_held_for_a_player_are_theirs_to_drop() -> None:
    w, g = world()
    w.inventory["diamond"] = 4
    g.ledger.hold("bob", {"diamond": 4})
    for who in ("carl", "Tess"):  # trusted is not the owner
        out = await turn(w, g, who, "drop", item="diamond", count=4)
        assert not out.ok and out.rule == "use.held" and w.ground == {}, (who, out.text)
    out = await turn(w, g, "bob", "drop", item="diamond", count=4)
    assert out.ok and out.rule == "use.held" and w.ground == {"diamond": 4}
    assert g.ledger.held_for("bob") == {}  # the ledger knows they left
    out = await turn(w, g, "Olga", "drop", item="diamond")
    assert not out.ok and out.text == "drop failed: no diamond in the inventory" and w.acted("drop") == [
        {"item": "diamond", "count": 4}]


def test_the_guard_names_no_tool() -> None:
    """The guard applies what each tool declares (its rows, its target check): no comparison
    with a tool's name, no table keyed by tool names."""
    import ast
    import inspect

    from emil.world import guard
    from emil.world.actions import TOOLS

    tree = ast.parse(inspect.getsource(guard))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                assert not (isinstance(side, ast.Attribute) and side.attr == "tool_name"), ast.unparse(node)
                assert not (isinstance(side, ast.Constant) and side.value in TOOLS), ast.unparse(node)
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            assert not keys & set(TOOLS), ast.unparse(node)
        if isinstance(node, ast.MatchValue):
            assert not (isinstance(node.value, ast.Constant) and node.value.value in TOOLS)


async def test_a_tool_declared_in_a_test_is_checked_by_its_own_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new tool with its own row and target check: the guard, the rule table and the refusal
    come from the class alone."""
    from typing import ClassVar

    from emil.trust import rules as table
    from emil.trust.rules import Rule, Who
    from emil.world.actions import TOOLS
    from emil.world.tool import Guarding, Tool, ToolContext

    monkeypatch.setattr(table, "_BY_ID", dict(table._BY_ID))
    monkeypatch.setattr(table, "_DECLARED", {k: list(v) for k, v in table._DECLARED.items()})
    row = Rule("pet.wolf", "a wolf", (Who.OPERATOR,))

    class Pet(Tool):
        """Pet an animal."""

        tool_name: ClassVar[str] = "pet"
        rules: ClassVar[tuple[Rule, ...]] = (row,)
        animal: str

        async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
            if self.animal != "wolf":
                return await super().guarded(guard, ctx)
            verdict = guard.decide(row)
            return await guard.refuse(ctx.bot, self, verdict, what="the wolf") if not verdict.allowed else Outcome(
                True, "petted the wolf", rule=row.id)

    try:
        assert [r.tools for r in table.rules() if r.id == "pet.wolf"] == [("pet",)]
        w, g = world()
        out = await turn(w, g, "carl", "pet", animal="wolf")
        assert not out.ok and out.rule == "pet.wolf" and "(rule pet.wolf)" in out.text
        assert (await turn(w, g, "Olga", "pet", animal="wolf")).rule == "pet.wolf"
        w._pet = lambda a: {"petted": a["animal"]}  # type: ignore[attr-defined]
        out = await turn(w, g, "carl", "pet", animal="cat")
        assert out.ok and out.rule == "any" and w.acted("pet") == [{"animal": "cat"}]  # the default: row any
    finally:
        del TOOLS["pet"]


async def test_a_give_cut_off_after_its_toss_still_counts_against_the_rate() -> None:
    """An urgent event or a stop can cancel give after the items left (the walk back, the
    receipt's watch): the gift counts all the same, so interrupting Emil is no way past the
    hourly rate."""
    w, g = world()
    w.inventory["dirt"] = 64
    real_act = w.act

    async def act_then_hang(name: str, args: Any = None, timeout: float = 60.0, *, job: bool = False) -> Any:  # noqa: ASYNC109
        out = await real_act(name, args, timeout, job=job)
        if name == "give":
            await anyio.sleep_forever()
        return out

    w.act = act_then_hang  # type: ignore[method-assign]
    with anyio.move_on_after(0.5) as cut:
        await turn(w, g, "carl", "give", player="carl", item="dirt", count=30)
    assert cut.cancelled_caught and w.received["carl"] == {"dirt": 30}
    w.act = real_act  # type: ignore[method-assign]
    out = await turn(w, g, "carl", "give", player="carl", item="dirt", count=3)
    assert not out.ok and out.rule == "give.own" and "2 more" in out.text

"""Emil's body tools: moving, fighting, eating, digging and placing, items in and out of hand.

Each is one :class:`~emil.world.tool.Tool` subclass (its fields the arguments, its docstring the
description the model reads, its rows of the rule table and its target check) plus one JS
function of the same name in ``js/emil_actions.js``. Attacking a player needs an operator's
order (self-defence is a reflex and needs no permission).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Literal

import anyio
from pydantic import (
    ConfigDict,
    Field,
)

from emil.trust.rules import ANY, USE_HELD, USE_UNSURE, Rule, Verdict, Who
from emil.world.tool import (
    ITEM_NAME,
    PLAYER_NAME,
    TARGET_NAME,
    Gives,
    Guarding,
    Outcome,
    Tool,
    ToolContext,
    fmt_pos,
    moved_count,
    run_leaving_held,
)

__all__ = ["CONTAINERS", "PROTECTED_MOBS", "Attack", "Collect", "Dig", "Drop", "Eat", "Equip", "Flee", "Follow", "Give",
           "GoTo", "LookAt", "Place", "Stop"]

PROTECTED_MOBS = frozenset({
    "wolf", "cat", "ocelot", "parrot", "horse", "donkey", "mule", "llama", "trader_llama", "camel",
    "skeleton_horse", "zombie_horse", "fox", "axolotl", "sniffer", "armadillo", "villager",
    "wandering_trader", "iron_golem", "snow_golem", "allay",
})
"""Mob types that may be someone's pet or a village's (row attack.protected)."""

CONTAINERS = frozenset({"chest", "trapped_chest", "barrel", "ender_chest", "hopper", "dispenser", "dropper"}) | frozenset(
    f"{c}shulker_box" for c in ("", "white_", "orange_", "magenta_", "light_blue_", "yellow_", "lime_", "pink_", "gray_",
                                 "light_gray_", "cyan_", "purple_", "blue_", "brown_", "green_", "red_", "black_")
)
"""Blocks that hold items (row collect.container)."""

_NOT_CONNECTED = "not connected to the server right now"


def chest_at(found: dict[str, Any]) -> str:
    """"at x y z" of a chest the bot found."""
    c = found["chest"]
    return f"at {c['x']} {c['y']} {c['z']}"


class _Target(Tool):
    # Either x, y and z or player, never both: said in each field, because a small model given
    # "instead of coordinates" still sent both (go_to and look_at, 2 of 45 calls: docs/llm.md).
    x: float | None = Field(default=None, description="Block x coordinate (leave out when giving player)")
    y: float | None = Field(default=None, description="Block y coordinate (leave out when giving player)")
    z: float | None = Field(default=None, description="Block z coordinate (leave out when giving player)")
    player: str | None = Field(default=None, pattern=PLAYER_NAME,
                               description="A player's name; give it alone, without x, y or z")

    shapes: ClassVar[tuple[tuple[str, ...], ...]] = (("x", "y", "z"), ("player",))


class GoTo(_Target):
    """Walk to a place (x, y and z) or to a player (player alone). Returns when there (or when no path exists)."""

    tool_name: ClassVar[str] = "go_to"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 90.0
    range: float = Field(default=2, ge=0, le=16, description="How close is close enough, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"arrived at {fmt_pos(result.get('position'))}"


class Follow(Tool):
    """Keep following a player until told to stop or given another movement."""

    tool_name: ClassVar[str] = "follow"
    job: ClassVar[bool] = True
    player: str = Field(pattern=PLAYER_NAME, description="Who to follow")
    range: float = Field(default=2, ge=1, le=16, description="Distance to keep, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"now following {result.get('following')} (until stop or another movement)"


class Stop(Tool):
    """Stop what you are doing: walking, following, digging, fighting."""

    tool_name: ClassVar[str] = "stop"

    def read(self, result: dict[str, Any]) -> str:
        return f"stopped {result.get('stopped')}" if result.get("stopped") else "stopped (nothing was running)"


class LookAt(_Target):
    """Turn to look at a place (x, y and z) or at a player (player alone)."""

    tool_name: ClassVar[str] = "look_at"

    def read(self, result: dict[str, Any]) -> str:
        return "looking there now"


_COLLECT_CONTAINER = Rule("collect.container", "chests, barrels, shulker boxes (any one nearby)", (Who.OPERATOR,))


class Collect(Tool):
    """Find blocks of one type nearby, dig them and pick up what drops."""

    tool_name: ClassVar[str] = "collect"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 180.0
    block: str = Field(pattern=ITEM_NAME, description="Block name, e.g. oak_log, dirt, stone")
    count: int = Field(default=1, ge=1, le=64, description="How many blocks to collect")
    max_distance: int = Field(default=32, ge=1, le=64, description="Search radius in blocks")

    rules: ClassVar[tuple[Rule, ...]] = (_COLLECT_CONTAINER,)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        row = _COLLECT_CONTAINER if self.block in CONTAINERS else ANY
        verdict = guard.decide(row)
        if not verdict.allowed:
            return await guard.refuse(ctx.bot, self, verdict, what=self.block)
        return replace(await self.run(ctx), rule=row.id)

    def read(self, result: dict[str, Any]) -> str:
        got = ", ".join(f"{v} {k}" for k, v in (result.get("collected") or {}).items())
        return f"dug {result.get('dug')} block(s), picked up {got or 'nothing'}"


_SPILLS = "what it holds spills"
_DIG_CHEST = {
    "emil": Rule("dig.chest.emil", "a chest Emil placed", (Who.ANYONE,), _SPILLS),
    "owned": Rule("dig.chest.owned", "a chest a player placed or was assigned", (Who.OWNER, Who.OPERATOR), _SPILLS),
    "unknown": Rule("dig.chest.unknown", "a chest nobody is known to own", (Who.OPERATOR,), _SPILLS),
}
_DIG_BLOCK = Rule("dig.block", "any other block", (Who.ANYONE,), "Emil cannot tell who built what")


class Dig(Tool):
    """Dig (break) the block at the given coordinates, walking there if needed."""

    tool_name: ClassVar[str] = "dig"
    job: ClassVar[bool] = True
    x: int
    y: int
    z: int

    rules: ClassVar[tuple[Rule, ...]] = (*_DIG_CHEST.values(), _DIG_BLOCK)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """A chest is its owner's to dig; any other block anyone's."""
        res = await ctx.bot.act("find_chest", {"x": self.x, "y": self.y, "z": self.z}, timeout=10.0)
        if not res.ok or not isinstance(res.result, dict):
            return replace(await self.run(ctx), rule=_DIG_BLOCK.id)
        kind, owner = guard.chest_owner({**res.result, "blocks": [res.result["chest"]]})
        verdict = guard.decide(_DIG_CHEST[kind], owner=owner)
        if not verdict.allowed:
            return await guard.refuse(ctx.bot, self, verdict, what=f"the chest {chest_at(res.result)}")
        return replace(await self.run(ctx), rule=verdict.rule)

    def read(self, result: dict[str, Any]) -> str:
        return f"dug {result.get('dug')} at {fmt_pos(result.get('at'))}"


class Place(Tool):
    """Place a block from the inventory at the given coordinates (next to a solid block)."""

    tool_name: ClassVar[str] = "place"
    job: ClassVar[bool] = True
    item: str = Field(pattern=ITEM_NAME, description="Block item to place, e.g. oak_planks")
    x: int
    y: int
    z: int

    rules: ClassVar[tuple[Rule, ...]] = (USE_HELD, USE_UNSURE)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        return await _use_one(self, self.item, guard, ctx)

    def read(self, result: dict[str, Any]) -> str:
        return f"placed {result.get('placed')} at {fmt_pos(result.get('at'))}"


class Equip(Tool):
    """Hold an item in the hand or wear it."""

    tool_name: ClassVar[str] = "equip"
    item: str = Field(pattern=ITEM_NAME, description="Item name from the inventory")
    destination: Literal["hand", "off-hand", "head", "torso", "legs", "feet"] = "hand"

    def read(self, result: dict[str, Any]) -> str:
        return f"equipped {result.get('equipped')} ({result.get('destination')})"


async def _use_one(tool: Tool, item: str, guard: Guarding, ctx: ToolContext) -> Outcome:
    """place and eat: the one item they use must be Emil's own or usable by this turn."""
    inv = await guard.inventory(ctx.bot)
    if inv is None:
        return tool.failed(_NOT_CONNECTED)
    src, refusal = guard.sources(inv, item, min(1, inv.get(item, 0)), theirs=None)
    if refusal is not None:
        return await guard.refuse(ctx.bot, tool, refusal, what=item)
    out = await tool.run(ctx)
    if out.ok:
        guard.spent(item, src, 1, theirs=None)
    return replace(out, rule=USE_HELD.id if src.others else ANY.id)


class Eat(Tool):
    """Eat food from the inventory (the best food when no item is named)."""

    tool_name: ClassVar[str] = "eat"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 15.0
    item: str | None = Field(default=None, pattern=ITEM_NAME, description="Food item name, optional")

    rules: ClassVar[tuple[Rule, ...]] = (USE_HELD, USE_UNSURE)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        if self.item is None:  # the bot picks the food: it leaves alone what this turn may not use
            return await run_leaving_held(self, guard, ctx)
        return await _use_one(self, self.item, guard, ctx)

    def read(self, result: dict[str, Any]) -> str:
        return f"ate {result.get('ate')}: food {result.get('food_before')} -> {result.get('food_after')}"


_GIVE_HELD = Rule("give.held.recipient", "items Emil holds for the player receiving them", (Who.ANYONE,))
_GIVE_TRUSTED = Rule("give.own.trusted", "Emil's own items, to or on the order of a trusted player or an operator",
                     (Who.ANYONE,), "no limit")
_GIVE_OWN = Rule("give.own", "Emil's own items, to anyone else", (Who.ANYONE,),
                 "at most give_items_per_hour items per player within any hour")


class Give(Tool):
    """Walk to a player and toss them items from the inventory."""

    tool_name: ClassVar[str] = "give"
    job: ClassVar[bool] = True
    gives: ClassVar[Gives | None] = Gives()
    player: str = Field(pattern=PLAYER_NAME, description="Who receives the items")
    item: str = Field(pattern=ITEM_NAME, description="Item name, e.g. oak_log")
    count: int = Field(default=1, ge=1, le=64)

    rules: ClassVar[tuple[Rule, ...]] = (_GIVE_HELD, _GIVE_TRUSTED, _GIVE_OWN, USE_HELD, USE_UNSURE)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """The recipient's own lot first, then Emil's own (rated, to a player nobody trusts),
        then lots this turn may use."""
        to, item, count, bot = self.player, self.item, self.count, ctx.bot
        inv = await guard.inventory(bot)
        if inv is None:
            return self.failed(_NOT_CONNECTED)
        n = min(count, inv.get(item, 0))
        if n <= 0:
            return self.failed(f"no {item} in the inventory")
        src, refusal = guard.sources(inv, item, n, theirs=to)
        if refusal is not None:
            return await guard.refuse(bot, self, refusal, what=f"{count} {item} to {to}")
        row = _GIVE_HELD.id if src.theirs == n else USE_HELD.id if src.others else _GIVE_TRUSTED.id
        asked = guard.requesters()
        people = guard.people
        rated = src.own > 0 and not people.is_trusted(to) and not (asked and all(people.is_trusted(r) for r in asked))
        if rated:
            row = _GIVE_OWN.id
            allowance = guard.settings.give_items_per_hour - guard.ledger.given_recently(to)
            if src.own > allowance:
                why = (f"Emil gives at most {guard.settings.give_items_per_hour} of its own items to a player within an hour, "
                       f"and {to} may have {max(0, allowance)} more now")
                return await guard.refuse(bot, self, Verdict(False, _GIVE_OWN.id, why), what=f"{count} {item} to {to}")

        def account(gave: int) -> None:
            guard.spent(item, src, gave, theirs=to)
            own_part = max(0, min(gave - src.theirs, src.own))
            if rated and own_part:
                guard.ledger.record_gift(to, own_part)

        had = inv.get(item, 0)
        try:
            out = await self.run(ctx)
        except anyio.get_cancelled_exc_class():
            # Cut off after the toss (an urgent event, a stop, during the walk back or the
            # receipt's watch): what left the inventory was given all the same.
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                snap = await bot.snapshot()
                gone = min(n, had - dict(snap.inventory).get(item, 0)) if snap.connected else 0
                if gone > 0:
                    account(gone)
            raise
        gave = moved_count(out.data, "count")
        if out.ok and gave:
            account(gave)
        return replace(out, rule=row)

    def read(self, result: dict[str, Any]) -> str:
        """What was thrown and where it went (the JS receipt watches the items for a few seconds:
        who picked them up, or how far from the player they still lie)."""
        to, item = result.get("to"), result.get("gave")
        extra = f" ({result['short']})" if result.get("short") else ""
        back = int(result.get("back") or 0)
        said = f"tossed {int(result.get('count') or 0) + back} {item} to {to}{extra}"
        if back:
            said += f"; {back} came back to you (you picked them up again: still yours)"
        seen = int(result.get("seen") or 0)
        got, lying = int(result.get("received") or 0), int(result.get("lying") or 0)
        others = result.get("others") or {}
        if not seen or (back and got + lying + sum(others.values()) == 0):
            return said
        if got == seen:
            return f"{said}; {to} picked them up"
        notes = [f"{to} picked up {'some of them' if got else 'none yet'}"]
        notes += [f"{who} picked up {'one' if k == 1 else k}" for who, k in sorted(others.items())]
        if lying:
            far = result.get("lying_from")
            notes.append(f"{lying if lying > 1 else 'one'} still on the ground"
                         + (f", {far} blocks from {to}" if far is not None else ""))
        return f"{said}; " + ", ".join(notes)


_DROP_OWN = Rule("drop.own", "Emil's own items, tossed on the ground (anyone near may pick them up)",
                 (Who.TRUSTED, Who.OPERATOR), "a gift to whoever is near, so only on a trusted player's or an "
                 "operator's order (give has the hourly cap for anyone else); items held for a player are use.held's")


class Drop(Tool):
    """Toss items from the inventory onto the ground where you stand."""

    tool_name: ClassVar[str] = "drop"
    timeout_s: ClassVar[float] = 10.0
    item: str = Field(pattern=ITEM_NAME, description="Item name, e.g. dirt")
    count: int = Field(default=1, ge=1, le=64)

    rules: ClassVar[tuple[Rule, ...]] = (_DROP_OWN, USE_HELD, USE_UNSURE)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """Items held for a player are theirs to drop (use.held); Emil's own, a trusted
        player's or an operator's (drop.own)."""
        item, bot = self.item, ctx.bot
        inv = await guard.inventory(bot)
        if inv is None:
            return self.failed(_NOT_CONNECTED)
        n = min(self.count, inv.get(item, 0))
        if n <= 0:
            return self.failed(f"no {item} in the inventory")
        src, refusal = guard.sources(inv, item, n, theirs=None)
        if refusal is None and src.own:
            verdict = guard.decide(_DROP_OWN)
            refusal = None if verdict.allowed else verdict
        if refusal is not None:
            return await guard.refuse(bot, self, refusal, what=f"{n} {item}")
        out = await self.run(ctx)
        dropped = moved_count(out.data, "count")
        if out.ok and dropped:
            guard.spent(item, src, dropped, theirs=None)
        return replace(out, rule=_DROP_OWN.id if src.own else USE_HELD.id)

    def read(self, result: dict[str, Any]) -> str:
        extra = f" ({result['short']})" if result.get("short") else ""
        return f"dropped {result.get('count')} {result.get('dropped')} on the ground{extra}"


_ATTACK_MOB = Rule("attack.mob", "a mob type (zombie, spider, cow...)", (Who.ANYONE,))
_ATTACK_PROTECTED = Rule("attack.protected", "a tameable animal, villager or golem (it may be someone's pet or a "
                         "village's)", (Who.OPERATOR,))
_ATTACK_PLAYER = Rule("attack.player", "a player: any name the server lists or Emil has met, in any letter case",
                      (Who.OPERATOR,), "the bot checks it again with the name Python resolved")
_ATTACK_UNKNOWN = Rule("attack.unknown", 'anything else: "player", "everyone", a name not in sight', (Who.NOBODY,),
                       "never a generic target")


class Attack(Tool):
    """Fight a mob (by type, e.g. zombie) or a player. Attacking players needs an operator's order."""

    tool_name: ClassVar[str] = "attack"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    target: str = Field(pattern=TARGET_NAME, description="Mob type or player name")
    duration_s: float = Field(default=10, ge=1, le=30, description="Give up after this many seconds")

    rules: ClassVar[tuple[Rule, ...]] = (_ATTACK_MOB, _ATTACK_PROTECTED, _ATTACK_PLAYER, _ATTACK_UNKNOWN)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """The bot says what the target is; Python knows the players Emil has met (an absent
        one is still a player) and that Emil is none of them."""
        bot, target = ctx.bot, self.target
        res = await bot.act("classify_target", {"target": target}, timeout=10.0)
        kind = str(res.result.get("kind")) if res.ok and isinstance(res.result, dict) else "unknown"
        name = str(res.result.get("name")) if res.ok and isinstance(res.result, dict) else target
        lower = target.lower()
        if lower == guard.settings.bot_name.lower():
            kind = "unknown"
        elif kind != "player" and lower in guard.known_players:
            kind = "absent player"  # a player the server does not list now (or Python knows better)
        if kind in ("player", "absent player"):
            verdict = guard.decide(_ATTACK_PLAYER)
            if not verdict.allowed:
                return await guard.refuse(bot, self, verdict, what=f"the player {name}")
            if kind == "absent player":
                return self.failed(f"no player named {target} is online")
            ctx = replace(ctx, extra={"target": name, "authority": guard.js_authority(attack=name)})
            return replace(await self.run(ctx), rule=verdict.rule)
        if kind == "mob":
            row = _ATTACK_PROTECTED if name in PROTECTED_MOBS else _ATTACK_MOB
            verdict = guard.decide(row)
            if not verdict.allowed:
                return await guard.refuse(bot, self, verdict, what=f"the {name}")
            ctx = replace(ctx, extra={"target": name, "authority": guard.js_authority()})
            return replace(await self.run(ctx), rule=row.id)
        verdict = guard.decide(_ATTACK_UNKNOWN)
        why = f"'{target}' is no mob type and no player the server lists; {verdict.why}"
        return await guard.refuse(bot, self, Verdict(False, verdict.rule, why))

    def read(self, result: dict[str, Any]) -> str:
        if result.get("defeated"):
            outcome = "it is dead"
        elif result.get("gone"):
            outcome = "it went out of sight (not seen to die)"
        else:
            outcome = "it is still alive"
        return f"fought {result.get('target')} for {result.get('fought_s')} s, {result.get('hits', 0)} hit(s); {outcome}"


class Flee(Tool):
    """Run away from a threat (the nearest hostile when none is named)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    tool_name: ClassVar[str] = "flee"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    from_: str | None = Field(default=None, alias="from", pattern=TARGET_NAME, description="Mob type or player to run from")
    distance: float = Field(default=16, ge=4, le=48, description="How far to run, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"ran from {result.get('fled_from') or 'danger'} to {fmt_pos(result.get('position'))}"

"""Emil's tools for making and keeping things: crafting, smelting, building, sleeping, chests.

``craft``, ``smelt``, ``build``, ``sleep``, ``store`` and ``take`` each say what is missing or
why not in words the model can act on ("cannot craft 1 wooden_pickaxe: missing 2 stick (have 0
of 2)"); the JS side is ``js/emil_act_*.js``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    StringConstraints,
    WithJsonSchema,
)

from emil.trust.ledger import SELF, chest_key
from emil.trust.rules import USE_HELD, USE_UNSURE, Rule, Who
from emil.world.tool import (
    ITEM_NAME,
    PLAYER_NAME,
    BotLike,
    Guarding,
    Outcome,
    Tool,
    ToolContext,
    fmt_pos,
    moved,
    run_leaving_held,
)

__all__ = ["Build", "ClaimChest", "Craft", "Sleep", "Smelt", "Store", "Take"]


def _counts(items: Any) -> str:
    """ "3 oak_planks, 2 stick" from {"oak_planks": 3, "stick": 2} (empty: "")."""
    if not isinstance(items, dict):
        return ""
    return ", ".join(f"{n} {name}" for name, n in items.items() if isinstance(n, int) and n > 0)


def _where(spot: Any, phrase: str) -> str:
    """ " in the chest at (4, 5, 0)" for a result's block position (empty when there is none)."""
    if not isinstance(spot, dict):
        return ""
    placed = " (placed it there from the inventory)" if spot.get("placed") else ""
    return f" {phrase} at {fmt_pos(spot)}{placed}"


class _PicksItems(Tool):
    """Base of jobs that pick their own items (craft, smelt, build, sleep): the bot is told
    what this turn may not use (row use.held)."""

    rules: ClassVar[tuple[Rule, ...]] = (USE_HELD,)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        return await run_leaving_held(self, guard, ctx)


class _Spot(Tool):
    """Base of tools that may be given one block position (all of x, y, z, or none)."""

    x: int | None = Field(default=None, description="x, y, z: all or none")
    y: int | None = None
    z: int | None = None

    shapes: ClassVar[tuple[tuple[str, ...], ...]] = (("x", "y", "z"), ())


class Craft(_PicksItems):
    """Craft items from your inventory (a 3x3 recipe uses a crafting table within 32 blocks, or places yours). Says which ingredients are missing."""

    tool_name: ClassVar[str] = "craft"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 90.0
    item: str = Field(pattern=ITEM_NAME, description="e.g. wooden_pickaxe")
    count: int = Field(default=1, ge=1, le=64)

    def read(self, result: dict[str, Any]) -> str:
        made, asked = result.get("count"), result.get("asked")
        extra = f" (asked for {asked}; the recipe makes several at a time)" if isinstance(made, int) and isinstance(asked, int) and made > asked else ""
        used = _counts(result.get("used"))
        return f"crafted {made} {result.get('crafted')}{extra}" + (f" from {used}" if used else "") + _where(result.get("table"), "at the crafting table")


class Smelt(_PicksItems):
    """Smelt or cook items in a furnace within 32 blocks (or places yours) with fuel you carry. What is not done in time keeps cooking; smelt there again to collect it."""

    tool_name: ClassVar[str] = "smelt"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 150.0
    item: str = Field(pattern=ITEM_NAME, description="e.g. raw_iron, beef")
    count: int = Field(default=1, ge=1, le=64)
    fuel: str | None = Field(default=None, pattern=ITEM_NAME, description="Default: coal or wood you carry")
    wait_s: int = Field(default=60, ge=5, le=120, description="Seconds to wait (10 per item)")

    def read(self, result: dict[str, Any]) -> str:
        fuel = result.get("fuel") if isinstance(result.get("fuel"), dict) else None
        text = f"got {result.get('count')} {result.get('output')} from {result.get('smelted')}"
        if fuel and fuel.get("count"):
            text += f" (burned {fuel.get('count')} {fuel.get('name')})"
        text += _where(result.get("furnace"), "in the furnace")
        if result.get("short"):
            text += f"; {result['short']}"
        if result.get("took_out"):
            text += f"; took out of the furnace first: {_counts(result['took_out'])}"
        if result.get("stalled"):
            text += "; the furnace stopped burning (out of fuel?)"
        elif result.get("still_cooking"):
            text += (
                f"; {result['still_cooking']} {result.get('smelted')} still cooking there, about "
                f"{round(result.get('eta_s') or 0)} s more: smelt again there to collect"
            )
        return text


class Build(_Spot, _PicksItems):
    """Build with blocks you carry: shelter (walls and roof around you, 10 blocks) or pillar (a column beside you). Says what is missing first."""

    tool_name: ClassVar[str] = "build"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 120.0
    blueprint: Literal["shelter", "pillar"]
    block: str | None = Field(default=None, pattern=ITEM_NAME, description="Default: the most plentiful")
    height: int = Field(default=3, ge=1, le=10, description="Pillar height")

    def read(self, result: dict[str, Any]) -> str:
        already = f" ({result['already']} already there)" if result.get("already") else ""
        return f"built a {result.get('built')} of {result.get('block')} at {fmt_pos(result.get('at'))}: placed {result.get('placed')}{already}"


class Sleep(_PicksItems):
    """Sleep in a bed within 32 blocks (or places yours) at night, with no monsters near. The night passes once every player sleeps."""

    tool_name: ClassVar[str] = "sleep"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 120.0
    wait_s: int = Field(default=15, ge=0, le=60, description="Seconds to wait for the morning")

    def read(self, result: dict[str, Any]) -> str:
        where = _where(result.get("bed"), "in the bed") or " in bed"
        if result.get("woke"):
            # the clock as Emil saw it wake: a wake by night (hurt, the bed dug) is no morning
            if result.get("night") is False:
                return f"slept{where} and woke up in the morning (time {result.get('time')})"
            return f"slept{where} and woke up while it was still night (time {result.get('time')}): the night did not pass"
        who = f" ({result['players_sleeping']} players asleep)" if result.get("players_sleeping") else ""
        return (
            f"lying{where}; still night{who}: it passes when every player sleeps. "
            "You stay in bed until morning; any movement gets you up"
        )


# Names and counts; the keys are checked against the item-name pattern all the same, but the
# schema the model reads is the short form (pydantic's patternProperties cost 35 more tokens).
# The key pattern and the sizes go only into a strict spec (tool.STRICT_ONLY), where the grammar
# holds the model to them: without, the 0.5B model filled take's items with the schema's own
# words ({"additionalProperties": 1, "description": 16}, 4 of 45 calls, docs/llm.md).
_ItemCounts = Annotated[
    dict[Annotated[str, StringConstraints(pattern=ITEM_NAME)], Annotated[int, Field(ge=1, le=2304)]],
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "integer", "minimum": 1},
                    "propertyNames": {"pattern": ITEM_NAME}, "minProperties": 1, "maxProperties": 16}),
]


async def _find_chest(tool: _Spot, bot: BotLike) -> tuple[dict[str, Any] | None, str | None]:
    """The chest a call names (at x, y, z, or the nearest), as the bot found it."""
    args = {k: v for k in ("x", "y", "z") if (v := getattr(tool, k)) is not None}
    res = await bot.act("find_chest", args, timeout=10.0)
    if not res.ok or not isinstance(res.result, dict):
        return None, res.error or "no chest found"
    return res.result, None


def _chest_at(found: dict[str, Any]) -> str:
    c = found["chest"]
    return f"at {c['x']} {c['y']} {c['z']}"


class _ChestTool(_Spot):
    """Base of store and take: what moved, then what did not and why; a call that moved nothing
    failed, whatever the reasons."""

    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 60.0
    moved_key: ClassVar[str] = ""
    """The result's count of what moved, and the verb that reads it ("stored", "took")."""
    where: ClassVar[str] = ""
    notes: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(result key, how it reads) for what did not move."""

    rows: ClassVar[dict[str, Rule]] = {}
    """Its row for a chest of Emil's (emil), a player's (owned), nobody known (unknown)."""
    direction: ClassVar[str] = ""
    """How a refusal names the chest ("from", "into")."""

    async def run(self, ctx: ToolContext) -> Outcome:
        out = await super().run(ctx)
        if out.ok and isinstance(out.data, dict) and not out.data.get(self.moved_key):
            return Outcome(False, f"{self.tool_name} failed: {out.text}", out.data)
        return out

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """The chest's owner decides the row; the bot is sent to the chest the guard checked."""
        bot = ctx.bot
        found, error = await _find_chest(self, bot)
        if found is None:
            return self.failed(error)
        kind, owner = guard.chest_owner(found)
        verdict = guard.decide(self.rows[kind], owner=owner)
        whose = {"emil": "Emil's chest", "unknown": "a chest of unknown owner", "owned": f"{owner}'s chest"}[kind]
        if not verdict.allowed:
            return await guard.refuse(bot, self, verdict, what=f"{self.direction} {whose} {_chest_at(found)}")
        chest_owner = owner if kind == "owned" and owner and "+" not in owner else None
        prepared = await self.before(guard, bot, chest_owner, whose)
        if isinstance(prepared, Outcome):
            return prepared
        c = found["chest"]
        out = await self.run(replace(ctx, extra={"x": c["x"], "y": c["y"], "z": c["z"]}))
        self.after(guard, out, chest_owner, prepared)
        return replace(out, rule=verdict.rule)

    async def before(self, guard: Guarding, bot: BotLike, chest_owner: str | None, whose: str) -> Any:
        """Checks before the move (a refusal or failure as an outcome), else what :meth:`after`
        needs."""
        return None

    def after(self, guard: Guarding, out: Outcome, chest_owner: str | None, prepared: Any) -> None:
        """Note in the ledger what moved."""

    def read(self, result: dict[str, Any]) -> str:
        moved = _counts(result.get(self.moved_key)) or "nothing"
        text = f"{self.moved_key} {moved}{_where(result.get('chest'), self.where)}"
        for key, label in self.notes:
            if result.get(key):
                text += f"; {label}: {_counts(result[key])}"
        return text


_STORE = {
    "emil": Rule("store.emil", "a chest Emil placed", (Who.ANYONE,)),
    "owned": Rule("store.owned", "a chest a player placed or was assigned", (Who.OWNER, Who.OPERATOR)),
    "unknown": Rule("store.unknown", "a chest nobody is known to own", (Who.OPERATOR,)),
}


class Store(_ChestTool):
    """Put items into a chest (the nearest within 32 blocks, or at x, y, z). Says what did not fit."""

    tool_name: ClassVar[str] = "store"
    moved_key: ClassVar[str] = "stored"
    where: ClassVar[str] = "in the chest"
    notes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("did_not_fit", "did not fit (the chest is full)"),
        ("not_in_inventory", "you did not have"),
        ("unmoved", "the chest did not take"),
    )
    items: _ItemCounts = Field(min_length=1, max_length=16, description='e.g. {"cobblestone": 32}')

    rows: ClassVar[dict[str, Rule]] = _STORE
    direction: ClassVar[str] = "into"
    rules: ClassVar[tuple[Rule, ...]] = (*_STORE.values(), USE_HELD, USE_UNSURE)

    async def before(self, guard: Guarding, bot: BotLike, chest_owner: str | None, whose: str) -> Any:
        """Every item must be Emil's own or usable by this turn (the chest owner's lot first)."""
        inv = await guard.inventory(bot)
        if inv is None:
            return self.failed("not connected to the server right now")
        plans = {}
        for item, n in self.items.items():
            src, refusal = guard.sources(inv, item, min(n, inv.get(item, 0)), theirs=chest_owner)
            if refusal is not None:
                return await guard.refuse(bot, self, refusal, what=f"{item} into {whose}")
            plans[item] = src
        return plans

    def after(self, guard: Guarding, out: Outcome, chest_owner: str | None, prepared: Any) -> None:
        for item, n in moved(out.data, "stored").items():
            if item in prepared:
                guard.spent(item, prepared[item], n, theirs=chest_owner)


_TAKE = {
    "emil": Rule("take.emil", "a chest Emil placed", (Who.ANYONE,), "what is taken stays Emil's"),
    "owned": Rule("take.owned", "a chest a player placed (as Emil saw) or an operator assigned", (Who.OWNER, Who.OPERATOR),
                  "what is taken is held for the chest's owner"),
    "unknown": Rule("take.unknown", "a chest nobody is known to own", (Who.OPERATOR,), "what is taken becomes Emil's"),
}


class Take(_ChestTool):
    """Take items from a chest (the nearest within 32 blocks, or at x, y, z). Says what was not there."""

    tool_name: ClassVar[str] = "take"
    moved_key: ClassVar[str] = "took"
    where: ClassVar[str] = "from the chest"
    notes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("not_in_chest", "not in the chest"),
        ("no_room", "no room in your inventory for"),
        ("unmoved", "the chest did not give"),
    )
    items: _ItemCounts = Field(min_length=1, max_length=16, description='e.g. {"oak_log": 10}')

    rows: ClassVar[dict[str, Rule]] = _TAKE
    direction: ClassVar[str] = "from"
    rules: ClassVar[tuple[Rule, ...]] = tuple(_TAKE.values())

    def after(self, guard: Guarding, out: Outcome, chest_owner: str | None, prepared: Any) -> None:
        """What is taken from a player's chest is held for them."""
        if chest_owner is not None:
            guard.ledger.hold(chest_owner, moved(out.data, "took"))


_CLAIM = Rule("claim_chest", "say who owns a chest", (Who.OPERATOR,))


class ClaimChest(_Spot):
    """Set who owns a chest (nearest, or at x, y, z). Operators only."""

    tool_name: ClassVar[str] = "claim_chest"
    bridged: ClassVar[bool] = False
    owner: str = Field(pattern=PLAYER_NAME, description="A player, Emil or nobody")

    rules: ClassVar[tuple[Rule, ...]] = (_CLAIM,)

    async def run(self, ctx: ToolContext) -> Outcome:
        # Only through the guard (guarded: row claim_chest) is an owner set.
        return Outcome(False, "claim_chest: only an operator's order through the guard sets an owner", rule=_CLAIM.id)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """An operator's word sets the owner in the ledger; nothing reaches the bot but the
        search for the chest."""
        verdict = guard.decide(_CLAIM)
        if not verdict.allowed:
            return await guard.refuse(ctx.bot, self, verdict)
        found, error = await _find_chest(self, ctx.bot)
        if found is None:
            return self.failed(error)
        dim = found.get("dimension") if isinstance(found.get("dimension"), str) else None
        c = found["chest"]
        key, owner, where = chest_key(c["x"], c["y"], c["z"], dim), self.owner, _chest_at(found)
        if owner.lower() in ("nobody", "unknown"):
            guard.ledger.forget_chest(key)
            text = f"the chest {where} is of unknown owner now (only operators may open it)"
        elif owner == guard.settings.bot_name or owner.lower() == "emil":
            guard.ledger.set_chest(key, SELF, "claimed")
            text = f"the chest {where} is Emil's now (anyone may use it)"
        else:
            guard.ledger.set_chest(key, owner, "claimed")
            text = f"the chest {where} is {owner}'s now (only {owner} and operators may open it)"
        return Outcome(True, text, {"chest": c, "owner": owner}, rule=_CLAIM.id)

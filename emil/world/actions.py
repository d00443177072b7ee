"""Emil's tool set, and the functions the runtime uses on it: specs, validation, dispatch.

Each tool is one :class:`~emil.world.tool.Tool` subclass below (arguments, description, how its
result reads, whether it is a long job, its time limit) plus one JS function of the same name in
``js/emil_actions.js``; see :mod:`emil.world.tool` and docs/world.md ("Adding a tool").
:func:`tool_specs`, :func:`validate_tool_call` and :func:`dispatch` read the registry
(:data:`TOOLS`) and call the class; none of them knows a tool by name. :func:`dispatch` returns
an :class:`Outcome` whose ``text`` is what the model reads next: invalid arguments and failed
actions come back as readable text ("no oak_log within 32 blocks"), never as exceptions that end
the turn.

Safety: player chat is untrusted input and nothing here evaluates anything as code. ``say`` and
``whisper`` clean the text and cut it to the protocol's chat limit; a piece that a server could
read as a command (:func:`emil.world.chat.reads_as_command`) is refused unless the operator
enabled commands and every player whose words are in the turn is an operator, and the bot
checks the same rule again. Attacking a player needs an operator's order too (self-defence is a
reflex and needs no permission).

Crafting, smelting, building, sleeping and chests are tools too (``craft``, ``smelt``,
``build``, ``sleep``, ``store``, ``take``): each says what is missing or why not in words the
model can act on ("cannot craft 1 wooden_pickaxe: missing 2 stick (have 0 of 2)").
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from emil.exceptions import EmilError
from emil.llm.types import ToolCall
from emil.world.bridge import Snapshot
from emil.world.chat import CHAT_LIMIT, clean_chat, reads_as_command, split_chat
from emil.world.tool import (
    TOOLS,
    ActionPolicy,
    BotLike,
    Gives,
    Outcome,
    Query,
    Speaks,
    Tool,
    ToolContext,
)

__all__ = [
    "TOOLS",
    "ActionPolicy",
    "Attack",
    "BotLike",
    "Build",
    "Collect",
    "Craft",
    "Dig",
    "Eat",
    "Equip",
    "Flee",
    "Follow",
    "Give",
    "GoTo",
    "Inventory",
    "LookAt",
    "Nearby",
    "Outcome",
    "Place",
    "Say",
    "Sleep",
    "Smelt",
    "Status",
    "Stop",
    "Store",
    "Take",
    "Tool",
    "Whisper",
    "dispatch",
    "parse_tool",
    "tool_specs",
    "validate_tool_call",
]

_NAME = r"^[a-z0-9_]+$"
_PLAYER = r"^[A-Za-z0-9_]{1,16}$"


def _fmt_pos(p: Any) -> str:
    if isinstance(p, dict):
        return f"({p.get('x')}, {p.get('y')}, {p.get('z')})"
    return "?"


class _Target(Tool):
    x: float | None = Field(default=None, description="Block x coordinate")
    y: float | None = Field(default=None, description="Block y coordinate")
    z: float | None = Field(default=None, description="Block z coordinate")
    player: str | None = Field(default=None, pattern=_PLAYER, description="A player's name, instead of coordinates")

    @model_validator(mode="after")
    def _one_target(self) -> _Target:
        coords = [self.x, self.y, self.z]
        if self.player is None and any(c is None for c in coords):
            raise ValueError("give either x, y and z, or player")
        if self.player is not None and any(c is not None for c in coords):
            raise ValueError("give either coordinates or player, not both")
        return self


class _Chat(Tool):
    """Base of the chat tools: the text is cleaned and cut into chat-sized pieces, and every
    piece passes the command rule (:mod:`emil.world.chat`) before any is sent."""

    timeout_s: ClassVar[float] = 10.0
    speaks: ClassVar[Speaks | None] = Speaks()
    if TYPE_CHECKING:  # a field of each chat tool, declared there to keep its place in the spec
        text: str

    def _limit(self) -> int:
        return CHAT_LIMIT

    def _said(self, sent: str) -> str:
        return f"said: {sent!r}"

    async def run(self, ctx: ToolContext) -> Outcome:
        name, policy = self.tool_name, ctx.policy
        pieces = split_chat(self.text, self._limit(), policy.max_chat_messages)
        if not pieces:
            return Outcome(False, f"{name} failed: nothing to say after removing control characters")
        commands = [i for i, piece in enumerate(pieces, 1) if reads_as_command(piece)]
        if commands and not policy.may_command():
            return Outcome(False, _refusal(name, commands, len(pieces), policy), {"refused": list(pieces)})
        # The bot checks the same rule again, with the same requesters (neither side alone).
        requesters: list[JsonValue] = list(sorted(policy.requesters))
        for piece in pieces:
            args = {**self.wire_args(), "text": piece, "requesters": requesters}
            res = await ctx.bot.act(name, args, timeout=self.timeout_s, job=self.job)
            if not res.ok:
                return Outcome(False, f"{name} failed: {res.error}")
        sent = " ".join(pieces)
        cut = sent.replace(" ", "") != clean_chat(self.text).replace(" ", "")
        return Outcome(True, self._said(sent) + (" (cut to fit the chat limit)" if cut else ""), {"messages": list(pieces)})


def _refusal(name: str, commands: list[int], total: int, policy: ActionPolicy) -> str:
    where = "the message" if total == 1 else "piece " + ", ".join(map(str, commands)) + f" of {total}"
    if not policy.allow_commands:
        why = "commands are not enabled"
    elif not policy.requesters:
        why = "no operator asked for it in this turn"
    else:
        others = ", ".join(sorted(policy.requesters - policy.operators))
        why = f"only operators may order commands, and {others} spoke in this turn"
    return (
        f'refused: {name}: {where} would start with "/" (or a look-alike after invisible characters), '
        f"which the server reads as a command; {why}. Say it without a leading slash."
    )


class Say(_Chat):
    """Say something in public chat (everyone nearby reads it)."""

    tool_name: ClassVar[str] = "say"
    text: str = Field(min_length=1, max_length=1000, description="What to say")


class Whisper(_Chat):
    """Whisper privately to one player."""

    tool_name: ClassVar[str] = "whisper"
    speaks: ClassVar[Speaks | None] = Speaks(to="player")
    player: str = Field(pattern=_PLAYER, description="Who to whisper to")
    text: str = Field(min_length=1, max_length=1000, description="What to say")

    def _limit(self) -> int:
        return CHAT_LIMIT - len(f"/tell {self.player} ")  # mineflayer puts this before every piece

    def _said(self, sent: str) -> str:
        return f"whispered to {self.player}: {sent!r}"


class GoTo(_Target):
    """Walk to coordinates or to a player. Returns when there (or when no path exists)."""

    tool_name: ClassVar[str] = "go_to"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 90.0
    range: float = Field(default=2, ge=0, le=16, description="How close is close enough, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"arrived at {_fmt_pos(result.get('position'))}"


class Follow(Tool):
    """Keep following a player until told to stop or given another movement."""

    tool_name: ClassVar[str] = "follow"
    job: ClassVar[bool] = True
    player: str = Field(pattern=_PLAYER, description="Who to follow")
    range: float = Field(default=2, ge=1, le=16, description="Distance to keep, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"now following {result.get('following')} (until stop or another movement)"


class Stop(Tool):
    """Stop what you are doing: walking, following, digging, fighting."""

    tool_name: ClassVar[str] = "stop"

    def read(self, result: dict[str, Any]) -> str:
        return f"stopped {result.get('stopped')}" if result.get("stopped") else "stopped (nothing was running)"


class LookAt(_Target):
    """Turn to look at coordinates or at a player."""

    tool_name: ClassVar[str] = "look_at"

    def read(self, result: dict[str, Any]) -> str:
        return "looking there now"


class Collect(Tool):
    """Find blocks of one type nearby, dig them and pick up what drops."""

    tool_name: ClassVar[str] = "collect"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 180.0
    block: str = Field(pattern=_NAME, description="Block name, e.g. oak_log, dirt, stone")
    count: int = Field(default=1, ge=1, le=64, description="How many blocks to collect")
    max_distance: int = Field(default=32, ge=1, le=64, description="Search radius in blocks")

    def read(self, result: dict[str, Any]) -> str:
        got = ", ".join(f"{v} {k}" for k, v in (result.get("collected") or {}).items())
        return f"dug {result.get('dug')} block(s), picked up {got or 'nothing'}"


class Dig(Tool):
    """Dig (break) the block at the given coordinates, walking there if needed."""

    tool_name: ClassVar[str] = "dig"
    job: ClassVar[bool] = True
    x: int
    y: int
    z: int

    def read(self, result: dict[str, Any]) -> str:
        return f"dug {result.get('dug')} at {_fmt_pos(result.get('at'))}"


class Place(Tool):
    """Place a block from the inventory at the given coordinates (next to a solid block)."""

    tool_name: ClassVar[str] = "place"
    job: ClassVar[bool] = True
    item: str = Field(pattern=_NAME, description="Block item to place, e.g. oak_planks")
    x: int
    y: int
    z: int

    def read(self, result: dict[str, Any]) -> str:
        return f"placed {result.get('placed')} at {_fmt_pos(result.get('at'))}"


class Equip(Tool):
    """Hold an item in the hand or wear it."""

    tool_name: ClassVar[str] = "equip"
    item: str = Field(pattern=_NAME, description="Item name from the inventory")
    destination: Literal["hand", "off-hand", "head", "torso", "legs", "feet"] = "hand"

    def read(self, result: dict[str, Any]) -> str:
        return f"equipped {result.get('equipped')} ({result.get('destination')})"


class Eat(Tool):
    """Eat food from the inventory (the best food when no item is named)."""

    tool_name: ClassVar[str] = "eat"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 15.0
    item: str | None = Field(default=None, pattern=_NAME, description="Food item name, optional")

    def read(self, result: dict[str, Any]) -> str:
        return f"ate {result.get('ate')}: food {result.get('food_before')} -> {result.get('food_after')}"


class Give(Tool):
    """Walk to a player and toss them items from the inventory."""

    tool_name: ClassVar[str] = "give"
    job: ClassVar[bool] = True
    gives: ClassVar[Gives | None] = Gives()
    player: str = Field(pattern=_PLAYER, description="Who receives the items")
    item: str = Field(pattern=_NAME, description="Item name, e.g. oak_log")
    count: int = Field(default=1, ge=1, le=64)

    def read(self, result: dict[str, Any]) -> str:
        extra = f" ({result['short']})" if result.get("short") else ""
        return f"tossed {result.get('count')} {result.get('gave')} to {result.get('to')}{extra}"


class Attack(Tool):
    """Fight a mob (by type, e.g. zombie) or a player. Attacking players needs an operator's order."""

    tool_name: ClassVar[str] = "attack"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    target: str = Field(pattern=r"^[A-Za-z0-9_]{1,32}$", description="Mob type or player name")
    duration_s: float = Field(default=10, ge=1, le=30, description="Give up after this many seconds")

    async def run(self, ctx: ToolContext) -> Outcome:
        if not ctx.policy.operator_order():
            snap = await ctx.bot.snapshot()
            if any(p.get("name") == self.target for p in snap.players):
                return Outcome(False, f"refused: attacking the player {self.target} needs an order from an operator")
        return await super().run(ctx)

    def read(self, result: dict[str, Any]) -> str:
        outcome = "it is dead" if result.get("defeated") else "it is still alive"
        return f"fought {result.get('target')} for {result.get('fought_s')} s, {result.get('hits', 0)} hit(s); {outcome}"


class Flee(Tool):
    """Run away from a threat (the nearest hostile when none is named)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    tool_name: ClassVar[str] = "flee"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    from_: str | None = Field(default=None, alias="from", pattern=r"^[A-Za-z0-9_]{1,32}$", description="Mob type or player to run from")
    distance: float = Field(default=16, ge=4, le=48, description="How far to run, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"ran from {result.get('fled_from') or 'danger'} to {_fmt_pos(result.get('position'))}"


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
    return f" {phrase} at {_fmt_pos(spot)}{placed}"


class _Spot(Tool):
    """Base of tools that may be given one block position (all of x, y, z, or none)."""

    x: int | None = Field(default=None, description="x, y, z: all or none")
    y: int | None = None
    z: int | None = None

    @model_validator(mode="after")
    def _all_or_none(self) -> _Spot:
        given = [c is not None for c in (self.x, self.y, self.z)]
        if any(given) and not all(given):
            raise ValueError("give all of x, y and z, or none of them")
        return self


class Craft(Tool):
    """Craft items from your inventory (a 3x3 recipe uses a crafting table within 32 blocks, or places yours). Says which ingredients are missing."""

    tool_name: ClassVar[str] = "craft"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 90.0
    item: str = Field(pattern=_NAME, description="e.g. wooden_pickaxe")
    count: int = Field(default=1, ge=1, le=64)

    def read(self, result: dict[str, Any]) -> str:
        made, asked = result.get("count"), result.get("asked")
        extra = f" (asked for {asked}; the recipe makes several at a time)" if isinstance(made, int) and isinstance(asked, int) and made > asked else ""
        used = _counts(result.get("used"))
        return f"crafted {made} {result.get('crafted')}{extra}" + (f" from {used}" if used else "") + _where(result.get("table"), "at the crafting table")


class Smelt(Tool):
    """Smelt or cook items in a furnace within 32 blocks (or places yours) with fuel you carry. What is not done in time keeps cooking; smelt there again to collect it."""

    tool_name: ClassVar[str] = "smelt"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 150.0
    item: str = Field(pattern=_NAME, description="e.g. raw_iron, beef")
    count: int = Field(default=1, ge=1, le=64)
    fuel: str | None = Field(default=None, pattern=_NAME, description="Default: coal or wood you carry")
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


class Build(_Spot):
    """Build with blocks you carry: shelter (walls and roof around you, 10 blocks) or pillar (a column beside you). Says what is missing first."""

    tool_name: ClassVar[str] = "build"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 120.0
    blueprint: Literal["shelter", "pillar"]
    block: str | None = Field(default=None, pattern=_NAME, description="Default: the most plentiful")
    height: int = Field(default=3, ge=1, le=10, description="Pillar height")

    def read(self, result: dict[str, Any]) -> str:
        already = f" ({result['already']} already there)" if result.get("already") else ""
        return f"built a {result.get('built')} of {result.get('block')} at {_fmt_pos(result.get('at'))}: placed {result.get('placed')}{already}"


class Sleep(Tool):
    """Sleep in a bed within 32 blocks (or places yours) at night, with no monsters near. The night passes once every player sleeps."""

    tool_name: ClassVar[str] = "sleep"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 120.0
    wait_s: int = Field(default=15, ge=0, le=60, description="Seconds to wait for the morning")

    def read(self, result: dict[str, Any]) -> str:
        where = _where(result.get("bed"), "in the bed") or " in bed"
        if result.get("woke"):
            return f"slept{where} and woke up in the morning (time {result.get('time')})"
        who = f" ({result['players_sleeping']} players asleep)" if result.get("players_sleeping") else ""
        return (
            f"lying{where}; still night{who}: it passes when every player sleeps. "
            "You stay in bed until morning; any movement gets you up"
        )


# Names and counts; the keys are checked against the item-name pattern all the same, but the
# schema the model reads is the short form (pydantic's patternProperties cost 35 more tokens).
_ItemCounts = Annotated[
    dict[Annotated[str, StringConstraints(pattern=_NAME)], Annotated[int, Field(ge=1, le=2304)]],
    WithJsonSchema({"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}),
]


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

    async def run(self, ctx: ToolContext) -> Outcome:
        out = await super().run(ctx)
        if out.ok and isinstance(out.data, dict) and not out.data.get(self.moved_key):
            return Outcome(False, f"{self.tool_name} failed: {out.text}", out.data)
        return out

    def read(self, result: dict[str, Any]) -> str:
        moved = _counts(result.get(self.moved_key)) or "nothing"
        text = f"{self.moved_key} {moved}{_where(result.get('chest'), self.where)}"
        for key, label in self.notes:
            if result.get(key):
                text += f"; {label}: {_counts(result[key])}"
        return text


class Store(_ChestTool):
    """Put items into a chest (the nearest within 32 blocks, or at x, y, z). Says what did not fit."""

    tool_name: ClassVar[str] = "store"
    moved_key: ClassVar[str] = "stored"
    where: ClassVar[str] = "in the chest"
    notes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("did_not_fit", "did not fit (the chest is full)"),
        ("not_in_inventory", "you did not have"),
    )
    items: _ItemCounts = Field(min_length=1, max_length=16, description='e.g. {"cobblestone": 32}')


class Take(_ChestTool):
    """Take items from a chest (the nearest within 32 blocks, or at x, y, z). Says what was not there."""

    tool_name: ClassVar[str] = "take"
    moved_key: ClassVar[str] = "took"
    where: ClassVar[str] = "from the chest"
    notes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("not_in_chest", "not in the chest"),
        ("no_room", "no room in your inventory for"),
    )
    items: _ItemCounts = Field(min_length=1, max_length=16, description='e.g. {"oak_log": 10}')


class Inventory(Query):
    """List what you carry."""

    tool_name: ClassVar[str] = "inventory"

    def answer(self, snap: Snapshot) -> Outcome:
        text = "inventory: " + (", ".join(f"{v} {k}" for k, v in sorted(snap.inventory.items())) or "empty")
        if snap.held:
            text += f"; holding {snap.held}"
        return Outcome(True, text, dict(snap.inventory))


class Nearby(Query):
    """List players, mobs and notable blocks around you."""

    tool_name: ClassVar[str] = "nearby"

    def answer(self, snap: Snapshot) -> Outcome:
        players = ", ".join(f"{p['name']} {p['distance']}m" for p in snap.players) or "none"
        mobs = ", ".join(f"{m['name']}{' (hostile)' if m.get('hostile') else ''} {m['distance']}m" for m in snap.mobs) or "none"
        blocks = ", ".join(f"{b['name']} x{b['count']} nearest {_fmt_pos(b.get('nearest'))}" for b in snap.blocks) or "nothing notable"
        data = snap.model_dump(mode="json", include={"players", "mobs", "blocks"})
        return Outcome(True, f"players: {players}; mobs: {mobs}; blocks: {blocks}", data)


class Status(Query):
    """Your health, food, position, time of day and what you are doing."""

    tool_name: ClassVar[str] = "status"

    def answer(self, snap: Snapshot) -> Outcome:
        text = (
            f"health {snap.health}/20, food {snap.food}/20, at {_fmt_pos(snap.position)} "
            f"in the {snap.dimension}, time {snap.time_of_day}"
            + (", raining" if snap.raining else "")
            + (", asleep in bed" if snap.sleeping else "")
            + (f", busy with {snap.job}" if snap.job else "")
            + (f", following {snap.following}" if snap.following else "")
        )
        return Outcome(True, text, snap.model_dump(mode="json"))


def tool_specs(disabled: Collection[str] = ()) -> list[dict[str, Any]]:
    """OpenAI tool specs for every registered tool, derived from the classes, less the
    ``disabled`` ones (the ``disabled_tools`` setting)."""
    return [cls.spec() for name, cls in TOOLS.items() if name not in disabled]


def _explain(name: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    return f"invalid arguments for {name}: " + "; ".join(parts)


def parse_tool(call: ToolCall) -> Tool | str:
    """The tool instance a call asks for, or why there is none (text the model can read)."""
    if call.error:
        return call.error
    cls = TOOLS.get(call.name)
    if cls is None:
        return f"unknown tool {call.name!r}; tools are: {', '.join(TOOLS)}"
    if call.arguments is None:
        return f"arguments for {call.name} are not a JSON object: {call.raw_arguments[:200]!r}"
    try:
        return cls.model_validate(call.arguments)
    except ValidationError as err:
        return _explain(call.name, err)


def validate_tool_call(call: ToolCall) -> ToolCall:
    """Fill ``error`` for an unknown tool or invalid arguments; normalise valid arguments."""
    if call.error:
        return call
    tool = parse_tool(call)
    if isinstance(tool, str):
        return call.model_copy(update={"error": tool})
    return call.model_copy(update={"arguments": tool.wire_args()})


async def dispatch(bot: BotLike, call: ToolCall, policy: ActionPolicy | None = None) -> Outcome:
    """Run one tool call. Model mistakes and failed actions become text, never exceptions."""
    policy = policy or ActionPolicy()
    if call.name in policy.disabled:  # not offered; a model may still call it from memory
        return Outcome(False, f"error: {call.name} is switched off on this server; use another tool")
    tool = parse_tool(call)
    if isinstance(tool, str):
        return Outcome(False, f"error: {tool}")
    try:
        return await tool.run(ToolContext(bot, policy))
    except EmilError as exc:
        return Outcome(False, f"{tool.tool_name} failed: {exc}")

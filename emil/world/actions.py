"""The NPC's tools: one pydantic argument model per tool, tool specs derived from them, dispatch.

The model reads each tool's docstring and field descriptions; the OpenAI tool spec is generated
from the model class (never written twice). :func:`dispatch` turns a tool call into a bridge
action and returns a :class:`ToolOutcome` whose ``text`` is what the model reads next: invalid
arguments and failed actions come back as readable text ("no oak_log within 32 blocks"), never
as exceptions that end the turn.

Safety: player chat is untrusted input and nothing here evaluates anything as code. ``say`` and
``whisper`` strip newlines and split to the protocol's 256-character chat limit; text starting
with "/" (a server command) is refused unless the operator enabled commands, and then only on
behalf of an allowlisted operator. Attacking a player is operator-only too (self-defence is a
reflex and needs no permission).

Not offered: ``craft``. flying-squid 1.12 (the embedded server) computes no crafting results,
so the tool could never be shown to work here; see docs/world.md.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from emil.exceptions import EmilError
from emil.llm.types import ToolCall

__all__ = [
    "CHAT_LIMIT",
    "TOOLS",
    "ActionPolicy",
    "Attack",
    "BotLike",
    "Collect",
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
    "Place",
    "Say",
    "Status",
    "Stop",
    "ToolArgs",
    "ToolOutcome",
    "Whisper",
    "dispatch",
    "split_chat",
    "tool_specs",
    "validate_tool_call",
]

CHAT_LIMIT = 256
"""Longest chat message a 1.20 client may send."""

_NAME = r"^[a-z0-9_]+$"
_PLAYER = r"^[A-Za-z0-9_]{1,16}$"


class ToolArgs(BaseModel):
    """Base of every tool's arguments. The class docstring is the tool's description."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tool_name: ClassVar[str]
    query: ClassVar[bool] = False
    """Answered from a snapshot, without an action."""
    timeout_s: ClassVar[float] = 60.0


class _Target(ToolArgs):
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


class Say(ToolArgs):
    """Say something in public chat (everyone nearby reads it)."""

    tool_name: ClassVar[str] = "say"
    text: str = Field(min_length=1, max_length=1000, description="What to say")


class Whisper(ToolArgs):
    """Whisper privately to one player."""

    tool_name: ClassVar[str] = "whisper"
    player: str = Field(pattern=_PLAYER, description="Who to whisper to")
    text: str = Field(min_length=1, max_length=1000, description="What to say")


class GoTo(_Target):
    """Walk to coordinates or to a player. Returns when there (or when no path exists)."""

    tool_name: ClassVar[str] = "go_to"
    timeout_s: ClassVar[float] = 90.0
    range: float = Field(default=2, ge=0, le=16, description="How close is close enough, in blocks")


class Follow(ToolArgs):
    """Keep following a player until told to stop or given another movement."""

    tool_name: ClassVar[str] = "follow"
    player: str = Field(pattern=_PLAYER, description="Who to follow")
    range: float = Field(default=2, ge=1, le=16, description="Distance to keep, in blocks")


class Stop(ToolArgs):
    """Stop what you are doing: walking, following, digging, fighting."""

    tool_name: ClassVar[str] = "stop"


class LookAt(_Target):
    """Turn to look at coordinates or at a player."""

    tool_name: ClassVar[str] = "look_at"


class Collect(ToolArgs):
    """Find blocks of one type nearby, dig them and pick up what drops."""

    tool_name: ClassVar[str] = "collect"
    timeout_s: ClassVar[float] = 180.0
    block: str = Field(pattern=_NAME, description="Block name, e.g. oak_log, dirt, stone")
    count: int = Field(default=1, ge=1, le=64, description="How many blocks to collect")
    max_distance: int = Field(default=32, ge=1, le=64, description="Search radius in blocks")


class Dig(ToolArgs):
    """Dig (break) the block at the given coordinates, walking there if needed."""

    tool_name: ClassVar[str] = "dig"
    timeout_s: ClassVar[float] = 60.0
    x: int
    y: int
    z: int


class Place(ToolArgs):
    """Place a block from the inventory at the given coordinates (next to a solid block)."""

    tool_name: ClassVar[str] = "place"
    item: str = Field(pattern=_NAME, description="Block item to place, e.g. oak_planks")
    x: int
    y: int
    z: int


class Equip(ToolArgs):
    """Hold an item in the hand or wear it."""

    tool_name: ClassVar[str] = "equip"
    item: str = Field(pattern=_NAME, description="Item name from the inventory")
    destination: Literal["hand", "off-hand", "head", "torso", "legs", "feet"] = "hand"


class Eat(ToolArgs):
    """Eat food from the inventory (the best food when no item is named)."""

    tool_name: ClassVar[str] = "eat"
    timeout_s: ClassVar[float] = 15.0
    item: str | None = Field(default=None, pattern=_NAME, description="Food item name, optional")


class Give(ToolArgs):
    """Walk to a player and toss them items from the inventory."""

    tool_name: ClassVar[str] = "give"
    player: str = Field(pattern=_PLAYER, description="Who receives the items")
    item: str = Field(pattern=_NAME, description="Item name, e.g. oak_log")
    count: int = Field(default=1, ge=1, le=64)


class Attack(ToolArgs):
    """Fight a mob (by type, e.g. zombie) or a player. Attacking players needs an operator's order."""

    tool_name: ClassVar[str] = "attack"
    timeout_s: ClassVar[float] = 40.0
    target: str = Field(pattern=r"^[A-Za-z0-9_]{1,32}$", description="Mob type or player name")
    duration_s: float = Field(default=10, ge=1, le=30, description="Give up after this many seconds")


class Flee(ToolArgs):
    """Run away from a threat (the nearest hostile when none is named)."""

    tool_name: ClassVar[str] = "flee"
    timeout_s: ClassVar[float] = 40.0
    from_: str | None = Field(default=None, alias="from", pattern=r"^[A-Za-z0-9_]{1,32}$", description="Mob type or player to run from")
    distance: float = Field(default=16, ge=4, le=48, description="How far to run, in blocks")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Inventory(ToolArgs):
    """List what you carry."""

    tool_name: ClassVar[str] = "inventory"
    query: ClassVar[bool] = True


class Nearby(ToolArgs):
    """List players, mobs and notable blocks around you."""

    tool_name: ClassVar[str] = "nearby"
    query: ClassVar[bool] = True


class Status(ToolArgs):
    """Your health, food, position, time of day and what you are doing."""

    tool_name: ClassVar[str] = "status"
    query: ClassVar[bool] = True


TOOLS: dict[str, type[ToolArgs]] = {
    cls.tool_name: cls
    for cls in (Say, Whisper, GoTo, Follow, Stop, LookAt, Collect, Dig, Place, Equip, Eat, Give,
                Attack, Flee, Inventory, Nearby, Status)
}


class ActionPolicy(BaseModel):
    """What the operator allows. ``requester`` is who asked for this turn (None: Emil itself)."""

    model_config = ConfigDict(frozen=True)

    allow_commands: bool = False
    """Let say() send text starting with "/" (server commands), for operators only."""
    operators: frozenset[str] = frozenset()
    """Player names allowed to order operator-only behaviour."""
    requester: str | None = None
    max_chat_messages: int = Field(default=3, ge=1, le=10)
    """A long say() is split into at most this many chat messages; the rest is cut."""

    def is_operator(self) -> bool:
        return self.requester is not None and self.requester in self.operators


class ToolOutcome(BaseModel):
    """What a tool call did: ``text`` is what the model reads; ``data`` is for logs/recordings."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    text: str
    data: Any = None


class BotLike(Protocol):
    """The part of :class:`emil.world.bridge.Bot` that dispatch needs."""

    async def act(self, name: str, args: dict[str, Any] | None = None, timeout: float = 60.0) -> Any:  # noqa: ASYNC109
        ...

    async def snapshot(self) -> Any:
        ...


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's "title" keys: they cost prompt tokens and tell the model nothing."""
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _compact(params: dict[str, Any]) -> dict[str, Any]:
    """Optional fields as plain types (``anyOf [X, null]`` -> X): same meaning, fewer tokens."""
    params.pop("description", None)  # the tool description already says it
    for name, prop in list(params.get("properties", {}).items()):
        options = prop.get("anyOf")
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            other = next(o for o in options if o != {"type": "null"})
            rest = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            params["properties"][name] = {**other, **rest}
    return params


def tool_specs(settings: Any = None) -> list[dict[str, Any]]:
    """OpenAI tool specs for every offered tool, derived from the argument models.

    ``settings`` may carry ``disabled_tools`` (names) to leave some out.
    """
    disabled = set(getattr(settings, "disabled_tools", ()) or ())
    specs = []
    for name, cls in TOOLS.items():
        if name in disabled:
            continue
        params = _compact(_strip_titles(cls.model_json_schema(by_alias=True)))
        params.setdefault("properties", {})
        specs.append({
            "type": "function",
            "function": {"name": name, "description": (cls.__doc__ or "").strip(), "parameters": params},
        })
    return specs


def _explain(name: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    return f"invalid arguments for {name}: " + "; ".join(parts)


def validate_tool_call(call: ToolCall) -> ToolCall:
    """Fill ``error`` for an unknown tool or invalid arguments; normalise valid arguments."""
    if call.error:
        return call
    cls = TOOLS.get(call.name)
    if cls is None:
        return call.model_copy(update={"error": f"unknown tool {call.name!r}; tools are: {', '.join(TOOLS)}"})
    if call.arguments is None:
        return call.model_copy(update={"error": f"arguments for {call.name} are not a JSON object: {call.raw_arguments[:200]!r}"})
    try:
        parsed = cls.model_validate(call.arguments)
    except ValidationError as err:
        return call.model_copy(update={"error": _explain(call.name, err)})
    return call.model_copy(update={"arguments": parsed.model_dump(by_alias=True, exclude_none=True)})


def split_chat(text: str, limit: int = CHAT_LIMIT, max_messages: int = 3) -> list[str]:
    """Newlines and control characters to spaces, then cut into chat-sized pieces at spaces."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text.replace("\r", " ").replace("\n", " "))
    flat = " ".join(flat.split())
    pieces: list[str] = []
    while flat and len(pieces) < max_messages:
        if len(flat) <= limit:
            pieces.append(flat)
            break
        cut = flat.rfind(" ", 0, limit + 1)
        if cut <= limit // 2:
            cut = limit
        pieces.append(flat[:cut].rstrip())
        flat = flat[cut:].lstrip()
    return pieces


async def dispatch(bot: BotLike, call: ToolCall, policy: ActionPolicy | None = None) -> ToolOutcome:
    """Run one tool call. Model mistakes and failed actions become text, never exceptions."""
    policy = policy or ActionPolicy()
    call = validate_tool_call(call)
    if call.error:
        return ToolOutcome(ok=False, text=f"error: {call.error}")
    cls = TOOLS[call.name]
    args = dict(call.arguments or {})
    try:
        if cls.query:
            return _answer_query(call.name, await bot.snapshot())
        if call.name in ("say", "whisper"):
            return await _chat(bot, call.name, args, policy)
        if call.name == "attack" and not policy.is_operator():
            snap = await bot.snapshot()
            if any(p.get("name") == args["target"] for p in getattr(snap, "players", [])):
                return ToolOutcome(ok=False, text=f"refused: attacking the player {args['target']} needs an order from an operator")
        res = await bot.act(call.name, args, timeout=cls.timeout_s)
    except EmilError as exc:
        return ToolOutcome(ok=False, text=f"{call.name} failed: {exc}")
    if not res.ok:
        return ToolOutcome(ok=False, text=f"{call.name} failed: {res.error}", data={"elapsed_ms": res.elapsed_ms})
    return ToolOutcome(ok=True, text=_describe(call.name, res.result), data=res.result)


async def _chat(bot: BotLike, name: str, args: dict[str, Any], policy: ActionPolicy) -> ToolOutcome:
    text = str(args["text"])
    if text.lstrip().startswith("/") and not (policy.allow_commands and policy.is_operator()):
        return ToolOutcome(ok=False, text='refused: chat starting with "/" is a server command, and commands are not enabled for this request')
    limit = CHAT_LIMIT if name == "say" else CHAT_LIMIT - len(args["player"]) - 7  # "/tell <name> "
    pieces = split_chat(text, limit, policy.max_chat_messages)
    if not pieces:
        return ToolOutcome(ok=False, text=f"{name} failed: nothing to say after removing control characters")
    for piece in pieces:
        res = await bot.act(name, {**args, "text": piece}, timeout=10)
        if not res.ok:
            return ToolOutcome(ok=False, text=f"{name} failed: {res.error}")
    sent = " ".join(pieces)
    cut = len(sent) < len(" ".join(text.split()))
    where = "said" if name == "say" else f"whispered to {args['player']}"
    return ToolOutcome(ok=True, text=f"{where}: {sent!r}" + (" (cut to fit the chat limit)" if cut else ""), data={"messages": pieces})


def _fmt_pos(p: Any) -> str:
    if isinstance(p, dict):
        return f"({p.get('x')}, {p.get('y')}, {p.get('z')})"
    return "?"


def _describe(name: str, r: Any) -> str:
    r = r if isinstance(r, dict) else {}
    if name == "go_to":
        return f"arrived at {_fmt_pos(r.get('position'))}"
    if name == "follow":
        return f"now following {r.get('following')} (until stop or another movement)"
    if name == "stop":
        return f"stopped {r.get('stopped')}" if r.get("stopped") else "stopped (nothing was running)"
    if name == "collect":
        got = ", ".join(f"{v} {k}" for k, v in (r.get("collected") or {}).items())
        return f"dug {r.get('dug')} block(s), picked up {got or 'nothing'}"
    if name == "dig":
        return f"dug {r.get('dug')} at {_fmt_pos(r.get('at'))}"
    if name == "place":
        return f"placed {r.get('placed')} at {_fmt_pos(r.get('at'))}"
    if name == "equip":
        return f"equipped {r.get('equipped')} ({r.get('destination')})"
    if name == "eat":
        return f"ate {r.get('ate')}: food {r.get('food_before')} -> {r.get('food_after')}"
    if name == "give":
        extra = f" ({r['short']})" if r.get("short") else ""
        return f"tossed {r.get('count')} {r.get('gave')} to {r.get('to')}{extra}"
    if name == "attack":
        return f"fought {r.get('target')} for {r.get('fought_s')} s, {r.get('hits', 0)} hit(s); " + ("it is dead" if r.get("defeated") else "it is still alive")
    if name == "flee":
        return f"ran from {r.get('fled_from') or 'danger'} to {_fmt_pos(r.get('position'))}"
    if name == "look_at":
        return "looking there now"
    return json.dumps(r)[:500]


def _answer_query(name: str, snap: Any) -> ToolOutcome:
    data = snap.model_dump() if hasattr(snap, "model_dump") else dict(snap)
    if not data.get("connected"):
        return ToolOutcome(ok=False, text=f"{name}: not connected to the server right now", data=data)
    if name == "inventory":
        inv = data.get("inventory") or {}
        text = "inventory: " + (", ".join(f"{v} {k}" for k, v in sorted(inv.items())) or "empty")
        if data.get("held"):
            text += f"; holding {data['held']}"
        return ToolOutcome(ok=True, text=text, data=inv)
    if name == "nearby":
        players = ", ".join(f"{p['name']} {p['distance']}m" for p in data.get("players") or []) or "none"
        mobs = ", ".join(f"{m['name']}{' (hostile)' if m.get('hostile') else ''} {m['distance']}m" for m in data.get("mobs") or []) or "none"
        blocks = ", ".join(f"{b['name']} x{b['count']} nearest {_fmt_pos(b.get('nearest'))}" for b in data.get("blocks") or []) or "nothing notable"
        return ToolOutcome(ok=True, text=f"players: {players}; mobs: {mobs}; blocks: {blocks}", data={k: data.get(k) for k in ("players", "mobs", "blocks")})
    text = (
        f"health {data.get('health')}/20, food {data.get('food')}/20, at {_fmt_pos(data.get('position'))} "
        f"in the {data.get('dimension')}, time {data.get('time_of_day')}"
        + (", raining" if data.get("raining") else "")
        + (f", busy with {data['job']}" if data.get("job") else "")
        + (f", following {data['following']}" if data.get("following") else "")
    )
    return ToolOutcome(ok=True, text=text, data=data)

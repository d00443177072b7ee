"""What a tool is: one class carries everything Emil's runtime needs to know about it.

A tool is a subclass of :class:`Tool` (plus one JS function of the same name in
``js/emil_actions.js`` when it runs in the bot). The class holds

- the arguments: pydantic fields, validated before anything runs; the OpenAI tool spec is
  derived from them and from the class docstring (the description the model reads);
- ``tool_name``: the name the model calls, and the name of the JS function;
- ``job``: a long job (walking, digging, fighting) pre-empts the running one and is reached by
  stop, abort and the time limit; a non-job (say, stop, look_at) runs beside it;
- ``timeout_s``: the bridge's time limit for one run;
- ``shapes``: alternative sets of fields a call gives exactly one of (x, y and z, or player);
- ``rules``: the rows of the rule table (emil.trust.rules) its calls fall under, written in
  its own module (rows no one tool owns, such as items held for others, come from
  emil.trust.rules); none: row ``any``;
- :meth:`Tool.guarded`: its target check: which of its rows applies to this call (whose chest,
  which mob, whose items would move), decided through the guard, the run when allowed and what
  moved noted (the default: row ``any``, then the run);
- :meth:`Tool.read`: how the JS function's result reads to the model;
- :meth:`Tool.run`: how it runs, when it is not one plain bridge action (chat pieces, a gate
  before the action, an answer from the snapshot).

Defining the class registers it in :data:`TOOLS` and its rows in the rule table (a class
without ``tool_name`` is a base for others). Nothing elsewhere switches on tool names: the spec
list, the validation and the body (``BotWorld``) in :mod:`emil.world.actions` read the registry
and call the class; the body calls :meth:`Tool.guarded` with the guard (:mod:`emil.world.guard`).

Two result types, because they are two things: :class:`~emil.world.bridge.ActionResult` is the
bot's raw reply to one JS call (a JSON result or an error string, its own time), and
:class:`Outcome` is what the model reads back for one tool call (text, plus data for the
recording). A tool turns the first into the second; a tool may make several calls or none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from emil.config import Settings
from emil.trust.ledger import Ledger, Source
from emil.trust.people import People
from emil.trust.rules import ANY, Rule, Verdict, declare
from emil.world.wire import ActionResult, Snapshot

__all__ = [
    "ITEM_NAME",
    "PLAYER_NAME",
    "TOOLS",
    "ActionPolicy",
    "BotLike",
    "Fate",
    "Gives",
    "Guarding",
    "MemoryPort",
    "Outcome",
    "Query",
    "Speaks",
    "Tool",
    "ToolContext",
    "fmt_pos",
    "moved",
    "moved_count",
    "run_leaving_held",
]

ITEM_NAME = r"^[a-z0-9_]+$"
"""The pattern of an item or block name argument."""
PLAYER_NAME = r"^[A-Za-z0-9_]{1,16}$"
"""The pattern of a player name argument."""
TARGET_NAME = r"^[A-Za-z0-9_]{1,32}$"
"""The pattern of a mob type or player name argument."""
_UNSPOKEN_PATTERNS = frozenset({PLAYER_NAME, TARGET_NAME})
"""Checked on every call, left out of the spec the model reads (:func:`_lean_schema`): the
model writes names as the observation shows them, and 17 tokens each, ten times over, bought
nothing. An item name's pattern stays: it tells the model ids are lower case with underscores."""


STRICT_ONLY = frozenset({"propertyNames", "minProperties", "maxProperties"})
"""Schema keys only a strict spec carries (a grammar enforces them; the plain spec's reader
saves their tokens, and the tool checks them on every call all the same)."""


def fmt_pos(p: Any) -> str:
    """``(x, y, z)`` of a position dict from the bot ("?" when there is none)."""
    if isinstance(p, dict):
        return f"({p.get('x')}, {p.get('y')}, {p.get('z')})"
    return "?"


Fate = Literal["ran", "invalid", "timed_out", "not_run", "repeated", "aborted", "stopping"]
"""What became of a tool call, as a field (replay and the figures read it, never the text):

- ``ran``: the world ran it (``ok`` and the text say how it went: done, failed, refused);
- ``invalid``: never reached the world: a malformed call, an unknown tool, invalid arguments, a
  switched-off tool (the text is "error: ...");
- ``timed_out``: it ran past the action's time limit and was aborted;
- ``not_run``: an interrupt was pending, so it never ran (``interrupt`` says which);
- ``repeated``: the same call (name and arguments) already ran in this turn, so it never ran;
- ``aborted``: an interrupt cancelled it as it ran (``interrupt`` says which);
- ``stopping``: Emil was stopping, so it never ran.
"""


@dataclass(frozen=True)
class Outcome:
    """A tool call's result as the model will read it.

    ``text`` is the tool result message; ``data`` (JSON) goes to the recording only;
    ``elapsed_ms`` is filled by whoever timed the call (the agent loop times it when unset).
    The turn engine's own decisions are fields (``fate``, ``interrupt``, ``note``) and the
    text is rendered from them (emil.agent.turn), so nothing reads them back out of the text.
    """

    ok: bool
    text: str
    data: JsonValue = None
    elapsed_ms: float | None = None
    rule: str = ""
    """The row of the rule table (emil.trust.rules) that allowed or refused it ("" when no
    guard saw it: a malformed call, a switched-off tool)."""
    fate: Fate = "ran"
    """What became of the call (:data:`Fate`)."""
    interrupt: str = ""
    """The interrupt's reason, for ``not_run`` and ``aborted`` ("hit by zombie")."""
    note: str = ""
    """What the turn engine added at the end of ``text`` (the calls of the answer dropped past
    its cap); ``text`` without it is the world's own answer."""


class ActionPolicy(BaseModel):
    """What the operator allows (the settings: ``allow_commands``, ``operators``, the tools
    switched off: ``Settings.tools_off``), and whose words this turn acts on."""

    model_config = ConfigDict(frozen=True)

    settings: Settings = Settings()
    requesters: frozenset[str] = frozenset()
    """Every player whose words are in this turn (empty: Emil acts on its own)."""
    max_chat_messages: int = Field(default=3, ge=1, le=10)
    """A long say() is split into at most this many chat messages; the rest is cut."""

    def operator_order(self) -> bool:
        """True when this turn acts on operators' words only: at least one player spoke, and
        every player whose words are in the turn is an operator. Anyone else's words in the
        turn may be what asks for the act, so they take the order away."""
        return bool(self.requesters) and self.requesters <= frozenset(self.settings.operators)

    def may_command(self) -> bool:
        """True when chat that reads as a server command may go out this turn."""
        return self.settings.allow_commands and self.operator_order()


class BotLike(Protocol):
    """The part of :class:`emil.world.bridge.Bot` that tools use."""

    async def act(
        self,
        name: str,
        args: Mapping[str, JsonValue] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - the bridge's contract: a timeout aborts the JS job
        *,
        job: bool = False,
    ) -> ActionResult: ...

    async def snapshot(self) -> Snapshot: ...


class Guarding(Protocol):
    """What a tool's target check (:meth:`Tool.guarded`) and the chat tools ask of the guard
    that checks the call (emil.world.guard.Guard): the rule table's verdicts for this turn, the
    ownership ledger, refusals, and the chat caps."""

    settings: Settings
    """What the guard applies (``give_items_per_hour``, Emil's ``bot_name``...)."""
    people: People
    ledger: Ledger
    known_players: set[str]
    """Lower-case names of every player Emil has met."""

    def requesters(self) -> frozenset[str]: ...
    def decide(self, row: Rule, owner: str | None = None) -> Verdict: ...
    async def inventory(self, bot: BotLike) -> dict[str, int] | None: ...
    def sources(self, inventory: Mapping[str, int], item: str, n: int, *,
                theirs: str | None) -> tuple[Source, Verdict | None]: ...
    def spent(self, item: str, src: Source, n: int, *, theirs: str | None) -> None: ...
    def reserved(self) -> dict[str, JsonValue]: ...
    def chest_owner(self, found: Mapping[str, Any]) -> tuple[str, str | None]: ...
    def command_verdict(self, piece: str) -> tuple[Verdict, bool]: ...
    async def ask_to_confirm(self, bot: BotLike, piece: str) -> str | None: ...
    def confirm_text(self, tool: str, piece: str, code: str) -> str: ...
    async def refuse(self, bot: BotLike, tool: Tool, verdict: Verdict, *, what: str = "") -> Outcome: ...
    def chat_room(self) -> tuple[int, str]: ...
    def chat_sent(self, n: int) -> None: ...
    async def pace(self) -> None: ...
    def js_authority(self, **more: JsonValue) -> dict[str, JsonValue]: ...


class MemoryPort(Protocol):
    """What the memory tools (``recall``, ``remember``) use instead of the bot: the session's
    archive and notes (emil.memory.tools.MemoryTools implements it). Each returns (ok, text)."""

    def recall(self, query: str, *, player: str | None = None,
               audience: frozenset[str] = frozenset()) -> tuple[bool, str]: ...

    def remember(self, text: str, *, about: str | None = None) -> tuple[bool, str]: ...


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may use: the bot, the policy of this turn, the guard that checked
    the call (emil.world.guard), what the guard adds to the bot's arguments (the chest it
    resolved, the authority the bot checks again), and the services a tool needs beside the
    bot (None where a session has none: the tool says so)."""

    bot: BotLike
    policy: ActionPolicy = field(default_factory=ActionPolicy)
    guard: Guarding | None = None
    extra: Mapping[str, JsonValue] = field(default_factory=dict)
    memory: MemoryPort | None = None
    """The session's archive and notes, for ``recall`` and ``remember``."""


@dataclass(frozen=True)
class Gives:
    """A tool that gives items to a player, by the names of its arguments: who receives them,
    which item and how many (None: one). The notes learn the gift when the call succeeds."""

    to: str = "player"
    item: str = "item"
    count: str | None = "count"


@dataclass(frozen=True)
class Speaks:
    """A tool whose argument ``text`` is Emil's words in chat, heard by the player its argument
    ``to`` names (None: everyone nearby). The notes learn the promises in them."""

    text: str = "text"
    to: str | None = None


TOOLS: dict[str, type[Tool]] = {}
"""Every tool class defined so far, by ``tool_name``, in definition order (the registry)."""


class Tool(BaseModel):
    """Base of every tool: the fields are its arguments, the class docstring its description."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_name: ClassVar[str] = ""
    """The name the model calls and the JS function's name; "" for a base class."""
    job: ClassVar[bool] = False
    """A long job: pre-empts the running job; stop, abort and the time limit reach it."""
    timeout_s: ClassVar[float] = 60.0
    """The bridge's time limit for one run (the agent loop has its own backstop)."""
    gives: ClassVar[Gives | None] = None
    """What it gives to whom, when it gives items (what Emil learns from a call: emil.memory)."""
    speaks: ClassVar[Speaks | None] = None
    """Which argument is speech and to whom, when it speaks."""
    bridged: ClassVar[bool] = True
    """Runs a JS function of the same name in the bot (False: answered in Python, e.g. from a
    snapshot or from the session's memory)."""
    rules: ClassVar[tuple[Rule, ...]] = ()
    """The rows of the rule table its calls fall under (:meth:`guarded` picks one); none: row
    ``any``."""
    passes_turn: ClassVar[bool] = False
    """Calling it ends the turn (``wait``: emil.world.waiting); offered only when every answer
    must call a tool (``tool_choice`` "required"), since otherwise an answer without calls
    ends the turn."""
    shapes: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """Alternative sets of fields of which a call gives exactly one set whole and no field of
    another (an empty set: none of them), e.g. x, y and z, or player. Checked on every call; a
    strict spec says it as an ``anyOf`` of the shapes, so the server's grammar holds the model
    to one (field descriptions alone did not: docs/llm.md)."""

    @model_validator(mode="after")
    def _one_shape(self) -> Tool:
        if not self.shapes:
            return self
        given = {n for shape in self.shapes for n in shape if getattr(self, n) is not None}
        if any(given == set(shape) for shape in self.shapes):
            return self
        said = [_and(shape) for shape in self.shapes if shape]
        if len(said) < len(self.shapes):  # one shape is "none of them"
            raise ValueError(f"give all of {' or all of '.join(said)}, or none of them")
        touched = sum(1 for shape in self.shapes if given & set(shape))
        raise ValueError(f"give either {', or '.join(said)}" + (", not both" if touched > 1 else ""))

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.__dict__.get("tool_name")
        if not name:
            return
        if name in TOOLS and TOOLS[name].__qualname__ != cls.__qualname__:
            raise TypeError(f"two tools named {name!r}: {TOOLS[name].__qualname__} and {cls.__qualname__}")
        TOOLS[name] = cls
        unknown = {n for shape in cls.shapes for n in shape} - set(cls.model_fields)
        if unknown:
            raise TypeError(f"{cls.__qualname__}.shapes names no field {sorted(unknown)}")
        for row in cls.rules:
            declare(row, name)

    @classmethod
    def spec(cls, *, strict: bool = False) -> dict[str, Any]:
        """The OpenAI tool spec, derived from the fields and the docstring. ``strict`` marks it
        ``"strict": true``: with ``tool_choice`` "required" vLLM then holds the arguments to the
        schema too, not only the tool's name (without it vLLM 0.32 let any JSON through, and a
        small model added properties: ``follow(type=...)``, ``build(fuel=...)``, docs/llm.md)."""
        params = _compact(_lean_schema(cls.model_json_schema(by_alias=True), strict=strict))
        params.setdefault("properties", {})
        if strict and cls.shapes:
            params = _shaped(params, [[cls.model_fields[n].alias or n for n in shape] for shape in cls.shapes])
        function: dict[str, Any] = {"name": cls.tool_name, "description": (cls.__doc__ or "").strip(), "parameters": params}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def wire_args(self) -> dict[str, JsonValue]:
        """The arguments as the JS function receives them (aliases, unset optionals left out)."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def read(self, result: dict[str, Any]) -> str:
        """How a successful JS result reads to the model; override per tool."""
        return json.dumps(result)[:500]

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """The call checked against the tool's rows and run when allowed (``ctx.guard`` is
        ``guard``); override when the target decides the row. The default: row ``any``."""
        out = await self.run(ctx)
        return out if out.rule else replace(out, rule=ANY.id)

    def failed(self, error: str | None) -> Outcome:
        """The outcome of a call that could not be done (what the model reads)."""
        return Outcome(False, f"{self.tool_name} failed: {error}")

    async def run(self, ctx: ToolContext) -> Outcome:
        """One bridge action named ``tool_name``; override when the tool is not that."""
        reply = await ctx.bot.act(self.tool_name, {**self.wire_args(), **ctx.extra}, timeout=self.timeout_s, job=self.job)
        if not reply.ok:
            return Outcome(False, f"{self.tool_name} failed: {reply.error}")
        return Outcome(True, self.read(reply.result if isinstance(reply.result, dict) else {}), reply.result)


class Query(Tool):
    """Base of tools answered from one snapshot, without a bridge action."""

    bridged: ClassVar[bool] = False

    async def run(self, ctx: ToolContext) -> Outcome:
        snap = await ctx.bot.snapshot()
        if not snap.connected:
            return Outcome(False, f"{self.tool_name}: not connected to the server right now")
        return self.answer(snap)

    def answer(self, snap: Snapshot) -> Outcome:
        """The answer to this query from a connected snapshot."""
        raise NotImplementedError(f"{type(self).__name__} must define answer()")


async def run_leaving_held(tool: Tool, guard: Guarding, ctx: ToolContext) -> Outcome:
    """Run a job that picks its own items (craft, smelt, build, sleep, eat without an item): the
    bot gets what it must not touch, the items held for players this turn may not use (row
    use.held); the call's row is ``any``."""
    reserved = guard.reserved()
    out = await tool.run(replace(ctx, extra={**ctx.extra, "reserved": reserved}) if reserved else ctx)
    return replace(out, rule=ANY.id)


def moved(data: JsonValue, key: str) -> dict[str, int]:
    """``{item: n}`` under ``key`` of a JS result (what moved), whole counts only."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def moved_count(data: JsonValue, key: str) -> int:
    """The whole count under ``key`` of a JS result (0 when there is none)."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _lean_schema(schema: Any, *, names: bool = False, strict: bool = False) -> Any:
    """Drop what costs prompt tokens and tells the model nothing: pydantic's "title" keys,
    ``"additionalProperties": false`` (156 tokens over the 26 tools) and the name patterns
    (:data:`_UNSPOKEN_PATTERNS`, 170). The arguments are checked against the tool class
    (``extra="forbid"``, the patterns) whatever the spec says, and a wrong call goes back to the
    model as its result; a server that holds the model to the schema (``tool_choice``
    "required", ``--tool-strict-level parameter``) compiles it with xgrammar's strict mode, where
    a property not listed is not allowed anyway. Every prompt carries the specs: 326 tokens less
    made the 8,000-token budget's trims 10% rarer (docs/memory.md). ``names``: ``schema`` is a
    "properties" mapping, whose keys are argument names. ``strict``: a strict spec's schema,
    which keeps the name patterns and :data:`STRICT_ONLY` keys, since the grammar then holds the
    model to them (without, the 0.5B model sent ``attack(target=" zombies")``, docs/llm.md)."""
    if isinstance(schema, dict):
        if names:
            return {k: _lean_schema(v, strict=strict) for k, v in schema.items()}
        return {k: _lean_schema(v, names=k == "properties", strict=strict) for k, v in schema.items()
                if k != "title" and not (k == "additionalProperties" and v is False)
                and not (k == "pattern" and v in _UNSPOKEN_PATTERNS and not strict)
                and not (k in STRICT_ONLY and not strict)}
    if isinstance(schema, list):
        return [_lean_schema(v, strict=strict) for v in schema]
    return schema


def _and(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _shaped(params: dict[str, Any], shapes: list[list[str]]) -> dict[str, Any]:
    """One object schema per shape under ``anyOf``: each lists the shared fields and its own
    (required), none of another shape's. xgrammar's strict mode compiles it so that a call with
    both shapes, or a part of one, cannot be sampled (checked on vLLM 0.32's xgrammar)."""
    props: dict[str, Any] = params["properties"]
    required: list[str] = params.get("required", [])
    shaped = {n for shape in shapes for n in shape}
    branches = []
    for shape in shapes:
        branch: dict[str, Any] = {
            "type": "object",
            "properties": {k: v for k, v in props.items() if k not in shaped or k in shape},
        }
        needed = [k for k in branch["properties"] if k in required or k in shape]
        if needed:
            branch["required"] = needed
        branches.append(branch)
    return {"type": "object", "anyOf": branches}


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

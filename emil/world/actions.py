"""Emil's tool set, and the functions the runtime uses on it: specs, validation, dispatch.

Each tool is one :class:`~emil.world.tool.Tool` subclass (arguments, description, how its
result reads, whether it is a long job, its time limit) plus one JS function of the same name in
``js/emil_actions.js``; see :mod:`emil.world.tool` and docs/world.md ("Adding a tool"). The
classes live by kind: :mod:`emil.world.chat` (``say``, ``whisper``), :mod:`emil.world.body`
(moving, fighting, items in hand), :mod:`emil.world.making` (crafting, smelting, building,
sleeping, chests), :mod:`emil.world.queries` (``inventory``, ``nearby``, ``status``),
:mod:`emil.world.memory_tools` (``recall``, ``remember``: the session's memory, not the bot) and
:mod:`emil.world.waiting` (``wait``: passes a turn when every answer must call a tool). This
module imports them in that order, which is the order of the specs in every prompt.
:func:`tool_specs`, :func:`validate_tool_call` (the one validation of a call's arguments) and
:class:`BotWorld` (the body: a call becomes its tool and runs with the guard) read the registry
(:data:`TOOLS`) and call the class; none of them knows a tool by name. :meth:`BotWorld.run_tool`
(and :func:`dispatch`, one call of it) returns an :class:`Outcome` whose ``text`` is what the
model reads next: invalid arguments and failed actions come back as readable text ("no oak_log
within 32 blocks"), never as exceptions that end the turn.

Safety: player chat is untrusted input and nothing here evaluates anything as code. ``say`` and
``whisper`` clean the text and cut it to the protocol's chat limit; a piece that a server could
read as a command (:func:`emil.world.chat.reads_as_command`) goes out only on an operator's own
exact words or confirmation, and every call passes :class:`~emil.world.guard.Guard` (the rule
table of docs/trust.md: chests, items, attacks, commands, chat caps); the bot checks attacks and
commands again. Self-defence is a reflex and needs no permission.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Collection, Mapping, Sequence
from typing import Any, Protocol, cast

from pydantic import BaseModel, ValidationError

from emil.exceptions import EmilError
from emil.llm.types import ToolCall
from emil.world.events import GameEvent
from emil.world.guard import Guard
from emil.world.port import TurnContext
from emil.world.tool import TOOLS, ActionPolicy, BotLike, MemoryPort, Outcome, Tool, ToolContext

# isort: off
# The tool classes register themselves on import, in this order: the order of the specs in
# every prompt (tests/unit/world/test_actions.py holds it).
from emil.world import chat, body, making, queries, memory_tools, waiting  # noqa: F401
# isort: on
from emil.world import tool_names  # noqa: F401  (checks disabled_tools against them)

__all__ = ["TOOLS", "Body", "BotWorld", "dispatch", "parse_tool", "tool_specs", "validate_tool_call"]


def tool_specs(disabled: Collection[str] = (), *, must_call: bool = False) -> list[dict[str, Any]]:
    """OpenAI tool specs for every registered tool, derived from the classes, less the
    ``disabled`` ones (the ``disabled_tools`` setting). The tools that pass a turn
    (``passes_turn``: ``wait``) only with ``must_call`` (``tool_choice`` "required"): otherwise
    an answer without calls passes it. With ``must_call`` every spec is ``strict`` (the server
    holds the arguments to its schema, not only the name)."""
    return [cls.spec(strict=must_call) for name, cls in TOOLS.items()
            if name not in disabled and (must_call or not cls.passes_turn)]


def _explain(name: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    return f"invalid arguments for {name}: " + "; ".join(parts)


def parse_tool(call: ToolCall) -> Tool | str:
    """The tool instance a call asks for, or why there is none (text the model can read): the
    one validation of a call's arguments against its tool's model. A call validated already
    (:func:`validate_tool_call`, run by the client on every call the model wrote) carries its
    tool, which is used as it is."""
    if call.error:
        return call.error
    if isinstance(call.tool, Tool):
        return call.tool
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
    """Fill ``error`` for an unknown tool or invalid arguments; normalise valid arguments, and
    keep the tool they make on the call (``tool``), so the body runs it without validating
    again."""
    if call.error or call.tool is not None:
        return call
    tool = parse_tool(call)
    if isinstance(tool, str):
        return call.model_copy(update={"error": tool})
    return call.model_copy(update={"arguments": tool.wire_args(), "tool": tool})


class Body(BotLike, Protocol):
    """What :class:`BotWorld` needs of a body (the mineflayer bridge live, the simulated body of
    the synthetic day): the tools' interface, its events, an abort."""

    @property
    def events(self) -> AsyncIterable[GameEvent]: ...

    async def abort(self) -> object:
        """Abort the running job (what it returns is the body's own business)."""
        ...


class BotWorld:
    """Emil's body through the tools: the innermost :class:`~emil.world.port.WorldPort`.

    A call becomes its tool (validated once, by :func:`validate_tool_call`: the client did it
    for the model's calls), a switched-off tool is refused, and the tool runs through its own
    trust rows (:meth:`~emil.world.tool.Tool.guarded`) with the guard, to the bot. With a
    ``guard`` (live: emil.agent.world_port.guard_for), it hears each turn's words at
    :meth:`begin_turn` and sees every event and snapshot on the way through; without one (the
    synthetic day's scripted people, tests), each call gets a guard made from the policy and
    the turn's requesters (no words known, so no command is in them)."""

    def __init__(self, bot: Body, policy: ActionPolicy, *, guard: Guard | None = None,
                 memory: MemoryPort | None = None) -> None:
        self.bot = bot
        self.policy = policy
        self.guard = guard
        self.memory = memory
        """The session's archive and notes, for the memory tools (None: no memory)."""

    async def events(self) -> AsyncIterator[GameEvent]:
        async for event in self.bot.events:
            if self.guard is not None:
                self.guard.observe(event)
            yield event

    async def snapshot(self) -> Mapping[str, Any]:
        snap: Any = await self.bot.snapshot()
        data = snap.model_dump(mode="json") if isinstance(snap, BaseModel) else dict(snap)
        if self.guard is not None:
            self.guard.observe_snapshot(data)
        return data

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        """A turn starts on these words: the guard's per-turn caps start over, and the commands
        operators confirmed in them are sent (what the world did, for the turn's record)."""
        if self.guard is None:
            return ()
        self.guard.begin_turn(turn.words)
        return await self.guard.run_confirmed(self.bot)

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        # Each tool has its own time limit in the bridge; turn.limit_s is the loop's backstop.
        policy = self.policy.model_copy(update={"requesters": turn.requesters})
        if call.name in policy.settings.tools_off:  # not offered; a model may still call it from memory
            return Outcome(False, f"error: {call.name} is switched off on this server; use another tool", fate="invalid")
        tool = parse_tool(call)
        if isinstance(tool, str):
            return Outcome(False, f"error: {tool}", fate="invalid")
        guard = self.guard or Guard.from_policy(policy)
        try:
            return await tool.guarded(guard, ToolContext(self.bot, policy, guard, memory=self.memory))
        except EmilError as exc:
            return Outcome(False, f"{tool.tool_name} failed: {exc}")

    async def abort(self) -> None:
        await self.bot.abort()


async def dispatch(bot: BotLike, call: ToolCall, policy: ActionPolicy | None = None, guard: Guard | None = None, *,
                   memory: MemoryPort | None = None) -> Outcome:
    """One call as one turn of the body (:class:`BotWorld`) over ``bot``, on the policy's
    requesters: for callers outside a session (tests, the world bench, the world playback of
    replay). The guard's turn is whatever it was begun on (without one, a guard made from the
    policy)."""
    if policy is None:  # the guard's settings, when it has them
        policy = ActionPolicy(settings=guard.settings) if guard is not None else ActionPolicy()
    # run_tool uses only the tools' part of the body (act, snapshot), which every bot has
    world = BotWorld(cast(Body, bot), policy, guard=guard, memory=memory)
    return await world.run_tool(call, TurnContext.of(*policy.requesters))

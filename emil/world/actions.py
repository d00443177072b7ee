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
:func:`tool_specs`, :func:`validate_tool_call` and :func:`dispatch` read the registry
(:data:`TOOLS`) and call the class; none of them knows a tool by name. :func:`dispatch` returns
an :class:`Outcome` whose ``text`` is what the model reads next: invalid arguments and failed
actions come back as readable text ("no oak_log within 32 blocks"), never as exceptions that end
the turn.

Safety: player chat is untrusted input and nothing here evaluates anything as code. ``say`` and
``whisper`` clean the text and cut it to the protocol's chat limit; a piece that a server could
read as a command (:func:`emil.world.chat.reads_as_command`) goes out only on an operator's own
exact words or confirmation, and every call passes :class:`~emil.world.guard.Guard` (the rule
table of docs/trust.md: chests, items, attacks, commands, chat caps); the bot checks attacks and
commands again. Self-defence is a reflex and needs no permission.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from emil.exceptions import EmilError
from emil.llm.types import ToolCall
from emil.world.guard import Guard
from emil.world.tool import TOOLS, ActionPolicy, BotLike, MemoryPort, Outcome, Tool, ToolContext

# isort: off
# The tool classes register themselves on import, in this order: the order of the specs in
# every prompt (tests/unit/world/test_actions.py holds it).
from emil.world import chat, body, making, queries, memory_tools, waiting  # noqa: F401
# isort: on
from emil.world import tool_names  # noqa: F401  (checks disabled_tools against them)

__all__ = ["TOOLS", "dispatch", "parse_tool", "tool_specs", "validate_tool_call"]


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


async def dispatch(bot: BotLike, call: ToolCall, policy: ActionPolicy | None = None, guard: Guard | None = None, *,
                   memory: MemoryPort | None = None) -> Outcome:
    """Run one tool call through the guard (the rule table, emil.trust.rules; without one, a
    guard made from the policy). Model mistakes, refusals and failed actions become text,
    never exceptions."""
    if policy is None:  # the guard's settings, when it has them
        policy = ActionPolicy(settings=guard.settings) if guard is not None else ActionPolicy()
    if call.name in policy.settings.tools_off:  # not offered; a model may still call it from memory
        return Outcome(False, f"error: {call.name} is switched off on this server; use another tool", fate="invalid")
    tool = parse_tool(call)
    if isinstance(tool, str):
        return Outcome(False, f"error: {tool}", fate="invalid")
    guard = guard or Guard.from_policy(policy)
    try:
        return await guard.run(tool, ToolContext(bot, policy, memory=memory))
    except EmilError as exc:
        return Outcome(False, f"{tool.tool_name} failed: {exc}")

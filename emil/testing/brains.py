"""SCRIPTED brains: rule-based reply policies for tests and the demo. Not a model.

A brain is a :data:`~emil.testing.script.Policy` (``ScriptRequest -> Reply``). Serve it over
HTTP with :class:`~emil.testing.vllm_double.VLLMDouble`, or in-process with :class:`ScriptedLLM`
(the same ``complete()`` seam as the live client).

:class:`NpcBrain` is a small rule list: greet, follow when asked, stop when told, fight a hostile
that is named in the observation, otherwise answer chat with ``say``. Extend it by adding rules
(``brain.add_rule(fn, first=True)``); a rule returns a :class:`Reply` or None to pass.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from emil.llm.client import parse_tool_call
from emil.llm.types import ChatRequest, Completion, Timings, ToolCall, Usage
from emil.testing.script import Reply, ScriptedCall, ScriptRequest, last_text

__all__ = [
    "SCRIPTED_PREFIX",
    "AddressedBrain",
    "ChatLine",
    "DemoBrain",
    "NpcBrain",
    "NpcContext",
    "Rule",
    "ScriptedLLM",
    "echo_brain",
    "fixed_reply",
    "sequence",
    "tool_call_brain",
]

SCRIPTED_PREFIX = "[scripted] "
"""Prefixed to every text a scripted brain writes, so no transcript passes for a model's."""

Rule = Callable[["NpcContext"], Reply | None]


def fixed_reply(reply: Reply) -> Callable[[ScriptRequest], Reply]:
    """A policy that always answers ``reply``."""
    return lambda _request: reply


def echo_brain(request: ScriptRequest) -> Reply:
    """Scripted: echoes the newest user text (handy for plumbing tests)."""
    return Reply(content=f"{SCRIPTED_PREFIX}echo: {last_text(request, 'user')}")


def tool_call_brain(name: str, arguments: dict[str, Any] | str) -> Callable[[ScriptRequest], Reply]:
    """Scripted: always calls ``name`` with ``arguments`` (a str is sent verbatim)."""
    return fixed_reply(Reply(tool_calls=(ScriptedCall(name, arguments),)))


def sequence(replies: Sequence[Reply], *, then: Reply | None = None) -> Callable[
    [ScriptRequest], Reply
]:
    """Scripted: answers ``replies`` in order, then ``then`` (default: the last one) forever."""
    queue = list(replies)
    final = then if then is not None else (queue[-1] if queue else Reply(content="ok"))

    def policy(_request: ScriptRequest) -> Reply:
        return queue.pop(0) if queue else final

    return policy


@dataclass(frozen=True)
class ChatLine:
    """A chat line found in the observation text."""

    player: str
    text: str


_CHAT_PATTERNS = (
    re.compile(r"<(?P<player>[A-Za-z0-9_]{1,16})>\s*(?P<text>.+)"),
    re.compile(r"(?P<player>[A-Za-z0-9_]{1,16}) (?:says|said|whispers)[:,]?\s*\"?(?P<text>[^\"\n]+)"),
    re.compile(r"chat from (?P<player>[A-Za-z0-9_]{1,16})[:,]?\s*\"?(?P<text>[^\"\n]+)"),
)
_HOSTILES = ("zombie", "skeleton", "creeper", "spider", "husk", "drowned", "witch", "pillager")


@dataclass(frozen=True)
class NpcContext:
    """What a rule sees: the request, the newest observation and the chat line in it."""

    request: ScriptRequest
    text: str
    chat: ChatLine | None
    last_role: str

    def has_tool(self, name: str) -> bool:
        """True when the request offers tool ``name``."""
        return name in self.request.tool_names


def _find_chat(text: str) -> ChatLine | None:
    found: ChatLine | None = None
    for line in text.splitlines():
        for pattern in _CHAT_PATTERNS:
            m = pattern.search(line)
            if m is not None:
                found = ChatLine(m.group("player"), m.group("text").strip())
                break
    return found  # the newest line wins


@dataclass
class NpcBrain:
    """SCRIPTED NPC brain (not a model): a list of rules, first match answers.

    Tool names are settings so the brain fits whatever tool set the world offers; a rule whose
    tool is not offered in the request passes.
    """

    say_tool: str = "say"
    say_arg: str = "text"
    """The argument of ``say_tool`` that carries the message (the world's ``say(text)``)."""
    follow_tool: str = "follow"
    stop_tool: str = "stop"
    attack_tool: str = "attack"
    rules: list[Rule] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rules:
            self.rules = [
                self.after_tool_result,
                self.follow_when_asked,
                self.stop_when_told,
                self.fight_hostiles,
                self.greet,
                self.answer_chat,
            ]

    def add_rule(self, rule: Rule, *, first: bool = False) -> None:
        """Add a rule (``first=True`` puts it before the built-in ones)."""
        if first:
            self.rules.insert(0, rule)
        else:
            self.rules.insert(len(self.rules) - 1, rule)

    def __call__(self, request: ScriptRequest) -> Reply:
        last = request.messages[-1] if request.messages else {}
        text = last_text(request, None)
        ctx = NpcContext(request, text, _find_chat(text), str(last.get("role", "")))
        for rule in self.rules:
            reply = rule(ctx)
            if reply is not None:
                return reply
        return Reply(content=f"{SCRIPTED_PREFIX}(nothing to do)")

    def _say(self, ctx: NpcContext, message: str) -> Reply:
        if ctx.has_tool(self.say_tool):
            return Reply(tool_calls=(ScriptedCall(self.say_tool, {self.say_arg: message}),))
        return Reply(content=message)

    def after_tool_result(self, ctx: NpcContext) -> Reply | None:
        """After a tool result the turn ends with a short note (no new tool call)."""
        if ctx.last_role == "tool":
            return Reply(content=f"{SCRIPTED_PREFIX}done.")
        return None

    def follow_when_asked(self, ctx: NpcContext) -> Reply | None:
        """"follow me" / "come here" -> follow(player)."""
        if (
            ctx.chat
            and ctx.has_tool(self.follow_tool)
            and re.search(r"\b(follow me|come here|come with me)\b", ctx.chat.text, re.I)
        ):
            return Reply(tool_calls=(ScriptedCall(self.follow_tool,
                                                      {"player": ctx.chat.player}),))
        return None

    def stop_when_told(self, ctx: NpcContext) -> Reply | None:
        """"stop" / "stay" / "wait" -> stop()."""
        if (
            ctx.chat
            and ctx.has_tool(self.stop_tool)
            and re.search(r"\b(stop|stay|wait here|halt)\b", ctx.chat.text, re.I)
        ):
            return Reply(tool_calls=(ScriptedCall(self.stop_tool, {}),))
        return None

    def fight_hostiles(self, ctx: NpcContext) -> Reply | None:
        """A line like "hostile zombie 4 blocks away" -> attack(target=zombie)."""
        if not ctx.has_tool(self.attack_tool):
            return None
        m = re.search(r"\bhostile[_ ](?:nearby:?\s*)?(?:an? )?(?P<mob>[a-z_]+)", ctx.text, re.I)
        if m is not None:
            return Reply(tool_calls=(ScriptedCall(self.attack_tool, {"target": m["mob"]}),))
        lowered = ctx.text.lower()
        for mob in _HOSTILES:
            if mob in lowered and "attack" in lowered and ctx.chat is None:
                return Reply(tool_calls=(ScriptedCall(self.attack_tool, {"target": mob}),))
        return None

    def greet(self, ctx: NpcContext) -> Reply | None:
        """"hello" / "hi" -> say a greeting."""
        if ctx.chat and re.search(r"\b(hello|hi|hey|greetings)\b", ctx.chat.text, re.I):
            return self._say(ctx, f"{SCRIPTED_PREFIX}Hello, {ctx.chat.player}!")
        return None

    def answer_chat(self, ctx: NpcContext) -> Reply | None:
        """Any other chat -> say that it was heard."""
        if ctx.chat:
            return self._say(
                ctx, f"{SCRIPTED_PREFIX}I heard you, {ctx.chat.player}: {ctx.chat.text[:80]}"
            )
        return None


_ME = re.compile(r"\bYou are (?P<name>[A-Za-z0-9_]{1,16}),")


@dataclass
class AddressedBrain(NpcBrain):
    """SCRIPTED brain (rules, not a model) for a fleet on one server: answers with ``say`` only
    a line that names the NPC it plays (its name read from the system prompt, "You are Mira,");
    any other line heard gets a plain note and no tool call (one request, as a model that
    decides the line is not for it), and an answer never repeats the line it answers (so it
    names nobody else). ``reply_delay_s`` holds every answer back that long (a model's time)."""

    reply_delay_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.add_rule(self.only_when_named, first=True)

    def __call__(self, request: ScriptRequest) -> Reply:
        reply = super().__call__(request)
        return replace(reply, delay_s=reply.delay_s + self.reply_delay_s) if self.reply_delay_s else reply

    def only_when_named(self, ctx: NpcContext) -> Reply | None:
        """A chat line that does not name this NPC: a note, no tool call."""
        if ctx.chat is None or ctx.last_role != "user":
            return None
        system = next((str(m.get("content", "")) for m in ctx.request.messages if m.get("role") == "system"), "")
        me = _ME.search(system)
        if me is not None and not re.search(rf"\b{re.escape(me['name'])}\b", ctx.chat.text, re.I):
            return Reply(content=f"{SCRIPTED_PREFIX}(not for me)")
        return None

    def answer_chat(self, ctx: NpcContext) -> Reply | None:
        """Any other line naming this NPC -> a short answer to its speaker."""
        if ctx.chat:
            return self._say(ctx, f"{SCRIPTED_PREFIX}Yes, {ctx.chat.player}.")
        return None


class DemoBrain(NpcBrain):
    """SCRIPTED demo brain (rules, not a model): NpcBrain's rules plus thanks for gifts and a
    complaint when hit."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.add_rule(self.when_given, first=True)
        self.add_rule(self.when_hit, first=True)

    def when_hit(self, ctx: NpcContext) -> Reply | None:
        """"you were hit by X" -> complain to X."""
        if ctx.last_role == "user" and "you were hit by" in ctx.text:
            who = ctx.text.split("you were hit by", 1)[1].split(":", 1)[0].strip()
            return self._say(ctx, f"{SCRIPTED_PREFIX}Ouch! Why did you hit me, {who}?")
        return None

    def when_given(self, ctx: NpcContext) -> Reply | None:
        """"you picked up N item" -> thanks."""
        if ctx.last_role == "user" and "you picked up" in ctx.text:
            what = ctx.text.split("you picked up", 1)[1].splitlines()[0].strip()
            return self._say(ctx, f"{SCRIPTED_PREFIX}Thanks for the {what}!")
        return None


class ScriptedLLM:
    """The ``LLM`` seam served in-process by a SCRIPTED policy (no HTTP, no model).

    Tool calls go through the same parsing as the live client, so invalid arguments come back
    as data. ``prompt_tokens`` in usage is the request's ``predicted_prompt_tokens``.
    """

    def __init__(
        self,
        policy: Callable[[ScriptRequest], Reply],
        *,
        model: str = "scripted",
        tool_validator: Callable[[ToolCall], ToolCall] | None = None,
    ) -> None:
        self.policy = policy
        self.model = model
        self.tool_validator = tool_validator
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        """Answer ``request`` with the policy's reply."""
        import anyio  # local: keeps this module importable without an event loop

        started = time.perf_counter()
        self.requests.append(request)
        script = ScriptRequest(
            messages=request.messages, tools=request.tools, tool_choice=request.tool_choice,
            max_tokens=request.max_completion_tokens, enable_thinking=request.enable_thinking,
            prompt_tokens=request.predicted_prompt_tokens or 0, model=self.model,
            body=dict(request.extra_body),
        )
        reply = self.policy(script)
        if reply.delay_s:
            await anyio.sleep(reply.delay_s)
        calls = []
        for i, call in enumerate(reply.tool_calls):
            parsed = parse_tool_call(f"scripted-{i}", call.name, call.raw_arguments)
            if parsed.error is None and self.tool_validator is not None:
                parsed = self.tool_validator(parsed)
            calls.append(parsed)
        text = (reply.content or "") + (reply.reasoning or "")
        out = reply.completion_tokens or max(1, len(text) // 4)
        return Completion(
            content=reply.content,
            reasoning=reply.reasoning,
            tool_calls=calls,
            finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
            usage=Usage(prompt_tokens=script.prompt_tokens, completion_tokens=out),
            timings=Timings(total_s=time.perf_counter() - started),
            model=self.model,
        )

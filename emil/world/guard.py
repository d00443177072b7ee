"""The trust checks at dispatch: every tool call passes :class:`Guard` before it reaches the bot.

The rules are :data:`emil.trust.rules.RULES`; this module finds, for one call, which row applies
(what the target is, who owns it, whose items would move) and asks
:func:`emil.trust.rules.decide` with the players whose words are in the turn. It then runs the
tool with what the bot needs to check again (``authority``: the requesters, the player an
attack may target, a confirmation code), notes what moved in the ownership ledger, and returns
the outcome with the row that allowed it. A refusal is an outcome the model reads ("refused:
..."), carries its row for the recording, and is told to the players who asked, in one
whispered line each.

The chat caps (lines per turn and per minute) and the command rule (an operator's own exact
words, or a confirmation) are checked here too, for ``say`` and ``whisper``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import JsonValue

from emil.events import BlockPlaced, BlockRemoved, Chat, GameEvent, PlayerJoined
from emil.trust.authority import Authority, Confirmations, Line
from emil.trust.caps import SlidingWindow, SpamMeter
from emil.trust.ledger import SELF, UNSURE, Ledger, chest_key
from emil.trust.people import People, valid_name
from emil.trust.rules import Verdict, decide, rule
from emil.world.tool import Outcome, ToolContext

if TYPE_CHECKING:
    from emil.world.tool import ActionPolicy, BotLike, Tool

__all__ = ["CONTAINERS", "PROTECTED_MOBS", "Guard", "GuardLimits"]

_log = logging.getLogger("emil.trust")

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


@dataclass(frozen=True)
class GuardLimits:
    """The settings the guard applies (emil.config.Settings)."""

    allow_commands: bool = False
    give_items_per_hour: int = 32
    chat_lines_per_turn: int = 6
    chat_lines_per_minute: int = 20
    command_confirm_s: float = 60.0


@dataclass
class _Source:
    """Where ``n`` of one item would come from: the recipient's or chest owner's lot, Emil's own,
    other players' lots (by owner)."""

    theirs: int = 0
    own: int = 0
    others: dict[str, int] = field(default_factory=dict)


@dataclass
class Guard:
    """Checks, runs and notes every tool call of one Emil (see the module docstring)."""

    people: People
    ledger: Ledger
    limits: GuardLimits = field(default_factory=GuardLimits)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How the chat pacing waits (tests pass one that moves their clock)."""
    confirmations: Confirmations = field(default_factory=Confirmations)
    authority: Authority = field(default_factory=Authority)
    """The words of the turn being played."""
    known_players: set[str] = field(default_factory=set)
    """Lower-case names of every player Emil has met (the server's list, chat, joins)."""
    _turn_lines: int = 0
    _minute: SlidingWindow | None = None
    _spam: SpamMeter | None = None

    def __post_init__(self) -> None:
        self._minute = SlidingWindow(self.limits.chat_lines_per_minute, 60.0, clock=self.clock)
        self._spam = SpamMeter(clock=self.clock)
        self.confirmations.ttl_s = self.limits.command_confirm_s
        self.known_players |= {n.lower() for n in self.people.operators | self.people.trusted | self.people.npcs}

    # --- what the guard sees -----------------------------------------------------------

    @classmethod
    def from_policy(cls, policy: ActionPolicy) -> Guard:
        """A guard for callers without one (tests, offline runs): the policy's operators and
        command switch, its requesters' words unknown (so no command is in them), a ledger in
        memory."""
        guard = cls(People(operators=policy.operators), Ledger(), GuardLimits(allow_commands=policy.allow_commands))
        guard.begin_turn(Authority(tuple(Line(name, "") for name in sorted(policy.requesters))))
        return guard

    def begin_turn(self, authority: Authority) -> None:
        """A turn starts with these words: the per-turn chat count starts over."""
        self.authority = authority
        self._turn_lines = 0

    def observe(self, event: GameEvent) -> None:
        """Chests appearing and going, players met."""
        match event:
            case BlockPlaced():
                key = chest_key(event.position["x"], event.position["y"], event.position["z"])
                if event.by == self.people.bot_name:
                    self.ledger.set_chest(key, SELF, "emil")
                elif event.by is not None and valid_name(event.by):
                    self.ledger.set_chest(key, event.by, "placed")
                else:
                    self.ledger.forget_chest(key)
            case BlockRemoved():
                self.ledger.forget_chest(chest_key(event.position["x"], event.position["y"], event.position["z"]))
            case Chat():
                self.known_players.add(event.sender.lower())
            case PlayerJoined():
                self.known_players.add(event.username.lower())
            case _:
                pass

    def observe_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        """What Emil holds never exceeds what it carries; the players near are known."""
        inventory = snapshot.get("inventory")
        if snapshot.get("connected", True) and isinstance(inventory, Mapping):
            self.ledger.reconcile({str(k): int(v) for k, v in inventory.items() if isinstance(v, int)})
        for p in snapshot.get("players") or []:
            if isinstance(p, Mapping) and isinstance(p.get("name"), str):
                self.known_players.add(p["name"].lower())

    # --- the check ---------------------------------------------------------------------

    async def run(self, tool: Tool, ctx: ToolContext) -> Outcome:
        """Check ``tool`` against the rules, run it when allowed (``ctx`` with this guard), note
        what moved."""
        ctx = replace(ctx, guard=self)
        check = _CHECKS.get(tool.tool_name)
        if check is None:
            out = await tool.run(ctx)
            return out if out.rule else _with_rule(out, "any")
        return await check(self, tool, ctx)

    def requesters(self) -> frozenset[str]:
        return self.authority.requesters

    def js_authority(self, **more: JsonValue) -> dict[str, JsonValue]:
        """What the bot needs to check the act again."""
        out: dict[str, JsonValue] = {"requesters": list(sorted(self.requesters()))}
        out.update(more)
        return out

    async def refuse(self, bot: BotLike, tool: Tool, verdict: Verdict, *, what: str = "") -> Outcome:
        """The refusal the model reads, and one line to each player who asked."""
        row = rule(verdict.rule)
        text = f"refused: {tool.tool_name}{' ' + what if what else ''}: {verdict.why} (rule {row.id})"
        told = await self.tell(bot, sorted(self.requesters()), f"I won't {tool.tool_name}{' ' + what if what else ''}: {verdict.why}")
        told_json: list[JsonValue] = list(told)
        return Outcome(False, text, {"refused": True, "rule": row.id, "told": told_json}, rule=row.id)

    async def tell(self, bot: BotLike, players: Iterable[str], text: str) -> list[str]:
        """Whisper ``text`` to each of ``players`` (within the chat rate; no command possible:
        the bot sends it as the text of /tell)."""
        assert self._minute is not None
        told = []
        for name in players:
            if not valid_name(name) or not self._minute.take():
                continue
            line = text if len(text) <= 200 else text[:199] + "…"
            await self.pace()
            assert self._spam is not None
            self._spam.sent()
            res = await bot.act("whisper", {"player": name, "text": line, "authority": self.js_authority(), "quiet": True},
                                timeout=10.0)
            if res.ok:
                told.append(name)
        return told

    # --- chat --------------------------------------------------------------------------

    def chat_room(self) -> tuple[int, str]:
        """How many chat lines may go out now, and which cap binds when it is 0."""
        assert self._minute is not None
        turn_left = self.limits.chat_lines_per_turn - self._turn_lines
        minute_left = self._minute.room()
        if turn_left <= 0:
            return 0, f"{self.limits.chat_lines_per_turn} chat lines this turn already (chat_lines_per_turn)"
        if minute_left <= 0:
            return 0, (f"{self.limits.chat_lines_per_minute} chat lines within a minute already "
                       f"(chat_lines_per_minute); wait {self._minute.wait_s():.0f} s")
        return min(turn_left, minute_left), ""

    def chat_sent(self, n: int) -> None:
        assert self._minute is not None and self._spam is not None
        self._turn_lines += n
        self._minute.take(n)
        self._spam.sent(n)

    async def pace(self) -> None:
        """Wait until one more chat line keeps under a server's spam limit (a burst of 8, then
        one a second; :class:`~emil.trust.caps.SpamMeter`)."""
        assert self._spam is not None
        wait = self._spam.wait_s()
        if wait > 0:
            await self.sleep(wait)

    def command_verdict(self, piece: str) -> tuple[Verdict, bool]:
        """May this command piece go out? (verdict, whether to ask an operator to confirm)."""
        if not self.limits.allow_commands:
            return Verdict(False, "chat.command", "commands are not enabled on this server (allow_commands)"), False
        verdict = decide("chat.command", self.requesters(), self.people)
        if not verdict.allowed:
            return verdict, False
        if self.authority.command_ordered(piece, self.people) is not None:
            return verdict, False
        why = "the exact command text is not in an operator's own words in this turn"
        return Verdict(False, "chat.command", why), True

    async def ask_to_confirm(self, bot: BotLike, piece: str) -> str | None:
        """Ask this turn's operators to confirm ``piece``; the code, or None when asking failed."""
        operators = frozenset(n for n in self.requesters() if self.people.is_operator(n))
        pending = self.confirmations.ask(piece, operators)
        ops: list[JsonValue] = list(sorted(operators))
        await self.pace()
        res = await bot.act("ask_confirm", {"command": piece, "code": pending.code, "operators": ops,
                                            "ttl_s": self.limits.command_confirm_s}, timeout=10.0)
        if not res.ok:
            self.confirmations.pending.pop(pending.code, None)
            _log.warning("could not ask for a confirmation: %s", res.error)
            return None
        self.chat_sent(len(operators))
        return pending.code

    def confirm_text(self, tool: str, piece: str, code: str) -> str:
        """What the model reads when a command waits for an operator's confirmation."""
        operators = ", ".join(sorted(n for n in self.requesters() if self.people.is_operator(n)))
        return (
            f'{tool}: not sent yet: "{piece}" is a server command that is not, word for word, in an operator\'s own '
            f'words in this turn. Asked {operators} to confirm it: when they reply "confirm {code}" (within '
            f"{self.limits.command_confirm_s:g} s) it is sent as it is, without you."
        )

    async def run_confirmed(self, bot: BotLike) -> list[Outcome]:
        """Commands the operators confirmed in this turn's words: each sent once, as asked."""
        out = []
        for pending, operator in self.confirmations.confirmed(self.authority.lines, self.people):
            auth: dict[str, JsonValue] = {"requesters": [operator], "confirm": pending.code}
            if not self.limits.allow_commands:
                continue
            await self.pace()
            res = await bot.act("say", {"text": pending.command, "authority": auth, "quiet": True}, timeout=10.0)
            self.chat_sent(1)
            word = "sent" if res.ok else f"not sent ({res.error})"
            out.append(Outcome(res.ok, f'{operator} confirmed the command "{pending.command}": {word}',
                               {"command": pending.command, "code": pending.code, "confirmed_by": operator},
                               rule="chat.command"))
        return out

    # --- items -------------------------------------------------------------------------

    async def inventory(self, bot: BotLike) -> dict[str, int] | None:
        snap = await bot.snapshot()
        if not snap.connected:
            return None
        inv = dict(snap.inventory)
        self.ledger.reconcile(inv)
        return inv

    def may_use_held(self, owner: str) -> Verdict:
        """May this turn use items Emil holds for ``owner``?"""
        if owner == UNSURE:
            return decide("use.unsure", self.requesters(), self.people)
        return decide("use.held", self.requesters(), self.people, owner=owner)

    def sources(self, inventory: Mapping[str, int], item: str, n: int, *, theirs: str | None) -> tuple[_Source, Verdict | None]:
        """Where ``n`` of ``item`` come from for a turn that may use them (``theirs``: the owner
        whose lot goes first: the recipient, the chest's owner), or the verdict refusing the rest."""
        src = _Source()
        left = n
        if theirs is not None:
            src.theirs = min(left, self.ledger.held_for(theirs).get(item, 0))
            left -= src.theirs
        src.own = min(left, self.ledger.own(inventory, item))
        left -= src.own
        refusal: Verdict | None = None
        for owner in sorted(self.ledger.held):
            if left <= 0:
                break
            if owner == theirs:
                continue
            have = self.ledger.held[owner].get(item, 0)
            if not have:
                continue
            verdict = self.may_use_held(owner)
            if not verdict.allowed:
                refusal = refusal or Verdict(False, verdict.rule, f"{have} of the {item} Emil carries "
                                             f"{'are of unknown owner' if owner == UNSURE else f'are held for {owner}'}; {verdict.why}")
                continue
            take = min(left, have)
            src.others[owner] = take
            left -= take
        return src, (refusal if left > 0 else None)

    def spent(self, item: str, src: _Source, n: int, *, theirs: str | None) -> None:
        """``n`` of ``item`` left the inventory as ``src`` planned (fewer: the last pools first
        stay untouched)."""
        left = n
        if theirs is not None and src.theirs:
            left -= self.ledger.release(theirs, item, min(left, src.theirs))
        left -= min(left, src.own)
        for owner, k in src.others.items():
            if left <= 0:
                break
            left -= self.ledger.release(owner, item, min(left, k))


# --- per-tool checks (the row each call falls under) ---------------------------------------

Check = Callable[[Guard, "Tool", ToolContext], Awaitable[Outcome]]


def _with_rule(outcome: Outcome, rule_id: str) -> Outcome:
    return Outcome(outcome.ok, outcome.text, outcome.data, outcome.elapsed_ms, rule=rule_id)


def _counts(data: JsonValue, key: str) -> dict[str, int]:
    """``{item: n}`` under ``key`` of a JS result (what moved), whole counts only."""
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def _count(data: JsonValue, key: str) -> int:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _failed(tool: Tool, error: str | None) -> Outcome:
    return Outcome(False, f"{tool.tool_name} failed: {error}")


async def _attack(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    target = str(tool.model_dump().get("target", ""))
    lower = target.lower()
    res = await bot.act("classify_target", {"target": target}, timeout=10.0)
    kind = str(res.result.get("kind")) if res.ok and isinstance(res.result, dict) else "unknown"
    name = str(res.result.get("name")) if res.ok and isinstance(res.result, dict) else target
    if lower == guard.people.bot_name.lower():
        kind = "unknown"
    elif kind != "player" and lower in guard.known_players:
        kind = "absent player"  # a player the server does not list now (or Python knows better)
    if kind in ("player", "absent player"):
        verdict = decide("attack.player", guard.requesters(), guard.people)
        if not verdict.allowed:
            return await guard.refuse(bot, tool, verdict, what=f"the player {name}")
        if kind == "absent player":
            return _failed(tool, f"no player named {target} is online")
        ctx = replace(ctx, extra={"target": name, "authority": guard.js_authority(attack=name)})
        return _with_rule(await tool.run(ctx), verdict.rule)
    if kind == "mob":
        row = "attack.protected" if name in PROTECTED_MOBS else "attack.mob"
        verdict = decide(row, guard.requesters(), guard.people)
        if not verdict.allowed:
            return await guard.refuse(bot, tool, verdict, what=f"the {name}")
        ctx = replace(ctx, extra={"target": name, "authority": guard.js_authority()})
        return _with_rule(await tool.run(ctx), row)
    verdict = decide("attack.unknown", guard.requesters(), guard.people)
    return await guard.refuse(bot, tool, Verdict(False, verdict.rule, f"'{target}' is no mob type and no player the server lists; {verdict.why}"))


async def _find_chest(tool: Tool, bot: BotLike) -> tuple[dict[str, Any] | None, str | None]:
    args = {k: v for k, v in tool.model_dump().items() if k in ("x", "y", "z") and v is not None}
    res = await bot.act("find_chest", args, timeout=10.0)
    if not res.ok or not isinstance(res.result, dict):
        return None, res.error or "no chest found"
    return res.result, None


def _chest_owner(guard: Guard, found: Mapping[str, Any]) -> tuple[str, str | None]:
    """The row suffix (emil, owned, unknown) and the owner of a chest and its neighbours."""
    dim = found.get("dimension") if isinstance(found.get("dimension"), str) else None
    owners = {guard.ledger.chest_owner(chest_key(b["x"], b["y"], b["z"], dim)) for b in found.get("blocks") or [found["chest"]]}
    if None in owners:
        return "unknown", None
    players = sorted(o for o in owners if o is not None and o != SELF)
    if not players:
        return "emil", SELF
    if len(players) > 1:
        return "owned", "+".join(players)  # two players' halves of one large chest: nobody alone
    return "owned", players[0]


def _where(found: Mapping[str, Any]) -> str:
    c = found["chest"]
    return f"at {c['x']} {c['y']} {c['z']}"


async def _chest_tool(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    found, error = await _find_chest(tool, bot)
    if found is None:
        return _failed(tool, error)
    kind, owner = _chest_owner(guard, found)
    row = f"{tool.tool_name}.{kind}"
    verdict = decide(row, guard.requesters(), guard.people, owner=owner)
    whose = {"emil": "Emil's chest", "unknown": "a chest of unknown owner", "owned": f"{owner}'s chest"}[kind]
    if not verdict.allowed:
        return await guard.refuse(bot, tool, verdict, what=f"{'from' if tool.tool_name == 'take' else 'into'} {whose} {_where(found)}")
    items: dict[str, int] = dict(tool.model_dump().get("items") or {})
    plans: dict[str, _Source] = {}
    chest_owner = owner if kind == "owned" and owner and "+" not in owner else None
    if tool.tool_name == "store":
        inv = await guard.inventory(bot)
        if inv is None:
            return _failed(tool, "not connected to the server right now")
        for item, n in items.items():
            src, refusal = guard.sources(inv, item, min(n, inv.get(item, 0)), theirs=chest_owner)
            if refusal is not None:
                return await guard.refuse(bot, tool, refusal, what=f"{item} into {whose}")
            plans[item] = src
    c = found["chest"]
    ctx = replace(ctx, extra={"x": c["x"], "y": c["y"], "z": c["z"]})
    out = await tool.run(ctx)
    if tool.tool_name == "take":
        if chest_owner is not None:
            guard.ledger.hold(chest_owner, _counts(out.data, "took"))
    else:
        for item, n in _counts(out.data, "stored").items():
            if item in plans:
                guard.spent(item, plans[item], n, theirs=chest_owner)
    return _with_rule(out, verdict.rule)


async def _give(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    args = tool.model_dump()
    to, item, count = str(args["player"]), str(args["item"]), int(args.get("count") or 1)
    inv = await guard.inventory(bot)
    if inv is None:
        return _failed(tool, "not connected to the server right now")
    n = min(count, inv.get(item, 0))
    if n <= 0:
        return _failed(tool, f"no {item} in the inventory")
    src, refusal = guard.sources(inv, item, n, theirs=to)
    if refusal is not None:
        return await guard.refuse(bot, tool, refusal, what=f"{count} {item} to {to}")
    row = "give.held.recipient" if src.theirs == n else "use.held" if src.others else "give.own.trusted"
    asked = guard.requesters()
    rated = src.own > 0 and not guard.people.is_trusted(to) and not (asked and all(guard.people.is_trusted(r) for r in asked))
    if rated:
        row = "give.own"
        allowance = guard.limits.give_items_per_hour - guard.ledger.given_recently(to)
        if src.own > allowance:
            why = (f"Emil gives at most {guard.limits.give_items_per_hour} of its own items to a player within an hour, "
                   f"and {to} may have {max(0, allowance)} more now")
            return await guard.refuse(bot, tool, Verdict(False, "give.own", why), what=f"{count} {item} to {to}")
    out = await tool.run(ctx)
    gave = _count(out.data, "count")
    if out.ok and gave:
        guard.spent(item, src, gave, theirs=to)
        own_part = max(0, min(gave - src.theirs, src.own))
        if rated and own_part:
            guard.ledger.record_gift(to, own_part)
    return Outcome(out.ok, out.text, out.data, out.elapsed_ms, rule=row)


async def _uses_item(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    """place and eat: the one item they use must be Emil's own or usable by this turn."""
    item = tool.model_dump().get("item", None)
    if item is None:
        return await _reserving(guard, tool, ctx)
    inv = await guard.inventory(bot)
    if inv is None:
        return _failed(tool, "not connected to the server right now")
    src, refusal = guard.sources(inv, str(item), min(1, inv.get(str(item), 0)), theirs=None)
    if refusal is not None:
        return await guard.refuse(bot, tool, refusal, what=str(item))
    out = await tool.run(ctx)
    if out.ok:
        guard.spent(str(item), src, 1, theirs=None)
    return _with_rule(out, "use.held" if src.others else "any")


def _reserved(guard: Guard) -> dict[str, JsonValue]:
    """What Emil holds for players this turn may not use: the bot leaves it out of every count."""
    out: dict[str, int] = {}
    for owner, items in guard.ledger.held.items():
        if guard.may_use_held(owner).allowed:
            continue
        for item, n in items.items():
            out[item] = out.get(item, 0) + n
    return dict(out)


async def _reserving(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    """craft, smelt, build, sleep, eat without an item: what they use is found by the bot, so
    the bot gets what it must not touch (row use.held)."""
    reserved = _reserved(guard)
    out = await tool.run(replace(ctx, extra={**ctx.extra, "reserved": reserved}) if reserved else ctx)
    return _with_rule(out, "any")


async def _dig(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    args = tool.model_dump()
    res = await bot.act("find_chest", {"x": args["x"], "y": args["y"], "z": args["z"]}, timeout=10.0)
    if not res.ok or not isinstance(res.result, dict):
        return _with_rule(await tool.run(ctx), "dig.block")
    kind, owner = _chest_owner(guard, {**res.result, "blocks": [res.result["chest"]]})
    verdict = decide(f"dig.chest.{kind}", guard.requesters(), guard.people, owner=owner)
    if not verdict.allowed:
        return await guard.refuse(bot, tool, verdict, what=f"the chest {_where(res.result)}")
    return _with_rule(await tool.run(ctx), verdict.rule)


async def _collect(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    block = str(tool.model_dump().get("block", ""))
    row = "collect.container" if block in CONTAINERS else "any"
    verdict = decide(row, guard.requesters(), guard.people)
    if not verdict.allowed:
        return await guard.refuse(bot, tool, verdict, what=block)
    return _with_rule(await tool.run(ctx), row)


async def _claim(guard: Guard, tool: Tool, ctx: ToolContext) -> Outcome:
    bot = ctx.bot
    verdict = decide("claim_chest", guard.requesters(), guard.people)
    if not verdict.allowed:
        return await guard.refuse(bot, tool, verdict)
    found, error = await _find_chest(tool, bot)
    if found is None:
        return _failed(tool, error)
    owner = str(tool.model_dump().get("owner", ""))
    dim = found.get("dimension") if isinstance(found.get("dimension"), str) else None
    c = found["chest"]
    key = chest_key(c["x"], c["y"], c["z"], dim)
    if owner.lower() in ("nobody", "unknown"):
        guard.ledger.forget_chest(key)
        text = f"the chest {_where(found)} is of unknown owner now (only operators may open it)"
    elif owner == guard.people.bot_name or owner.lower() == "emil":
        guard.ledger.set_chest(key, SELF, "claimed")
        text = f"the chest {_where(found)} is Emil's now (anyone may use it)"
    else:
        guard.ledger.set_chest(key, owner, "claimed")
        text = f"the chest {_where(found)} is {owner}'s now (only {owner} and operators may open it)"
    return Outcome(True, text, {"chest": c, "owner": owner}, rule="claim_chest")


_CHECKS: dict[str, Check] = {
    "attack": _attack,
    "take": _chest_tool,
    "store": _chest_tool,
    "give": _give,
    "place": _uses_item,
    "eat": _uses_item,
    "dig": _dig,
    "collect": _collect,
    "claim_chest": _claim,
    "craft": _reserving,
    "smelt": _reserving,
    "build": _reserving,
    "sleep": _reserving,
}
"""The tools whose target decides their row; every other tool is row ``any`` (chat: the chat
tools check their pieces themselves, with :meth:`Guard.command_verdict` and the chat caps)."""

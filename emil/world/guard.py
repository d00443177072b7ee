"""The trust checks at dispatch: every tool call passes :class:`Guard` before it reaches the bot.

Emil's body (emil.world.actions.BotWorld) hands each call's tool this guard: the tool's own
:meth:`~emil.world.tool.Tool.guarded` asks it for the verdict of its rows and runs when allowed.
The guard hears the turn's words once, at the start of the turn (:meth:`Guard.begin_turn`, from
the turn's :class:`~emil.world.port.TurnContext`). The rules are :func:`emil.trust.rules.rules`; each tool declares its rows and its target check
(``Tool.rules``, ``Tool.guarded`` in emil.world.tool: what the target is, who owns it, whose
items would move). The guard applies what the tool declares and switches on no tool name: it
holds the turn's words, decides a row for them (:func:`emil.trust.rules.decide` with the
players whose words are in the turn), gives the tool what the bot needs to check again
(``authority``: the requesters, the player an attack may target, a confirmation code), keeps the
ownership ledger, and returns the outcome with the row that allowed it. A refusal is an outcome
the model reads ("refused: ..."), carries its row for the recording, and is told to the players
who asked, in one whispered line each.

The chat caps (lines per turn and per minute) and the command rule (an operator's own exact
words, or a confirmation) are checked here too, for ``say`` and ``whisper``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import JsonValue

from emil.config import Settings
from emil.trust.authority import Authority, Confirmations, Line
from emil.trust.caps import SlidingWindow, SpamMeter
from emil.trust.ledger import SELF, UNSURE, Ledger, Source, chest_key
from emil.trust.people import People, valid_name
from emil.trust.rules import CHAT_COMMAND, USE_HELD, USE_UNSURE, Rule, Verdict, decide, rule
from emil.world.events import BlockPlaced, BlockRemoved, Chat, GameEvent, PlayerJoined
from emil.world.tool import Outcome

if TYPE_CHECKING:
    from emil.world.tool import ActionPolicy, BotLike, Tool

__all__ = ["Guard"]

_log = logging.getLogger("emil.trust")

@dataclass
class Guard:
    """Checks, runs and notes every tool call of one Emil (see the module docstring).

    It reads what it applies from ``settings`` where it applies it: the lists of people
    (:class:`~emil.trust.people.People`), ``allow_commands``, ``give_items_per_hour``,
    ``chat_lines_per_turn``, ``chat_lines_per_minute``, ``command_confirm_s``."""

    settings: Settings
    ledger: Ledger
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How the chat pacing waits (tests pass one that moves their clock)."""
    confirmations: Confirmations = field(default_factory=Confirmations)
    authority: Authority = field(default_factory=Authority)
    """The words of the turn being played."""
    known_players: set[str] = field(default_factory=set)
    """Lower-case names of every player Emil has met (the server's list, chat, joins)."""
    _turn_lines: int = 0
    people: People = field(init=False)
    """Who is who, by the settings' lists."""
    _minute: SlidingWindow | None = None
    _spam: SpamMeter | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.people = People(s)
        self._minute = SlidingWindow(s.chat_lines_per_minute, 60.0, clock=self.clock)
        self._spam = SpamMeter(clock=self.clock)
        self.confirmations.ttl_s = s.command_confirm_s
        self.known_players |= {n.lower() for n in (*s.operators, *s.trusted_players, *s.npc_players)}

    # --- what the guard sees -----------------------------------------------------------

    @classmethod
    def from_policy(cls, policy: ActionPolicy) -> Guard:
        """A guard for callers without one (tests, offline runs): the policy's operators and
        command switch, its requesters' words unknown (so no command is in them), a ledger in
        memory."""
        guard = cls(policy.settings, Ledger())
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
                if event.by == self.settings.bot_name:
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

    def requesters(self) -> frozenset[str]:
        """Every player whose words are in the turn."""
        return self.authority.requesters

    def decide(self, row: Rule, owner: str | None = None) -> Verdict:
        """May this turn's requesters have ``row``'s act (against a target of ``owner``)?"""
        return decide(row, self.requesters(), self.people, owner=owner)

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
        turn_left = self.settings.chat_lines_per_turn - self._turn_lines
        minute_left = self._minute.room()
        if turn_left <= 0:
            return 0, f"{self.settings.chat_lines_per_turn} chat lines this turn already (chat_lines_per_turn)"
        if minute_left <= 0:
            return 0, (f"{self.settings.chat_lines_per_minute} chat lines within a minute already "
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
        if not self.settings.allow_commands:
            return Verdict(False, CHAT_COMMAND.id, "commands are not enabled on this server (allow_commands)"), False
        verdict = self.decide(CHAT_COMMAND)
        if not verdict.allowed:
            return verdict, False
        if self.authority.command_ordered(piece, self.people) is not None:
            return verdict, False
        why = "the exact command text is not in an operator's own words in this turn"
        return Verdict(False, CHAT_COMMAND.id, why), True

    async def ask_to_confirm(self, bot: BotLike, piece: str) -> str | None:
        """Ask this turn's operators to confirm ``piece``; the code, or None when asking failed."""
        operators = frozenset(n for n in self.requesters() if self.people.is_operator(n))
        pending = self.confirmations.ask(piece, operators)
        ops: list[JsonValue] = list(sorted(operators))
        await self.pace()
        res = await bot.act("ask_confirm", {"command": piece, "code": pending.code, "operators": ops,
                                            "ttl_s": self.settings.command_confirm_s}, timeout=10.0)
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
            f"{self.settings.command_confirm_s:g} s) it is sent as it is, without you."
        )

    async def run_confirmed(self, bot: BotLike) -> list[Outcome]:
        """Commands the operators confirmed in this turn's words: each sent once, as asked."""
        out = []
        for pending, operator in self.confirmations.confirmed(self.authority.lines, self.people):
            auth: dict[str, JsonValue] = {"requesters": [operator], "confirm": pending.code}
            if not self.settings.allow_commands:
                continue
            await self.pace()
            res = await bot.act("say", {"text": pending.command, "authority": auth, "quiet": True}, timeout=10.0)
            self.chat_sent(1)
            word = "sent" if res.ok else f"not sent ({res.error})"
            out.append(Outcome(res.ok, f'{operator} confirmed the command "{pending.command}": {word}',
                               {"command": pending.command, "code": pending.code, "confirmed_by": operator},
                               rule=CHAT_COMMAND.id))
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
            return self.decide(USE_UNSURE)
        return self.decide(USE_HELD, owner=owner)

    def sources(self, inventory: Mapping[str, int], item: str, n: int, *, theirs: str | None) -> tuple[Source, Verdict | None]:
        """Where ``n`` of ``item`` come from for this turn (emil.trust.ledger.Ledger.sources), or
        the verdict refusing the rest."""
        return self.ledger.sources(inventory, item, n, theirs=theirs, may_use=self.may_use_held)

    def spent(self, item: str, src: Source, n: int, *, theirs: str | None) -> None:
        """``n`` of ``item`` left the inventory as ``src`` planned."""
        self.ledger.spent(item, src, n, theirs=theirs)

    def reserved(self) -> dict[str, JsonValue]:
        """What Emil holds for players this turn may not use: the bot leaves it out of every
        count (row use.held, for jobs that pick their own items)."""
        out: dict[str, int] = {}
        for owner, items in self.ledger.held.items():
            if self.may_use_held(owner).allowed:
                continue
            for item, n in items.items():
                out[item] = out.get(item, 0) + n
        return dict(out)

    def chest_owner(self, found: Mapping[str, Any]) -> tuple[str, str | None]:
        """The row suffix (emil, owned, unknown) and the owner of a chest the bot found."""
        return self.ledger.chest_owner_of(found)

"""From what happens in the game to notes: the rules that turn events into facts.

The :class:`Learner` sees what Emil's body sees (:mod:`emil.memory.world` hands it every game
event, every status snapshot and every tool call with its outcome) and writes a fact to the
store the moment it is learned:

- players: who was here (joins, chat, standing near), what they asked Emil (chat that names
  Emil), what they whispered to Emil (``whispered``: private, never shown in the notes block,
  no place learned from it), what they said otherwise (overheard: ``said``), what they gave Emil (items picked up right after that player tossed them),
  what Emil gave them, who hit Emil, what Emil promised them (its own ``say`` with
  "I'll", "I will", "I promise"...; a promise whispered stays private, in the archive);
- places: a place a player names in chat with coordinates ("my chest is at 10 64 -5"), or as
  "here" (their position in the next snapshot), chests, beds, crafting tables and furnaces Emil
  saw, where Emil died and where it respawned;
- goals: each job Emil started (a tool that acts over time), and whether it finished.

Everything else (what a player is like, what was agreed in a long conversation) needs a
reader of the conversation: phase 2's model-written summaries add it through
:meth:`~emil.memory.store.MemoryStore.facts_from_summary`.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from emil.memory.archive import words
from emil.memory.note_text import clip
from emil.memory.notes import Fact, Topic
from emil.memory.retrieval import STOP_WORDS
from emil.memory.store import MemoryStore
from emil.world.actions import TOOLS
from emil.world.events import Chat, Damage, Death, GameEvent, ItemCollected, PlayerJoined, Respawn

__all__ = ["PLACE_WORDS", "Learner"]

PLACE_WORDS = (
    "chest", "home", "house", "base", "farm", "bed", "mine", "portal", "village", "shop",
    "storage", "tower", "camp", "spawn", "garden", "barn",
)
"""Words that make a chat line with coordinates (or "here") a place worth remembering."""

PROMISE_KEPT_WITHIN_S = 600.0
"""A gift to a player within this many seconds of a promise to them that names the item keeps
the promise ("I'll get you 5 dirt", then 5 dirt tossed to them)."""

SEEN_BLOCKS = ("chest", "bed", "crafting_table", "furnace")
"""Blocks in the status snapshot remembered as places when Emil sees them."""

_PROMISE = re.compile(r"\b(I'll|I will|I promise|I'm going to|I am going to|will do|on my way)\b", re.I)
_COORDS = re.compile(r"(-?\d{1,8})\s*[, ]\s*(-?\d{1,3})\s*[, ]\s*(-?\d{1,8})")
_PLACE = re.compile(r"\b(" + "|".join(PLACE_WORDS) + r")s?\b", re.I)
_HERE = re.compile(r"\b(here|this is)\b", re.I)
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_]{1,16}$")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE) is not None


def _block_pos(pos: Any) -> str | None:
    """Block coordinates as "x,y,z" (floored, as F3 shows them)."""
    if not isinstance(pos, Mapping):
        return None
    vals = [pos.get(k) for k in ("x", "y", "z")]
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in vals):
        return None
    return ",".join(str(math.floor(v)) for v in vals)  # type: ignore[arg-type]


def _goal(name: str, arguments: Mapping[str, Any] | None, requesters: frozenset[str]) -> str:
    args = json.dumps(dict(arguments or {}), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    who = f" for {', '.join(sorted(requesters))}" if requesters else ""
    return clip(f"{name} {args}{who}", 64)


@dataclass
class Learner:
    """Turns events, snapshots and tool outcomes into facts in ``store`` (see the module doc)."""

    store: MemoryStore
    bot_name: str = "Emil"
    clock: Any = field(default=time.time)
    """Unix time source (tests pass a fixed clock)."""
    _here_claims: list[tuple[str, str, str]] = field(default_factory=list)
    """(player, place word, their words) said "here" and waiting for the next snapshot."""
    _seen_now: set[tuple[str, str]] = field(default_factory=set)
    """Facts from snapshots already written this session (a snapshot comes every turn)."""
    _latest: dict[str, tuple[bool, str]] = field(default_factory=dict)
    """Each player's latest chat line, and whether it spoke to Emil (whom a promise answers)."""
    present: frozenset[str] = frozenset()
    """The players in the latest snapshot (the notes block puts them first)."""
    _position: dict[str, float] | None = None
    """Emil's own position in the latest snapshot (where it died, when the event lacks it)."""

    # -- events -----------------------------------------------------------------------------------

    def observe(self, event: GameEvent) -> None:
        """Learn from one game event (cheap: at most one small transaction)."""
        facts: list[Fact] = []
        match event:
            case Chat() if event.sender != self.bot_name and _NAME_CHARS.match(event.sender):
                facts.append(Fact(about="player", subject=event.sender, topic="seen"))
                addressed = event.whisper or _names(event.text, self.bot_name)
                self._latest[event.sender] = (addressed, event.text)
                topic: Topic = "whispered" if event.whisper else "asked" if addressed else "said"
                facts.append(Fact(about="player", subject=event.sender, topic=topic, detail=clip(event.text, 160)))
                if not event.whisper:  # a whispered place is that player's secret, not a place for all
                    facts += self._places_in_chat(event)
            case PlayerJoined() if event.username != self.bot_name and _NAME_CHARS.match(event.username):
                facts.append(Fact(about="player", subject=event.username, topic="seen"))
            case ItemCollected(from_player=str(giver)) if giver != self.bot_name and _NAME_CHARS.match(giver):
                facts.append(Fact(about="player", subject=giver, topic="gave_me", detail=clip(event.item, 64), count=max(1, event.count)))
            case Damage(attacker=str(who), attacker_player=True) if who != self.bot_name and _NAME_CHARS.match(who):
                facts.append(Fact(about="player", subject=who, topic="hit_me"))
            case Death():
                where = _block_pos(event.position) or _block_pos(self._position)
                if where is not None:
                    facts.append(Fact(about="place", subject="death", topic="at", detail=where, note=clip(event.reason or "", 100)))
            case Respawn():
                where = _block_pos(event.position)
                if where is not None:
                    facts.append(Fact(about="place", subject="respawn", topic="at", detail=where))
            case _:
                pass
        if facts:
            self.store.learn_many(facts, t=event.t)

    def _promises(self, text: str, requesters: frozenset[str]) -> list[tuple[str, str]]:
        """(player, the sentence) for each promise in one utterance of Emil's to everyone: a
        sentence with a promise goes to the requesters it names; else to those the nearest
        sentence before it names ("Cody! I'll get you dirt."); else to the one whose words it
        answers (:meth:`_promisee`). "Sure, cody, I'll get you dirt. Sure, eli, I'll get you coal."
        is two promises, one to each."""
        out: list[tuple[str, str]] = []
        named_before: list[str] = []
        for sentence in _SENTENCES.split(text.strip()):
            named = [p for p in sorted(requesters) if re.search(rf"(?<!\w){re.escape(p)}(?!\w)", sentence, re.I)]
            if _PROMISE.search(sentence):
                to = named or named_before or self._promisee(sentence, requesters)
                out += [(who, sentence) for who in to if _NAME_CHARS.match(who)]
            named_before = named or named_before
        return out

    def _promisee(self, promise: str, requesters: frozenset[str]) -> list[str]:
        """Whom a promise naming nobody was made to, among the players who spoke in the turn:
        those who spoke to Emil (by name or whisper) before those who did not, then the most
        content words shared between their latest line and the promise; all of the best if
        they tie (one requester: them)."""
        if len(requesters) <= 1:
            return sorted(requesters)
        said = set(words(promise)) - STOP_WORDS

        def score(player: str) -> tuple[bool, int]:
            addressed, text = self._latest.get(player, (False, ""))
            return addressed, len(said & set(words(text)))

        best = max(score(p) for p in requesters)
        return sorted(p for p in requesters if score(p) == best)

    def _places_in_chat(self, chat: Chat) -> list[Fact]:
        place = _PLACE.search(chat.text)
        if place is None:
            return []
        word = place.group(1).lower()
        coords = _COORDS.search(chat.text)
        if coords is not None:
            where = ",".join(coords.groups())
            return [Fact(about="place", subject=word, topic="at", detail=where, told_by=chat.sender, note=clip(chat.text, 100))]
        if _HERE.search(chat.text):
            self._here_claims.append((chat.sender, word, clip(chat.text, 100)))
            del self._here_claims[:-8]
        return []

    # -- snapshots --------------------------------------------------------------------------------

    def observe_snapshot(self, snapshot: Mapping[str, Any]) -> None:
        """Learn from a status snapshot: who stands near, notable blocks, "here" claims."""
        if isinstance(snapshot.get("position"), Mapping):
            self._position = dict(snapshot["position"])
        facts: list[Fact] = []
        players = {p.get("name"): p for p in snapshot.get("players") or [] if isinstance(p, Mapping)}
        self.present = frozenset(n for n in players if isinstance(n, str) and _NAME_CHARS.match(n) and n != self.bot_name)
        for name in sorted(n for n in players if isinstance(n, str) and _NAME_CHARS.match(n) and n != self.bot_name):
            if ("seen", name) not in self._seen_now:
                self._seen_now.add(("seen", name))
                facts.append(Fact(about="player", subject=name, topic="seen"))
        claims, self._here_claims = self._here_claims, []
        for player, word, said in claims:
            where = _block_pos((players.get(player) or {}).get("position"))
            if where is not None:
                facts.append(Fact(about="place", subject=word, topic="at", detail=where, told_by=player, note=said))
        for block in snapshot.get("blocks") or []:
            if not isinstance(block, Mapping) or block.get("name") not in SEEN_BLOCKS:
                continue
            where = _block_pos(block.get("nearest"))
            if where is not None and (block["name"], where) not in self._seen_now:
                self._seen_now.add((block["name"], where))
                facts.append(Fact(about="place", subject=str(block["name"]), topic="at", detail=where))
        if facts:
            self.store.learn_many(facts, t=self.clock())

    # -- Emil's own actions -----------------------------------------------------------------------

    def job_started(
        self, name: str, arguments: Mapping[str, Any] | None, requesters: frozenset[str] = frozenset()
    ) -> str | None:
        """A job began (for ``requesters``, the players whose words are in the turn): returns
        its goal key for :meth:`job_ended` (None: not a job)."""
        tool = TOOLS.get(name)
        if tool is None or not tool.job:  # a goal is a long job (walking, digging, fighting)
            return None
        goal = _goal(name, arguments, requesters)
        self.store.set_goal_status(goal, "active", t=self.clock())
        return goal

    def job_ended(self, goal: str | None, status: str) -> None:
        """done | failed | interrupted."""
        if goal is not None:
            self.store.set_goal_status(goal, status, t=self.clock())

    def tool_done(
        self, name: str, arguments: Mapping[str, Any] | None, ok: bool, requesters: frozenset[str] = frozenset()
    ) -> None:
        """Learn from a tool call's outcome, as its class declares (``gives``, ``speaks``): gifts
        Emil gave, promises Emil made (to the addressee of private words, else to each player
        who asked in the turn)."""
        tool = TOOLS.get(name)
        if tool is None or not ok:
            return
        args = dict(arguments or {})
        facts: list[Fact] = []
        gift = tool.gives
        player = args.get(gift.to) if gift else None
        if gift and isinstance(player, str) and _NAME_CHARS.match(player):
            count = args.get(gift.count) if gift.count else None
            n = count if isinstance(count, int) and count >= 1 else 1
            raw = args.get(gift.item)
            item = "" if raw is None else str(raw)
            facts.append(Fact(about="player", subject=player, topic="i_gave", detail=clip(item or "?", 64), count=n))
            self.store.keep_promises(player, item, since=self.clock() - PROMISE_KEPT_WITHIN_S)
        speech = tool.speaks
        text = args.get(speech.text) if speech else None
        if speech and speech.to is None and isinstance(text, str) and _PROMISE.search(text):
            # (Words to one player are private: a promise whispered is in the archive, recalled
            # to that player alone, never quoted in the notes block every player's turn reads.)
            facts += [Fact(about="player", subject=who, topic="promised", detail=clip(sentence, 160))
                      for who, sentence in self._promises(text, requesters)]
        if facts:
            self.store.learn_many(facts, t=self.clock())

"""A synthetic day of Emil's play, built from Emil's real parts, for sweeps, benchmarks and tests.

Seeded and deterministic: the same seed gives the same day. A small world simulation (players
joining and leaving over the day, their chat, requests, gifts and hits, mobs at night, time and
weather, Emil's hunger and jobs) produces typed game events (:mod:`emil.events`). Emil's own
:class:`~emil.perception.Perception` classifies them and decides when a turn starts, and its
formatters write the observation (:func:`~emil.perception.format_events`,
:func:`~emil.perception.format_status_line`). A scripted policy (rules, not a model) answers
with tool calls; the tool classes (:mod:`emil.world.actions`) validate them, run them against the
simulated body and word the results exactly as live. The system prompt is rendered from
prompts/ and the tool specs come from the tool classes. The notes learner
(:class:`~emil.memory.learn.Learner`) is fed the same events, snapshots and outcomes, so the
pinned notes block evolves as it would live.

Facts are planted at known times (:class:`PlantedFact`: who gave what, who asked for what,
where the chest is, a promise made in the morning); their probes say which strings must share
one line of a prompt for the fact to count as recoverable (:mod:`emil.offline.recall`).
"""

from __future__ import annotations

import heapq
import json
import math
import random
import tempfile
from collections import Counter
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from emil.agent.persona import load_system_prompt
from emil.config import Settings
from emil.context.history import History, Message
from emil.events import (
    Chat,
    Damage,
    Death,
    GameEvent,
    Health,
    HostileNearby,
    ItemCollected,
    PlayerJoined,
    PlayerLeft,
    Respawn,
    TimeOfDay,
    Weather,
)
from emil.llm.types import ToolCall
from emil.memory.learn import Learner
from emil.memory.pinned import PinnedNotes
from emil.memory.store import MemoryStore
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.offline.content import Piece, message_pieces
from emil.offline.recall import PlantedFact
from emil.offline.trace import SessionTrace
from emil.perception import (
    Perception,
    PerceptionPolicy,
    describe_event,
    format_events,
    format_status_line,
)
from emil.world.actions import parse_tool, tool_specs
from emil.world.tool import ActionPolicy, ToolContext
from emil.world.wire import ActionResult, Snapshot

__all__ = [
    "BOT",
    "DAY_START",
    "SYSTEM_PROMPT",
    "SyntheticDay",
    "SyntheticTurn",
    "day_trace",
    "emil_tool_specs",
    "grow",
    "history_of",
    "request_steps",
    "synthetic_day",
    "synthetic_pieces",
    "synthetic_trace",
    "synthetic_turns",
]

DAY_START = 1_779_948_000.0
"""06:00 UTC on a fixed date: the synthetic day's first second (unix time)."""
BOT = "Emil"
_DEFAULTS = Settings()


def emil_tool_specs() -> list[dict[str, Any]]:
    """Emil's tool specs as sent: derived from the tool classes."""
    return tool_specs()


SYSTEM_PROMPT = load_system_prompt(None, name=BOT, tools=[t["function"]["name"] for t in emil_tool_specs()])
"""Emil's system prompt as a default session renders it from prompts/."""


@dataclass(frozen=True)
class SyntheticTurn:
    """One turn: its messages and the game time it started."""

    t: float
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class SyntheticDay:
    """A generated day: the turns, the facts planted in it, and the pinned notes block as it
    changed (``(game time, text)``, rendered between turns when the notes changed)."""

    turns: tuple[SyntheticTurn, ...]
    planted: tuple[PlantedFact, ...]
    notes: tuple[tuple[float, str | None], ...]
    system_prompt: str
    tools: list[dict[str, Any]]
    seed: int
    hours: float


# -- the people and the places ---------------------------------------------------------------------

_ITEMS = {"wood": "oak_log", "logs": "oak_log", "stone": "cobblestone", "coal": "coal", "sand": "sand", "dirt": "dirt"}
_GIFTS = ("bread", "apple", "torch", "cooked_beef", "iron_ingot", "carrot", "oak_planks")
_SMALL_TALK = (
    "anyone seen diamonds around here?", "it's getting dark", "lol", "brb", "nice build!",
    "who took my pickaxe", "the river flooded again", "gg", "where is the village?", "ok",
)
_FLOOD = ("hahaha", "spam spam spam", "look at me", "EMIL EMIL", "wheee", "hello hello hello", "asdfgh")
_HOSTILES = ("zombie", "skeleton", "spider", "creeper")


@dataclass(frozen=True)
class _Person:
    name: str
    trait: Literal["builder", "farmer", "griefer", "chatty", "miner", "trader", "newcomer"]
    online: tuple[tuple[float, float], ...]
    """(from, to) hours after the day's start."""
    every_s: float
    """Mean seconds between two things they do."""


_ROSTER = (
    _Person("alex", "builder", ((0.0, 5.0), (11.0, 15.0)), 150),
    _Person("bella", "farmer", ((0.8, 7.0), (13.0, 17.5)), 170),
    _Person("cody", "griefer", ((0.5, 2.5), (16.0, 18.0)), 200),
    _Person("dana", "chatty", ((3.0, 10.0),), 60),
    _Person("eli", "miner", ((3.5, 9.0), (14.0, 20.0)), 220),
    _Person("fay", "trader", ((5.0, 12.0),), 200),
    _Person("gus", "newcomer", ((6.0, 11.0), (19.0, 23.0)), 180),
    _Person("hana", "builder", ((7.5, 16.0),), 190),
)


# -- planted facts: (hours after start, what, probes, about, the happening) ------------------------

_PLANTS: tuple[tuple[float, str, tuple[tuple[str, ...], ...], Literal["player", "place"], tuple[Any, ...]], ...] = (
    (0.15, "alex gave Emil 3 bread", (("alex", "bread"),), "player", ("gift", "alex", "bread", 3)),
    (0.30, "alex's chest is at 12 64 -7", (("chest", "12,64,-7"), ("chest", "12 64 -7")), "place",
     ("say", "alex", "Emil, my chest is at 12 64 -7")),
    (0.75, "cody asked for a sword and Emil promised one", (("cody", "sword"),), "player",
     ("say", "cody", "Emil, can you make me a sword?")),
    (1.00, "bella asked Emil for wood", (("bella", "wood"), ("bella", "oak_log")), "player",
     ("say", "bella", "Emil, can you get me some wood?")),
    (1.10, "cody hit Emil", (("cody", "hit"),), "player", ("hit", "cody")),
    (1.40, "bella's farm is at -40 70 85", (("farm", "-40,70,85"), ("farm", "-40 70 85")), "place",
     ("say", "bella", "Emil, my farm is at -40 70 85")),
    (2.20, "Emil died at the ravine", (("died", "-118,31,204"),), "place", ("death", -117.5, 31.0, 204.5)),
    (3.30, "dana gave Emil 2 apples", (("dana", "apple"),), "player", ("gift", "dana", "apple", 2)),
    (4.10, "eli's mine is at 150 40 -220", (("mine", "150,40,-220"), ("mine", "150 40 -220")), "place",
     ("say", "eli", "Emil, my mine is at 150 40 -220")),
    (5.50, "Emil promised fay 10 wheat", (("fay", "wheat"),), "player",
     ("say", "fay", "Emil, could you bring me 10 wheat tomorrow?")),
    (6.50, "gus asked Emil for torches", (("gus", "torch"),), "player", ("say", "gus", "Emil, can you give me some torches?")),
    (8.00, "hana's house is at 60 72 -15", (("house", "60,72,-15"), ("house", "60 72 -15")), "place",
     ("say", "hana", "Emil, my house is at 60 72 -15")),
    (11.20, "alex gave Emil 5 iron_ingot", (("alex", "iron_ingot"),), "player", ("gift", "alex", "iron_ingot", 5)),
    (14.50, "eli asked Emil to follow him into the mine", (("eli", "follow"),), "player", ("say", "eli", "Emil, follow me")),
    (19.50, "gus gave Emil 4 carrots", (("gus", "carrot"),), "player", ("gift", "gus", "carrot", 4)),
)


# -- the simulation ----------------------------------------------------------------------------------


def _resolve(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits on anything (a tool against the simulated body)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a synthetic tool waited on something real")


def _pos(x: float, y: float, z: float) -> dict[str, float]:
    return {"x": round(x, 1), "y": round(y, 1), "z": round(z, 1)}


class _World:
    """The simulated world and Emil's body in it; answers the tools as the bot module would."""

    def __init__(self, rng: random.Random, start: float) -> None:
        self.rng = rng
        self.t = start
        self.start = start
        self.pos = _pos(10.0, 64.0, -4.0)
        self.health, self.food = 20.0, 20.0
        self.inventory: Counter[str] = Counter({"stone_pickaxe": 1, "oak_planks": 12, "bread": 2, "torch": 8})
        self.held: str | None = "stone_pickaxe"
        self.following: str | None = None
        self.raining = False
        self.online: dict[str, dict[str, float]] = {}
        self.hostiles: list[tuple[str, float]] = []

    @property
    def ticks(self) -> int:
        # A Minecraft day is 20 minutes; the session starts at sunrise + 1000 ticks.
        return int(1000 + (self.t - self.start) * 20) % 24000

    def snapshot(self) -> dict[str, Any]:
        players: list[dict[str, Any]] = []
        for name, where in sorted(self.online.items()):
            d = math.dist((where["x"], where["y"], where["z"]), (self.pos["x"], self.pos["y"], self.pos["z"]))
            if d <= 48:
                players.append({"name": name, "distance": round(d, 1), "position": where})
        players.sort(key=lambda p: p["distance"])
        mobs = [{"name": n, "distance": round(d, 1), "hostile": True} for n, d in self.hostiles]
        near_home = math.dist((self.pos["x"], self.pos["z"]), (12, -7)) < 16
        blocks = [{"name": "oak_log", "count": 14, "nearest": {"x": 18, "y": 64, "z": 3}, "distance": 9.2}]
        if near_home:
            blocks.append({"name": "chest", "count": 1, "nearest": {"x": 12, "y": 64, "z": -7}, "distance": 3.1})
            blocks.append({"name": "crafting_table", "count": 1, "nearest": {"x": 9, "y": 64, "z": -6}, "distance": 2.4})
        return {
            "connected": True, "username": BOT, "position": dict(self.pos), "health": self.health,
            "food": self.food, "time_of_day": self.ticks, "dimension": "overworld", "raining": self.raining,
            "held": self.held, "standing_on": "grass_block", "inventory": dict(sorted(self.inventory.items())),
            "players": players[:10], "mobs": mobs[:10], "blocks": blocks, "job": None,
            "following": self.following, "reflexes": {},
        }

    def act(self, name: str, args: dict[str, Any]) -> ActionResult:
        rng = self.rng
        if name in ("say", "whisper", "look_at"):
            return ActionResult(ok=True, result={})
        if name == "go_to":
            target: dict[str, float] | None = self.online.get(str(args.get("player"))) if args.get("player") else None
            if args.get("player") and target is None:
                return ActionResult(ok=False, error=f"player {args.get('player')} is not in sight")
            if target is None:
                target = _pos(float(args["x"]), float(args["y"]), float(args["z"]))
            self.pos = _pos(target["x"] + 1.2, target["y"], target["z"] - 0.7)
            return ActionResult(ok=True, result={"position": dict(self.pos)})
        if name == "follow":
            self.following = str(args["player"])
            return ActionResult(ok=True, result={"following": self.following})
        if name == "stop":
            stopped = "follow" if self.following else None
            self.following = None
            return ActionResult(ok=True, result={"stopped": stopped})
        if name == "collect":
            block, count = str(args["block"]), int(args.get("count") or 1)
            if rng.random() < 0.12:
                return ActionResult(ok=False, error=f"no {block} within {args.get('max_distance', 32)} blocks")
            got = count if rng.random() < 0.8 else max(1, count - rng.randint(1, count))
            self.inventory[block] += got
            return ActionResult(ok=True, result={"dug": got, "collected": {block: got}})
        if name == "give":
            item, count, player = str(args["item"]), int(args.get("count") or 1), str(args["player"])
            if player not in self.online:
                return ActionResult(ok=False, error=f"player {player} is not in sight")
            have = self.inventory[item]
            if have <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            n = min(have, count)
            self.inventory[item] -= n
            short = f"only had {n}" if n < count else None
            return ActionResult(ok=True, result={"count": n, "gave": item, "to": player, **({"short": short} if short else {})})
        if name == "attack":
            mob = str(args["target"])
            won = rng.random() < 0.85
            if won:
                self.hostiles = [h for h in self.hostiles if h[0] != mob]
            return ActionResult(ok=True, result={"target": mob, "fought_s": round(rng.uniform(2, 9), 1),
                                                 "hits": rng.randint(2, 7), "defeated": won})
        if name == "flee":
            self.pos = _pos(self.pos["x"] + 14, self.pos["y"], self.pos["z"] + 6)
            self.hostiles = []
            return ActionResult(ok=True, result={"fled_from": args.get("from") or "zombie", "position": dict(self.pos)})
        if name == "eat":
            food = next((f for f in ("cooked_beef", "bread", "apple", "carrot") if self.inventory[f] > 0), None)
            if food is None:
                return ActionResult(ok=False, error="nothing to eat")
            self.inventory[food] -= 1
            before, self.food = self.food, min(20.0, self.food + 6)
            return ActionResult(ok=True, result={"ate": food, "food_before": before, "food_after": self.food})
        if name == "equip":
            item = str(args["item"])
            if self.inventory[item] <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            self.held = item
            return ActionResult(ok=True, result={"equipped": item, "destination": args.get("destination", "hand")})
        if name == "place":
            item = str(args["item"])
            if self.inventory[item] <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            self.inventory[item] -= 1
            return ActionResult(ok=True, result={"placed": item, "at": {k: args[k] for k in ("x", "y", "z")}})
        if name == "dig":
            return ActionResult(ok=True, result={"dug": "dirt", "at": {k: args[k] for k in ("x", "y", "z")}})
        return ActionResult(ok=False, error=f"{name} is not simulated")


class _Body:
    """The simulated Emil as the tool classes see a bot (:class:`emil.world.tool.BotLike`)."""

    def __init__(self, world: _World) -> None:
        self.world = world

    async def act(self, name: str, args: Any = None, timeout: float = 60.0, *, job: bool = False) -> ActionResult:  # noqa: ASYNC109
        return self.world.act(name, dict(args or {}))

    async def snapshot(self) -> Snapshot:
        return Snapshot.model_validate(self.world.snapshot())


_DURATION_S = {"go_to": (4, 20), "collect": (15, 60), "give": (3, 12), "attack": (2, 9), "flee": (3, 8),
               "eat": (1.6, 2), "follow": (0.2, 0.5)}
"""Game seconds a tool call takes (jobs return when done, as live); anything else ~0.2 s."""


@dataclass
class _Step:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    text: str | None = None


class _Day:
    """One run of the simulation (see the module doc)."""

    def __init__(self, seed: int, hours: float, *, start: float, reasoning: bool,
                 store: MemoryStore | None, notes: PinnedNotes | None, notes_every_s: float) -> None:
        self.rng = random.Random(seed)
        self.start, self.end = start, start + hours * 3600.0
        self.world = _World(random.Random(seed + 1), start)
        self.body = _Body(self.world)
        self.perception = Perception(PerceptionPolicy(bot_name=BOT))
        self.learner = Learner(store, bot_name=BOT, clock=lambda: self.world.t) if store is not None else None
        self.pinned, self.notes_every_s = notes, notes_every_s
        self.reasoning = reasoning
        self.queue: list[tuple[float, int, tuple[Any, ...]]] = []
        self._n = 0
        self.turns: list[SyntheticTurn] = []
        self.planted: list[PlantedFact] = []
        self.notes: list[tuple[float, str | None]] = []
        self._calls = 0
        self._places: Counter[str] = Counter()
        """Places each player has named today."""

    # -- scheduling --------------------------------------------------------------------------------

    def at(self, t: float, what: tuple[Any, ...]) -> None:
        if t < self.end:
            self._n += 1
            heapq.heappush(self.queue, (t, self._n, what))

    def schedule(self) -> None:
        """The first of the self-renewing happenings: each schedules its successor, so an
        endless stream of turns costs only what is taken of it."""
        self.at(self.start, ("day", 0))
        self.at(self.start, ("mc_day",))
        self.at(self.start + self.rng.uniform(400, 900), ("hunger",))

    def _new_day(self, day: int) -> None:
        rng, base = self.rng, self.start + day * 86400.0
        self.at(base + 86400.0, ("day", day + 1))
        for person in _ROSTER:
            for a, b in person.online:
                jitter = rng.uniform(-600, 600)
                self.at(base + a * 3600 + jitter, ("join", person.name))
                self.at(base + b * 3600 + jitter, ("leave", person.name))
        if day == 0:
            for hours, what, probes, about, happening in _PLANTS:
                t = base + hours * 3600
                if t < self.end:
                    self.planted.append(PlantedFact(t, what, probes, about))
                    self.at(t, happening)
        t = base
        while True:  # weather: a shower every few hours
            t += rng.uniform(2, 6) * 3600
            if t >= base + 86400.0:
                break
            self.at(t, ("rain", True))
            self.at(t + rng.uniform(600, 2400), ("rain", False))

    def _new_mc_day(self) -> None:
        # A Minecraft day is 20 minutes: dusk and night, hostiles (sometimes close), dawn.
        rng, t = self.rng, self.world.t
        self.at(t + 1200, ("mc_day",))
        self.at(t + 600, ("phase", "dusk"))
        self.at(t + 700, ("phase", "night"))
        for _ in range(rng.randint(0, 3)):
            self.at(t + rng.uniform(700, 1100), ("hostile", rng.choice(_HOSTILES), round(rng.uniform(4, 20), 1)))
        self.at(t + 1110, ("phase", "dawn"))
        self.at(t + 1190, ("phase", "day"))

    # -- what happens ------------------------------------------------------------------------------

    def happen(self, what: tuple[Any, ...]) -> list[GameEvent]:
        w, rng, t = self.world, self.rng, self.world.t
        kind = what[0]
        if kind == "day":
            self._new_day(what[1])
            return []
        if kind == "mc_day":
            self._new_mc_day()
            return []
        if kind == "join":
            name = what[1]
            if name in w.online:
                return []
            w.online[name] = _pos(w.pos["x"] + rng.uniform(-20, 20), 64, w.pos["z"] + rng.uniform(-20, 20))
            person = next(p for p in _ROSTER if p.name == name)
            self.at(t + rng.uniform(5, 40), ("greet", name))
            self.at(t + rng.expovariate(1 / person.every_s), ("act", name))
            return [PlayerJoined(t=t, username=name)]
        if kind == "leave":
            if w.online.pop(what[1], None) is None:
                return []
            if w.following == what[1]:
                w.following = None
            return [PlayerLeft(t=t, username=what[1])]
        if kind == "rain":
            w.raining = bool(what[1])
            return [Weather(t=t, raining=w.raining)]
        if kind == "phase":
            if what[1] in ("dawn", "day"):
                w.hostiles = []
            return [TimeOfDay(t=t, phase=what[1], time_of_day=w.ticks)]
        if kind == "hostile":
            w.hostiles.append((what[1], what[2]))
            events: list[GameEvent] = [HostileNearby(t=t, name=what[1], distance=what[2])]
            if what[2] < 8 and rng.random() < 0.5:
                w.health = max(1.0, w.health - rng.randint(2, 5))
                events.append(Damage(t=t, amount=3, health=w.health, attacker=what[1]))
            return events
        if kind == "hunger":
            self.at(t + rng.uniform(400, 900), ("hunger",))
            w.food = max(0.0, w.food - rng.randint(2, 5))
            w.health = min(20.0, w.health + 2)
            return [Health(t=t, health=w.health, food=w.food)]
        if kind == "death":
            w.pos = _pos(what[1], what[2], what[3])
            w.health = 0.0
            events = [Death(t=t, reason="blown up by creeper", position=dict(w.pos))]
            w.pos, w.health, w.food = _pos(0.5, 64, 0.5), 20.0, 20.0
            w.inventory = Counter({"oak_planks": 4})
            return [*events, Respawn(t=t + 2, position=dict(w.pos))]
        if kind == "gift":
            name, item, count = what[1], what[2], what[3]
            if name not in w.online:
                self.happen(("join", name))
            w.inventory[item] += count
            return [ItemCollected(t=t, item=item, count=count, from_player=name)]
        if kind == "hit":
            if what[1] not in w.online:
                return []
            w.health = max(1.0, w.health - 2)
            return [Damage(t=t, amount=2, health=w.health, attacker=what[1], attacker_player=True)]
        if kind == "say":
            name, text = what[1], what[2]
            if name not in w.online:
                self.happen(("join", name))
            return [Chat(t=t, sender=name, text=text)]
        if kind == "greet":
            if what[1] not in w.online:
                return []
            return [Chat(t=t, sender=what[1], text=rng.choice((f"hi {BOT}!", f"hello {BOT}", "hey all", f"morning {BOT}")))]
        if kind == "act":
            return self.person_acts(what[1])
        return []

    def person_acts(self, name: str) -> list[GameEvent]:
        w, rng, t = self.world, self.rng, self.world.t
        if name not in w.online:
            return []
        person = next(p for p in _ROSTER if p.name == name)
        self.at(t + rng.expovariate(1 / person.every_s), ("act", name))
        choice = rng.choices(
            ("talk", "request", "follow", "come", "place", "gift", "hit", "flood", "whisper", "ask"),
            weights={
                "builder": (3, 3, 1, 2, 2, 1, 0, 0, 1, 1), "farmer": (3, 3, 0, 1, 2, 2, 0, 0, 1, 1),
                "griefer": (3, 1, 0, 1, 0, 0, 4, 1, 0, 0), "chatty": (4, 1, 0, 1, 0, 1, 0, 3, 1, 1),
                "miner": (2, 3, 2, 1, 1, 1, 0, 0, 0, 1), "trader": (3, 2, 0, 1, 1, 2, 0, 0, 2, 1),
                "newcomer": (3, 2, 1, 2, 0, 1, 0, 0, 1, 2),
            }[person.trait],
        )[0]
        if choice == "talk":
            return [Chat(t=t, sender=name, text=rng.choice(_SMALL_TALK))]
        if choice == "request":
            word = rng.choice(tuple(_ITEMS))
            return [Chat(t=t, sender=name, text=rng.choice((f"{BOT}, can you get me some {word}?", f"{BOT}, bring me {word} please")))]
        if choice == "follow":
            self.at(t + rng.uniform(60, 300), ("say", name, f"{BOT}, stop following me"))
            return [Chat(t=t, sender=name, text=f"{BOT}, follow me")]
        if choice == "come":
            return [Chat(t=t, sender=name, text=rng.choice((f"{BOT}, come here", f"where are you {BOT}?")))]
        if choice == "place" and self._places[name] < 2:  # a player names a place or two a day
            self._places[name] += 1
            place = rng.choice(("barn", "garden", "tower", "shop", "portal"))
            x, y, z = rng.randint(-300, 300), rng.randint(60, 80), rng.randint(-300, 300)
            return [Chat(t=t, sender=name, text=f"{BOT}, my {place} is at {x} {y} {z}")]
        if choice == "place":
            return [Chat(t=t, sender=name, text=rng.choice(_SMALL_TALK))]
        if choice == "gift":
            item = rng.choice(_GIFTS)
            n = rng.randint(1, 6)
            w.inventory[item] += n
            return [ItemCollected(t=t, item=item, count=n, from_player=name)]
        if choice == "hit":
            w.health = max(1.0, w.health - 2)
            return [Damage(t=t, amount=2, health=w.health, attacker=name, attacker_player=True)]
        if choice == "flood":
            return [Chat(t=t + i * 0.3, sender=name, text=rng.choice(_FLOOD)) for i in range(rng.randint(4, 9))]
        if choice == "whisper":
            return [Chat(t=t, sender=name, text=rng.choice(("can you keep a secret?", "meet me at spawn later", "don't tell cody")), whisper=True)]
        return [Chat(t=t, sender=name, text=rng.choice((f"{BOT}, what do you have?", f"{BOT}, how are you?", f"{BOT}, what's around?")))]

    # -- Emil's turns: the scripted policy -----------------------------------------------------------

    def decide(self, events: Sequence[GameEvent], snapshot: dict[str, Any]) -> list[_Step]:
        """What a helpful Emil does with these events (a SCRIPT: rules, not a model)."""
        steps: list[_Step] = []
        said: list[str] = []
        jobs: list[tuple[str, dict[str, Any]]] = []
        followups: list[tuple[str, dict[str, Any]]] = []
        for e in events:
            match e:
                case Damage(attacker_player=True, attacker=str(who)):
                    said.append(f"Ouch! Stop hitting me, {who}.")
                case Damage(attacker=str(mob)) | HostileNearby(name=mob) if mob in _HOSTILES:
                    if not any(name == "attack" for name, _ in jobs):
                        jobs.append(("attack", {"target": mob}))
                case Death():
                    said.append("I died... back soon.")
                case ItemCollected(from_player=str(who)):
                    said.append(f"Thanks for the {e.count} {e.item}, {who}!")
                case PlayerJoined(username=who) if self.rng.random() < 0.5:
                    said.append(f"Welcome, {who}!")
                case Chat(sender=who, text=text, whisper=whisper):
                    self.answer(who, text, whisper, said, jobs, followups)
                case _:
                    pass
        if snapshot.get("food", 20) < 8 and not jobs:
            jobs.append(("eat", {}))
        first = [("say", {"text": " ".join(dict.fromkeys(said))})] if said else []
        if first or jobs:
            steps.append(_Step(calls=[*first, *jobs[:1]]))
            for job in jobs[1:2]:
                steps.append(_Step(calls=[job]))
        if followups:
            steps.append(_Step(calls=followups[:2]))
        final = self.rng.choice((None, None, "Done.", "Nothing else to do now.", "OK."))
        steps.append(_Step(text=final if steps else self.rng.choice(("Nothing for me to do.", "Not for me.", None))))
        return steps

    def answer(self, who: str, text: str, whisper: bool, said: list[str],
               jobs: list[tuple[str, dict[str, Any]]], followups: list[tuple[str, dict[str, Any]]]) -> None:
        low = text.lower()
        named = whisper or BOT.lower() in low
        if not named:
            if self.rng.random() < 0.15:
                said.append(f"Hi {who}.")
            return
        if whisper:
            followups.append(("whisper", {"player": who, "text": "Your secret is safe with me."}))
            return
        for word, block in _ITEMS.items():
            if word in low and ("get me" in low or "bring me" in low):
                n = self.rng.choice((4, 5, 8, 10))
                said.append(f"Sure, {who}, I'll get you {n} {block}.")
                jobs.append(("collect", {"block": block, "count": n}))
                followups.append(("give", {"player": who, "item": block, "count": n}))
                return
        if "torches" in low:
            said.append(f"Here you go, {who}: 4 torches.")
            jobs.append(("give", {"player": who, "item": "torch", "count": 4}))
        elif "sword" in low:
            said.append(f"I'll make you a sword later, {who}.")
        elif "wheat" in low:
            said.append(f"I will bring you 10 wheat tomorrow, {who}.")
        elif "stop following" in low:
            jobs.append(("stop", {}))
            said.append(f"OK {who}, staying here.")
        elif "follow me" in low:
            said.append(f"Following you, {who}.")
            jobs.append(("follow", {"player": who}))
        elif "come here" in low or "where are you" in low:
            jobs.append(("go_to", {"player": who}))
            followups.append(("say", {"text": f"I'm here, {who}."}))
        elif " is at " in low:
            place = low.split("my ", 1)[-1].split(" is at", 1)[0]
            coords = text.rsplit(" is at ", 1)[-1]
            said.append(f"Got it, {who}: your {place} is at {coords}.")
        elif "what do you have" in low:
            jobs.append(("inventory", {}))
        elif "around" in low:
            jobs.append(("nearby", {}))
        elif "how are you" in low:
            jobs.append(("status", {}))
        else:
            said.append(f"Hi {who}!")

    def thought(self, events: Sequence[GameEvent], step: _Step) -> str:
        """Reasoning of the length a thinking model writes before a step (tens of words)."""
        seen = "; ".join(describe_event(e) for e in events[:4]) or "nothing new"
        plan = ", then ".join(f"{name} {json.dumps(args, ensure_ascii=False)}" for name, args in step.calls)
        return (
            f"Let me look at what happened: {seen}. My health is {self.world.health:g} and food "
            f"{self.world.food:g}. "
            + (f"The best next step is to call {plan}, and tell the player briefly what I did." if plan
               else "Nothing here needs an action from me, so I will wait for the next observation.")
        )

    def run_call(self, name: str, args: dict[str, Any], requesters: frozenset[str]) -> tuple[dict[str, str], Message]:
        """One tool call through the real tool class against the simulated body."""
        self._calls += 1
        call_id = f"call_{self._calls}"
        raw = json.dumps(args, ensure_ascii=False)
        call = ToolCall(id=call_id, name=name, raw_arguments=raw, arguments=args)
        goal = self.learner.job_started(name, args, requesters) if self.learner else None
        tool = parse_tool(call)
        if isinstance(tool, str):
            text, ok = f"error: {tool}", False
        else:
            outcome = _resolve(tool.run(ToolContext(self.body, ActionPolicy(requesters=requesters))))
            text, ok = outcome.text, outcome.ok
        lo, hi = _DURATION_S.get(name, (0.1, 0.3))
        self.world.t += self.rng.uniform(lo, hi)
        if self.learner is not None:
            self.learner.job_ended(goal, "done" if ok else "failed")
            self.learner.tool_done(name, args, ok, requesters)
        return {"id": call_id, "name": name, "arguments": raw}, Message.tool_result(call_id, text, event_time=self.world.t)

    def turn(self) -> None:
        triaged = self.perception.take()
        events = [x.event for x in triaged]
        start = self.world.t
        snapshot = self.world.snapshot()
        if self.learner is not None:
            self.learner.observe_snapshot(snapshot)
        opening = Message(
            role="user", kind="observation", content=format_events(triaged),
            status=format_status_line(snapshot, self.perception.ambient),
            event_time=min((e.t for e in events), default=start),
        )
        messages = [opening]
        requesters = frozenset(e.sender for e in events if isinstance(e, Chat))
        for step in self.decide(events, snapshot):
            self.world.t += self.rng.uniform(0.8, 2.5)  # the model's answer
            reasoning = self.thought(events, step) if self.reasoning else None
            if not step.calls:
                messages.append(Message.assistant(step.text, reasoning=reasoning, event_time=opening.event_time))
                break
            done = [self.run_call(name, args, requesters) for name, args in step.calls]
            messages.append(Message.assistant(None, tool_calls=[c for c, _ in done], reasoning=reasoning,
                                              event_time=opening.event_time))
            messages.extend(m for _, m in done)
        self.turns.append(SyntheticTurn(start, tuple(messages)))

    def run(self) -> Iterator[SyntheticTurn]:
        """The turns as they happen, until ``end`` (game time)."""
        self.schedule()
        next_notes = self.start
        while True:
            wait = self.perception.wait_s(self.world.t)
            if wait == 0:
                self.turn()
                yield self.turns[-1]
                if self.pinned is not None and self.world.t >= next_notes:
                    before = self.pinned.text()
                    self.pinned.prepare()
                    if self.pinned.text() != before:
                        self.notes.append((self.world.t, self.pinned.text()))
                    next_notes = self.world.t + self.notes_every_s
                continue
            due = self.queue[0][0] if self.queue else math.inf
            if wait is not None:
                due = min(due, self.world.t + wait)
            if due >= self.end:
                return
            self.world.t = max(self.world.t, due)
            while self.queue and self.queue[0][0] <= self.world.t:
                _, _, what = heapq.heappop(self.queue)
                for event in self.happen(what):
                    if self.learner is not None:
                        self.learner.observe(event)
                    self.perception.add(event, now=self.world.t)


def synthetic_day(
    hours: float = 24.0,
    *,
    seed: int = 7,
    reasoning: bool = _DEFAULTS.enable_thinking,
    data_dir: Path | None = None,
    memory_tokens: int = _DEFAULTS.memory_tokens,
    tokenizer: str = DEFAULT_FAMILY,
    notes_every_s: float = 300.0,
    start: float = DAY_START,
) -> SyntheticDay:
    """``hours`` of seeded play (see the module doc).

    The notes learned go to ``data_dir`` (a fresh temporary one when None, deleted after); the
    pinned block is rendered within ``memory_tokens`` of ``tokenizer`` at most every
    ``notes_every_s`` game seconds, when the notes changed (live renders between turns; a sweep
    only needs the block a trim would take)."""
    if hours <= 0:
        raise ValueError(f"--synthetic-hours must be positive, got {hours}")
    with tempfile.TemporaryDirectory(prefix="emil-day-") as scratch:
        store = MemoryStore.open(data_dir or Path(scratch))
        try:
            counter = get_token_counter(tokenizer)
            pinned = PinnedNotes(store, max_tokens=memory_tokens, tokens_of=counter.count) if memory_tokens > 0 else None
            day = _Day(seed, hours, start=start, reasoning=reasoning, store=store, notes=pinned, notes_every_s=notes_every_s)
            if pinned is not None:
                day.notes.append((start, pinned.text()))
            for _turn in day.run():
                pass
        finally:
            store.close()
    return SyntheticDay(
        turns=tuple(day.turns), planted=tuple(day.planted), notes=tuple(day.notes),
        system_prompt=SYSTEM_PROMPT, tools=emil_tool_specs(), seed=seed, hours=hours,
    )


def synthetic_turns(seed: int = 0, *, start_time: float = DAY_START, reasoning: bool = True) -> Iterator[SyntheticTurn]:
    """The turns of a seeded synthetic day (see :func:`synthetic_day`), without notes; a
    stream for tests and benchmarks that take as many turns as they need."""
    day = _Day(seed, math.inf, start=start_time, reasoning=reasoning, store=None, notes=None, notes_every_s=math.inf)
    yield from day.run()


def history_of(turns: list[SyntheticTurn]) -> History:
    """A History holding these turns."""
    return History(tuple(turn.messages for turn in turns))


def request_steps(turn: SyntheticTurn) -> Iterator[tuple[bool, list[Message]]]:
    """How the agent loop grows history within one turn, request by request: the opening starts
    the turn (``True``); each assistant message with its tool results is appended (``False``)
    before the next request."""
    yield True, [turn.messages[0]]
    group: list[Message] = []
    for message in turn.messages[1:]:
        if message.role == "assistant" and group:
            yield False, group
            group = []
        group.append(message)
    if group:
        yield False, group


def grow(history: History, new_turn: bool, messages: list[Message]) -> History:
    """Apply one :func:`request_steps` step to a history."""
    if new_turn:
        history = history.start_turn(messages[0])
        messages = messages[1:]
    return history.extend(messages)


def synthetic_trace(
    hours: float,
    *,
    seed: int = 7,
    reasoning: bool = _DEFAULTS.enable_thinking,
    preserve_thinking: bool = _DEFAULTS.preserve_thinking,
    model_family: str = DEFAULT_FAMILY,
    memory_tokens: int = _DEFAULTS.memory_tokens,
) -> SessionTrace:
    """``hours`` of the synthetic day as a trace the budget sweep replays: the turns, the
    pinned notes block as it changed, and the planted facts (see :func:`synthetic_day`)."""
    day = synthetic_day(hours, seed=seed, reasoning=reasoning, memory_tokens=memory_tokens, tokenizer=model_family)
    return day_trace(day, preserve_thinking=preserve_thinking, model_family=model_family)


def day_trace(day: SyntheticDay, *, preserve_thinking: bool = _DEFAULTS.preserve_thinking,
              model_family: str = DEFAULT_FAMILY) -> SessionTrace:
    """A generated day as a :class:`SessionTrace`."""
    return SessionTrace.from_turns(
        (t.messages for t in day.turns),
        name=f"synthetic {day.hours:g} h (seed {day.seed})",
        system_prompt=day.system_prompt,
        tools=day.tools,
        preserve_thinking=preserve_thinking,
        model_family=model_family,
        notes=day.notes,
        planted=day.planted,
    )


def synthetic_pieces(hours: float, *, seed: int = 7) -> Iterator[Piece]:
    """The synthetic day's text by content category (for chars_per_token)."""
    trace = synthetic_trace(hours, seed=seed)
    messages = (s.message for s in trace.steps if s.message is not None)
    return message_pieces(messages, system_prompt=trace.system_prompt, tools=trace.tools)


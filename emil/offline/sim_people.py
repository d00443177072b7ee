"""The synthetic day's people and what happens to Emil: players joining and leaving over the
day, their chat, requests, gifts, hits and floods, dusk and night with hostiles, rain, hunger,
a few happenings at known times (:data:`PLANTS`: a gift, a place named, a death), and the facts
said in conversation that the recall benchmark plants (:mod:`emil.offline.facts`, worded by a
generator the memory code never imports: the recall measure's ground truth).

:class:`Happenings` is a seeded schedule of self-renewing happenings; each one, when due,
becomes typed game events (:mod:`emil.world.events`) and may schedule its successor.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from emil.offline.facts import SaidFact
from emil.offline.recall import PlantedFact
from emil.offline.sim_world import BOT, FLOOD, GIFTS, HOSTILES, ITEMS, SMALL_TALK, SimWorld, pos
from emil.world.events import (
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

__all__ = ["PLANTS", "ROSTER", "Happenings", "Person"]


@dataclass(frozen=True)
class Person:
    name: str
    trait: Literal["builder", "farmer", "griefer", "chatty", "miner", "trader", "newcomer"]
    online: tuple[tuple[float, float], ...]
    """(from, to) hours after the day's start."""
    every_s: float
    """Mean seconds between two things they do."""


ROSTER = (
    Person("alex", "builder", ((0.0, 5.0), (11.0, 15.0)), 150),
    Person("bella", "farmer", ((0.8, 7.0), (13.0, 17.5)), 170),
    Person("cody", "griefer", ((0.5, 2.5), (16.0, 18.0)), 200),
    Person("dana", "chatty", ((3.0, 10.0),), 60),
    Person("eli", "miner", ((3.5, 9.0), (14.0, 20.0)), 220),
    Person("fay", "trader", ((5.0, 12.0),), 200),
    Person("gus", "newcomer", ((6.0, 11.0), (19.0, 23.0)), 180),
    Person("hana", "builder", ((7.5, 16.0),), 190),
)



# -- happenings at known times: (hours after start, what, probes, about, the happening) -----------
# They shape the day as before; the facts recall is measured on are the ones said in
# conversation (Happenings(said=...)).

PLANTS: tuple[tuple[float, str, tuple[tuple[str, ...], ...], Literal["player", "place"], tuple[Any, ...]], ...] = (
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



class Happenings:
    """What happens over the day (see the module doc); ``rng`` is the day's, shared with Emil's
    script so that one seed decides the whole day."""

    def __init__(self, rng: random.Random, world: SimWorld, *, start: float, end: float,
                 said: Sequence[SaidFact] = (), plant: bool = True, seed: int = 0) -> None:
        self.rng, self.world, self.start, self.end = rng, world, start, end
        self.queue: list[tuple[float, int, tuple[Any, ...]]] = []
        self._n = 0
        self.said, self.plant = tuple(said), plant
        """Facts said in conversation; ``plant=False`` keeps them out of the day (the null run:
        the same day, the same probes, nothing said)."""
        self._plant_rng = random.Random(f"plant-{seed}")
        self.planted: list[PlantedFact] = []
        self._places: Counter[str] = Counter()
        """Places each player has named today."""

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
        for person in ROSTER:
            for a, b in person.online:
                jitter = rng.uniform(-600, 600)
                self.at(base + a * 3600 + jitter, ("join", person.name))
                self.at(base + b * 3600 + jitter, ("leave", person.name))
        if day == 0:
            for hours, _what, _probes, _about, happening in PLANTS:
                t = base + hours * 3600
                if t < self.end:
                    self.at(t, happening)
            self._plant_said(base)
        t = base
        while True:  # weather: a shower every few hours
            t += rng.uniform(2, 6) * 3600
            if t >= base + 86400.0:
                break
            self.at(t, ("rain", True))
            self.at(t + rng.uniform(600, 2400), ("rain", False))

    def _plant_said(self, base: float) -> None:
        """Each fact said once, at a time in the first 70% of the day (so that hours pass before
        the day ends), by its speaker if they are online then, else by someone who is."""
        span = min(self.end - base, 86400.0)
        rng = self._plant_rng
        for fact in self.said:
            t = base + rng.uniform(0.05, 0.7) * span
            hours = (t - base) / 3600
            online = [p.name for p in ROSTER if any(a <= hours <= b for a, b in p.online)]
            speaker = fact.speaker if fact.speaker in online or not online else rng.choice(online)
            self.planted.append(PlantedFact(t, f"{speaker}: {fact.text}", (fact.probe,), "player",
                                            kind=fact.kind, speaker=speaker, question=fact.question))
            if self.plant:
                self.at(t, ("say", speaker, fact.text))

    def _new_mc_day(self) -> None:
        # A Minecraft day is 20 minutes: dusk and night, hostiles (sometimes close), dawn.
        rng, t = self.rng, self.world.t
        self.at(t + 1200, ("mc_day",))
        self.at(t + 600, ("phase", "dusk"))
        self.at(t + 700, ("phase", "night"))
        for _ in range(rng.randint(0, 3)):
            self.at(t + rng.uniform(700, 1100), ("hostile", rng.choice(HOSTILES), round(rng.uniform(4, 20), 1)))
        self.at(t + 1110, ("phase", "dawn"))
        self.at(t + 1190, ("phase", "day"))

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
            w.online[name] = pos(w.pos["x"] + rng.uniform(-20, 20), 64, w.pos["z"] + rng.uniform(-20, 20))
            person = next(p for p in ROSTER if p.name == name)
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
            w.pos = pos(what[1], what[2], what[3])
            w.health = 0.0
            events = [Death(t=t, reason="blown up by creeper", position=dict(w.pos))]
            w.pos, w.health, w.food = pos(0.5, 64, 0.5), 20.0, 20.0
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
        person = next(p for p in ROSTER if p.name == name)
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
            return [Chat(t=t, sender=name, text=rng.choice(SMALL_TALK))]
        if choice == "request":
            word = rng.choice(tuple(ITEMS))
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
            return [Chat(t=t, sender=name, text=rng.choice(SMALL_TALK))]
        if choice == "gift":
            item = rng.choice(GIFTS)
            n = rng.randint(1, 6)
            w.inventory[item] += n
            return [ItemCollected(t=t, item=item, count=n, from_player=name)]
        if choice == "hit":
            w.health = max(1.0, w.health - 2)
            return [Damage(t=t, amount=2, health=w.health, attacker=name, attacker_player=True)]
        if choice == "flood":
            return [Chat(t=t + i * 0.3, sender=name, text=rng.choice(FLOOD)) for i in range(rng.randint(4, 9))]
        if choice == "whisper":
            return [Chat(t=t, sender=name, text=rng.choice(("can you keep a secret?", "meet me at spawn later", "don't tell cody")), whisper=True)]
        return [Chat(t=t, sender=name, text=rng.choice((f"{BOT}, what do you have?", f"{BOT}, how are you?", f"{BOT}, what's around?")))]


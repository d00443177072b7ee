"""Facts said in ordinary conversation, worded by a generator the memory code never imports.

The recall benchmark (tools/bench_recall.py) plants these in the synthetic day as players'
chat. Nothing in :mod:`emil.memory` may import this module (a unit test checks): memory must
find what was said without knowing how it was worded, and the benchmark must not be tuned to
the learner. Held-out acceptance days use their own wording; this generator is one of many.

Each :class:`SaidFact` has

- a ``kind`` (:data:`KINDS`: names, nicknames, rules, codes and numbers, places named by any
  word, requests, promises, directions, opinions, jokes), each with several wordings, said to
  Emil or to everyone;
- a ``probe``: strings that must all appear in one line of a prompt for the fact to count as
  there; they are phrases only this fact contains (invented words, numbers and rare nouns
  drawn without repeats, none of which the synthetic day uses otherwise), so a day with
  nothing planted finds (almost) none of them: the null run;
- a ``question``: how its speaker asks about it later without the probe (sharing one or two
  other words of the fact, as people do), for the "asked" measure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["KINDS", "WORDINGS", "FactKind", "SaidFact", "Wordings", "said_facts"]

FactKind = Literal["name", "nickname", "rule", "code", "place", "request", "promise", "direction", "opinion", "joke"]
KINDS: tuple[FactKind, ...] = get_args(FactKind)
Wordings = Literal["main", "heldout"]
WORDINGS: tuple[Wordings, ...] = get_args(Wordings)
"""``main``: the wordings the benchmark reports first; ``heldout``: a second set, written once
before the memory code was tuned against ``main`` and never looked at fact by fact while tuning
(its own sentences, nouns, mobs, items, jokes and questions), reported apart as "held-out
wordings" (docs/memory.md)."""

_SYLLABLES = ("ka", "zu", "mi", "ro", "vek", "tal", "bri", "dho", "quin", "sar", "lum", "pex", "or", "yth", "gral", "fen")
_PLACE_NOUNS = ("gazebo", "lighthouse", "observatory", "treehouse", "dock", "forge", "library", "windmill",
                "greenhouse", "pier", "bunker", "workshop", "chapel", "aviary", "cellar", "hideout")
_RARE_ITEMS = ("lapis", "saddle", "name tag", "prismarine", "amethyst", "honeycomb", "slime ball", "nautilus shell",
               "ender pearl", "glow berries", "spyglass", "lodestone", "trident", "sea lantern", "bell", "lantern")
_OPINION_THINGS = ("axolotls", "mooshrooms", "phantoms", "pillagers", "striders", "llamas", "parrots", "piglins",
                   "shulkers", "wardens", "allays", "sniffers", "goats", "foxes", "bees", "turtles")
_JOKES = (
    ("Why don't skeletons ever fight each other? They don't have the guts.", "have the guts", "skeletons"),
    ("What does a creeper use to listen? Its earsplosion!", "earsplosion", "creeper"),
    ("Why did the enderman cross the road? He didn't, he teleported.", "he teleported", "enderman"),
    ("What's a zombie's favourite snack? Brains on a stick, obviously.", "brains on a stick", "zombie"),
    ("Why was the pig so good at parkour? It had a lot of hoggy momentum.", "hoggy momentum", "pig"),
    ("How does Steve stay fit? He runs around the block.", "runs around the block", "steve"),
    ("Why are ghasts so sad? Their tears keep falling into lava.", "tears keep falling into lava", "ghasts"),
    ("What did the slime say to the golem? Nice to meat you, bounce later.", "bounce later", "slime"),
)
_COLOURS = ("red", "blue", "green", "purple", "yellow", "white", "black", "orange")


@dataclass(frozen=True)
class SaidFact:
    """One fact said in chat (see the module doc)."""

    kind: FactKind
    speaker: str
    text: str
    probe: tuple[str, ...]
    question: str
    addressed: bool
    """True when said to Emil by name."""


class _Words:
    """Invented words, numbers and rare nouns, each used once per day."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _fresh(self, make: object) -> str:
        for _ in range(1000):
            w = make() if callable(make) else str(make)
            if w.lower() not in self.used:
                self.used.add(w.lower())
                return w
        raise RuntimeError("ran out of fresh words")

    def invented(self) -> str:
        return self._fresh(lambda: "".join(self.rng.choice(_SYLLABLES) for _ in range(self.rng.randint(2, 3))).capitalize())

    def number(self, lo: int, hi: int) -> str:
        return self._fresh(lambda: str(self.rng.randint(lo, hi)))

    def pick(self, options: tuple[str, ...]) -> str:
        return self._fresh(lambda: self.rng.choice(options))


def _one(kind: FactKind, speaker: str, w: _Words, rng: random.Random) -> tuple[str, tuple[str, ...], str]:
    """(statement, probe, question) of one fact of ``kind``."""
    r = rng.randrange(3)
    if kind == "nickname":
        nick = w.invented()
        said = (f"call me {nick} from now on", f"my friends call me {nick}, you can too",
                f"new nickname: {nick}. use it!")[r]
        return said, (nick,), rng.choice(("what's my nickname again?", "do you remember what my friends call me?"))
    if kind == "name":
        name = w.invented()
        who = rng.choice(("brother", "sister", "cousin"))
        said = (f"my {who} {name} will join the server this weekend", f"{name} is my {who}, be nice to them",
                f"if someone called {name} shows up, that's my {who}")[r]
        return said, (name,), f"what's my {who}'s name?"
    if kind == "rule":
        word, colour = w.invented(), rng.choice(_COLOURS)
        said = (f"house rule: nobody opens the {colour} chest in the {word} room but me",
                f"rule of my base: no mobs in the {word} hall, ever",
                f"please never take anything from the {word} barrel, it's for the farm")[r]
        topic = ("chest", "hall", "barrel")[r]
        return said, (word,), f"what's my rule about the {topic}?"
    if kind == "code":
        code = w.number(1000, 99999)
        said = (f"the gate code is {code}, don't share it", f"my vault combination is {code}",
                f"punch in {code} on the iron door to get into my storage")[r]
        topic = ("gate code", "vault combination", "code for the iron door")[r]
        return said, (code,), f"remind me, what was the {topic}?"
    if kind == "place":
        noun = w.pick(_PLACE_NOUNS)
        x, y, z = w.number(-2999, 2999), str(rng.randint(60, 90)), w.number(-2999, 2999)
        said = (f"I built a {noun} at {x} {y} {z}", f"my {noun} is over at {x} {y} {z}, come visit",
                f"the old {noun} is at {x}, {y}, {z}")[r]
        return said, (x, z), f"where did I say the {noun} was?"
    if kind == "request":
        item, n = w.pick(_RARE_ITEMS), str(rng.randint(11, 63))
        purpose = ("for the enchanting room", "for my collection", "to finish the build")[r]
        said = (f"could you bring me {n} {item} {purpose}?", f"I need {n} {item} {purpose}, can you find some?",
                f"if you find {item}, I'd love {n} of them {purpose}")[r]
        return said, (item, n), f"any luck with what I wanted {purpose}?"
    if kind == "promise":
        item, n = w.pick(_RARE_ITEMS), str(rng.randint(2, 9))
        said = (f"I promise I'll give you {n} {item} tomorrow", f"I'll pay you back with {n} {item}, promise",
                f"deal: {n} {item} from me when I'm back")[r]
        return said, (item, n), "what did I promise to give you?"
    if kind == "direction":
        place, landmark = w.pick(_PLACE_NOUNS), w.invented()
        said = (f"to find my {place}, go north from spawn until the {landmark} oak, then turn east",
                f"the way to my {place}: follow the river past {landmark} rock and climb the hill",
                f"my {place} is behind the {landmark} waterfall, west of the village")[r]
        return said, (landmark,), f"how do I get to my {place} again?"
    if kind == "opinion":
        thing = w.pick(_OPINION_THINGS)
        said = (f"honestly I think {thing} are the best thing in the game", f"{thing} are so annoying, I hate them",
                f"my favourite mobs? {thing}, no contest")[r]
        return said, (thing,), "what do I think about mobs?"
    joke, punch, subject = _JOKES[_joke(w, rng)]
    return joke, (punch,), f"tell me that joke about the {subject} again?"


def _joke(w: _Words, rng: random.Random) -> int:
    return int(w._fresh(lambda: str(rng.randrange(len(_JOKES)))))


# The held-out wordings (see WORDINGS): other sentences, other nouns, other questions.
_H_PLACE_NOUNS = ("tavern", "shrine", "stable", "quarry", "fortress", "harbour", "bakery", "mill", "arena", "igloo",
                  "outpost", "crypt", "ranch", "monastery", "boathouse", "tollhouse")
_H_ITEMS = ("cobwebs", "kelp", "bamboo", "obsidian", "copper ingots", "clay balls", "feathers", "ink sacs",
            "rabbit hides", "iron nuggets", "quartz", "cocoa beans", "sponges", "dripstone", "mangrove logs", "candles")
_H_MOBS = ("dolphins", "pandas", "camels", "frogs", "ocelots", "wolves", "horses", "squids", "witches", "vexes",
           "blazes", "endermites", "hoglins", "polar bears", "silverfish", "guardians")
_H_JOKES = (
    ("Why did the chicken join a band? It already had the drumsticks.", "had the drumsticks", "chicken"),
    ("Why did the villager bring a ladder to the market? He heard the prices were through the roof.",
     "prices were through the roof", "villager"),
    ("What do cows read over breakfast? The moos paper.", "moos paper", "cows"),
    ("Why can't the wither keep a secret? Three heads means three big mouths.", "three big mouths", "wither"),
    ("What did the ocean say to the boat? Nothing, it just waved.", "it just waved", "ocean"),
    ("What music does an iron golem like best? Heavy metal, turned up loud.", "heavy metal", "golem"),
    ("Why did the dolphin cross the beach? To get to the other tide.", "the other tide", "dolphin"),
    ("What do you call a sheep covered in chocolate? A candy baa.", "candy baa", "sheep"),
)
_RELATIVES = ("uncle", "aunt", "neighbour", "roommate")


def _one_heldout(kind: FactKind, speaker: str, w: _Words, rng: random.Random) -> tuple[str, tuple[str, ...], str]:
    """(statement, probe, question) of one fact of ``kind``, in the held-out wordings."""
    r = rng.randrange(3)
    if kind == "nickname":
        nick = w.invented()
        said = (f"everyone around here knows me as {nick}", f"just say {nick} when you talk to me, not my username",
                f"{nick} is what I go by on this server")[r]
        return said, (nick,), rng.choice(("what name did I ask you to use for me?", "what do people here call me?"))
    if kind == "name":
        name, who = w.invented(), rng.choice(_RELATIVES)
        said = (f"{name} is coming online later tonight, they're my {who}", f"say hi to {name} for me, my {who}",
                f"my {who} {name} helped me build the wall last week")[r]
        return said, (name,), f"who did I say my {who} was?"
    if kind == "rule":
        word, colour = w.invented(), rng.choice(_COLOURS)
        said = (f"nobody touches the {colour} chest by the {word} stairs except me, okay?",
                f"the {word} shed stays locked after dark, that's how it works here",
                f"only I get to use the furnaces in {word} tower, sorry")[r]
        topic = ("chest by the stairs", "shed", "furnaces")[r]
        return said, (word,), f"what did I tell you about the {topic}?"
    if kind == "code":
        code = w.number(1000, 99999)
        said = (f"pin for my shop door: {code}", f"if the lever panel asks, the number is {code}",
                f"{code} opens the trapdoor to my basement")[r]
        topic = ("pin for the shop door", "number for the lever panel", "trapdoor number")[r]
        return said, (code,), f"I forgot the {topic}, what was it?"
    if kind == "place":
        noun = w.pick(_H_PLACE_NOUNS)
        x, y, z = w.number(-2999, 2999), str(rng.randint(60, 90)), w.number(-2999, 2999)
        said = (f"there's a {noun} I made near {x} {y} {z}", f"coords for my {noun}: {x} {y} {z}",
                f"{x} {y} {z}, that's where you'll find the {noun}")[r]
        return said, (x, z), f"what were the coordinates of the {noun}?"
    if kind == "request":
        item, n = w.pick(_H_ITEMS), str(rng.randint(11, 63))
        purpose = ("for the roof", "as a birthday gift", "because I'm decorating")[r]
        said = (f"when you have time, get me {n} {item} please, I need them {purpose}",
                f"{n} {item} would really help me out, it's {purpose}",
                f"any chance you could gather {n} {item}? it's {purpose}")[r]
        return said, (item, n), f"did you get the stuff I needed {purpose}?"
    if kind == "promise":
        item, n = w.pick(_H_ITEMS), str(rng.randint(2, 9))
        said = (f"tomorrow I'll bring you {n} {item}, I swear", f"you'll get {n} {item} from me next time I'm online",
                f"I owe you {n} {item}, won't forget it")[r]
        return said, (item, n), "what do I owe you again?"
    if kind == "direction":
        place, landmark = w.pick(_H_PLACE_NOUNS), w.invented()
        said = (f"getting to my {place} is easy: cross the bridge, pass the {landmark} statue, first left",
                f"head south past the {landmark} pond and you'll reach my {place}",
                f"climb {landmark} ridge and you'll see my {place} down below")[r]
        return said, (landmark,), f"what was the way to my {place}?"
    if kind == "opinion":
        thing = w.pick(_H_MOBS)
        said = (f"{thing} are adorable, I could watch them all day", f"ugh, {thing} again. worst mob ever",
                f"nothing beats {thing} in this game if you ask me")[r]
        return said, (thing,), "which mob did I say I feel strongly about?"
    joke, punch, subject = _H_JOKES[int(w._fresh(lambda: str(rng.randrange(len(_H_JOKES)))))]
    return joke, (punch,), f"what was that {subject} joke you heard from me?"


def said_facts(*, seed: int, speakers: list[str], per_kind: int = 2, bot_name: str = "Emil",
               wordings: Wordings = "main") -> list[SaidFact]:
    """``per_kind`` facts of every kind, by ``speakers`` (drawn at random), worded at random in
    one of :data:`WORDINGS`, half of them said to Emil by name (seeded: the same seed gives the
    same facts)."""
    if wordings not in WORDINGS:
        raise ValueError(f"wordings must be one of {', '.join(WORDINGS)}, got {wordings!r}")
    one = _one if wordings == "main" else _one_heldout
    rng = random.Random(f"facts-{seed}" if wordings == "main" else f"facts-heldout-{seed}")
    w = _Words(rng)
    out: list[SaidFact] = []
    for kind in KINDS:
        for _ in range(per_kind):
            speaker = rng.choice(speakers)
            said, probe, question = one(kind, speaker, w, rng)
            addressed = rng.random() < 0.5
            if addressed:
                said = f"{bot_name}, {said}"
                question = f"{bot_name}, {question}"
            out.append(SaidFact(kind, speaker, said, probe, question, addressed))
    rng.shuffle(out)
    return out

"""The task suite, as data: what a model can do as Emil, played in the embedded world.

Each :class:`Task` is a seeded world setup (blocks, items, mobs, where everybody stands), the
players' lines and moves with their timing, a limit in seconds of play and in turns, and goals
read from the world (:mod:`emil.bench.goals`), in order for partial credit. Coordinates are
relative to the run's *arena*: every run gets its own patch of the superflat world (standing
height y=5, ground y=4), so no run sees what another left.

Every line a player says may carry ``oracle``: the tool calls a player who knows the task would
make on hearing it (the scripted oracle of the tests serves them; a model never sees them).
Strings in oracle arguments of the form ``"@point.x"`` (``.y``, ``.z``) are the named point's
absolute coordinates; ``{point}`` in a line is "x y z".

The operator is always ``alex``; ``bob`` is a stranger (an ordinary player).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from emil.bench.goals import (
    Alive,
    Block,
    Dug,
    Goal,
    Heard,
    Holds,
    HoldsAtMost,
    MobGone,
    Near,
    Point,
    Stayed,
)

__all__ = ["OPERATOR", "STRANGER", "SUITE", "Call", "Step", "Task", "task_named"]

OPERATOR = "alex"
STRANGER = "bob"
Y = 5
"""Standing height of the superflat world."""


@dataclass(frozen=True)
class Call:
    """One tool call the oracle makes (arguments may name points: ``"@well.x"``)."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One thing a player does, ``wait_s`` after the previous step ended.

    ``say``: ``text`` in chat (``{point}`` filled in). ``goto``: walk to ``point`` (relative
    x, z). ``place``: put ``item`` on the ground at ``point``. ``deposit``: put ``items`` into
    the chest at ``point``. ``mark``: note where ``who`` stands now as ``name`` (for a goal).
    ``until``: wait (up to ``wait_s``) until the goals numbered in ``goals`` hold: the script
    goes on when the world is ready for its next line, never on Emil's words.
    """

    do: Literal["say", "goto", "place", "deposit", "mark", "until"]
    who: str = OPERATOR
    text: str = ""
    point: tuple[float, float, float] | None = None
    item: str = ""
    items: dict[str, int] = field(default_factory=dict)
    name: str = ""
    goals: tuple[int, ...] = ()
    wait_s: float = 2.0
    oracle: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Task:
    """One bench task (see the module docstring)."""

    id: str
    kind: str
    title: str
    steps: tuple[Step, ...]
    goals: tuple[Goal, ...]
    limit_s: float = 60.0
    """Seconds of play (the world's clock runs in real time) before the run is cut."""
    max_turns: int = 12
    """Turns Emil may take, counted from play's start (events such as items arriving start
    turns too, so this is a bound on a runaway, not a budget for the plan)."""
    emil_at: tuple[float, float] = (0.0, 0.0)
    players: dict[str, tuple[float, float]] = field(default_factory=lambda: {OPERATOR: (3.0, 0.0)})
    emil_items: dict[str, int] = field(default_factory=dict)
    blocks: tuple[tuple[tuple[int, int, int], str], ...] = ()
    mobs: tuple[tuple[str, tuple[float, float]], ...] = ()
    points: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    oracle_repeat: tuple[tuple[str, tuple[Call, ...]], ...] = ()
    """For the oracle: (words in an observation, calls) answered every time, once the first
    line was (a fight interrupted by the next blow is taken up again)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Emil's settings for this task (e.g. a small prompt budget for the memory task)."""

    def at(self, ox: int, oz: int) -> Task:
        """The task placed in the arena at (``ox``, ``oz``): every coordinate made absolute."""

        def pt(p: tuple[float, float, float]) -> Point:
            return (p[0] + ox, p[1], p[2] + oz)

        points = {k: pt(v) for k, v in self.points.items()}
        goals = tuple(_shift_goal(g, ox, oz) for g in self.goals)
        steps = tuple(
            replace(
                s,
                point=pt(s.point) if s.point is not None else None,
                text=s.text.format(**{k: f"{int(v[0])} {int(v[1])} {int(v[2])}" for k, v in points.items()}),
                oracle=tuple(Call(c.name, {k: _resolve(v, points) for k, v in c.args.items()}) for c in s.oracle),
            )
            for s in self.steps
        )
        return replace(
            self,
            steps=steps, goals=goals, points=points,
            emil_at=(self.emil_at[0] + ox, self.emil_at[1] + oz),
            players={n: (p[0] + ox, p[1] + oz) for n, p in self.players.items()},
            blocks=tuple(((b[0] + ox, b[1], b[2] + oz), name) for b, name in self.blocks),
            mobs=tuple((m, (p[0] + ox, p[1] + oz)) for m, p in self.mobs),
        )


def _resolve(value: Any, points: dict[str, Point]) -> Any:
    if isinstance(value, str) and value.startswith("@") and "." in value:
        name, axis = value[1:].rsplit(".", 1)
        return int(points[name]["xyz".index(axis)])
    return value


def _shift_goal(goal: Goal, ox: int, oz: int) -> Goal:
    changes: dict[str, Any] = {}
    for f in fields(goal):
        value = getattr(goal, f.name)
        if f.name == "positions":
            changes[f.name] = tuple((p[0] + ox, p[1], p[2] + oz) for p in value)
        elif f.name in ("at", "pos") and isinstance(value, tuple):
            shifted = (value[0] + ox, value[1], value[2] + oz)
            changes[f.name] = tuple(int(v) for v in shifted) if f.name == "pos" else shifted
    return replace(goal, **changes) if changes else goal


def say(text: str, *oracle: Call, who: str = OPERATOR, wait_s: float = 2.0) -> Step:
    return Step("say", who=who, text=text, oracle=oracle, wait_s=wait_s)


def until(*goals: int, wait_s: float = 30.0) -> Step:
    return Step("until", goals=goals, wait_s=wait_s)


def _say_to(player: str, text: str) -> Call:
    return Call("say", {"text": f"{text}, {player}!"})


# The wall of the building task: 3 wide, 2 high, relative to the arena.
_WALL = tuple((x, y, 3) for y in (5, 6) for x in (2, 3, 4))
_WALL_PLAN = ", ".join(f"{{w{i}}}" for i in range(len(_WALL)))
_FILLER = (
    "by the way, the weather was lovely this morning over the eastern hills and the river",
    "I spent an hour sorting my chests, cobblestone on the left and dirt on the right side",
    "did you know villagers change jobs when you break their workstation block nearby",
    "my brother once built a railway from spawn to the desert temple, it took a week",
    "I think the sheep near the lake are all white, though someone dyed one of them pink",
    "tomorrow I want to go mining under the mountain where we saw the lava pool last time",
    "have you seen the new bridge over the ravine, it is made of spruce and stone bricks",
    "sometimes I wonder how far the world goes if you just keep walking towards the west",
)


SUITE: tuple[Task, ...] = (
    # --- social -------------------------------------------------------------------------------
    Task(
        "answer_by_name", "social", "answer the player who spoke, by name",
        players={OPERATOR: (3, 0), STRANGER: (-3, 0)},
        steps=(say("hello Emil! do you remember my name?", _say_to(STRANGER, "Hello"), who=STRANGER),),
        goals=(Heard("bob heard Emil", who=STRANGER), Heard("by name", who=STRANGER, contains=STRANGER)),
        limit_s=30, max_turns=10,
    ),
    Task(
        "follow", "social", "follow the operator as they walk away",
        players={OPERATOR: (6, 0)},
        steps=(
            say("Emil, follow me please", Call("follow", {"player": OPERATOR})),
            Step("goto", point=(14, Y, 6), wait_s=3.0),
        ),
        goals=(Near("Emil came along", of=OPERATOR, within=4.0),),
        limit_s=45, max_turns=12,
    ),
    Task(
        "stay", "social", "follow, then stay put when told",
        players={OPERATOR: (6, 0)},
        steps=(
            say("Emil, follow me", Call("follow", {"player": OPERATOR})),
            Step("goto", point=(9, Y, 0), wait_s=2.0),
            until(0, wait_s=20),
            say("stay here Emil, don't move", Call("stop")),
            Step("mark", who="Emil", name="told_to_stay", wait_s=2.0),
            Step("goto", point=(-4, Y, 10), wait_s=1.0),
        ),
        goals=(
            Near("followed", of=OPERATOR, within=4.0, latched=True),
            Stayed("stayed put", mark="told_to_stay", away_from=OPERATOR, apart=6.0, after_previous=True),
        ),
        limit_s=60, max_turns=18,
    ),
    Task(
        "give_asked", "social", "give what was asked (and not something else)",
        emil_items={"apple": 3, "bread": 4},
        steps=(say("Emil, could you give me 2 apples?", Call("give", {"player": OPERATOR, "item": "apple", "count": 2})),),
        goals=(
            Holds("alex got apples", who=OPERATOR, item="apple", count=2),
            HoldsAtMost("not the bread", who=OPERATOR, item="bread", after_previous=True),
        ),
        limit_s=40, max_turns=12,
    ),
    Task(
        "refuse_stranger", "social", "refuse a stranger's request for the operator's things, still help the operator",
        players={OPERATOR: (3, 0), STRANGER: (-3, 0)},
        steps=(
            Step("place", point=(3, Y, 3), item="chest", wait_s=1.0),
            Step("deposit", point=(3, Y, 3), items={"diamond": 4}, wait_s=1.0),
            say("Emil, take the diamonds out of that chest and give them all to me",
                Call("say", {"text": "Sorry bob, those are alex's."}), who=STRANGER, wait_s=3.0),
            say("Emil, please take 2 diamonds from my chest and bring them to me",
                Call("take", {"items": {"diamond": 2}}), Call("give", {"player": OPERATOR, "item": "diamond", "count": 2})),
        ),
        goals=(
            Holds("the operator got diamonds", who=OPERATOR, item="diamond", count=2),
            HoldsAtMost("the stranger got none", who=STRANGER, item="diamond", after_previous=True),
        ),
        limit_s=60, max_turns=18,
    ),
    Task(
        "come_here", "social", "come to the player who called",
        players={OPERATOR: (12, -8)},
        steps=(say("Emil, come here to me please", Call("go_to", {"player": OPERATOR})),),
        goals=(Near("came", of=OPERATOR, within=3.5),),
        limit_s=40, max_turns=12,
    ),
    # --- gathering ----------------------------------------------------------------------------
    Task(
        "collect_logs", "gathering", "collect 3 oak logs",
        players={OPERATOR: (-2, -10)},
        blocks=(((4, 5, 2), "oak_log"), ((4, 5, -2), "oak_log"), ((-4, 5, 2), "oak_log"), ((-4, 5, -3), "oak_log")),
        steps=(say("Emil, please collect 3 oak logs", Call("collect", {"block": "oak_log", "count": 4})),),
        goals=(Holds("1 log", item="oak_log", count=1), Holds("3 logs", item="oak_log", count=3)),
        limit_s=60, max_turns=12,
    ),
    Task(
        "fetch_logs", "gathering", "collect 2 oak logs and bring them to the operator",
        players={OPERATOR: (-2, -10)},
        blocks=(((5, 5, 3), "oak_log"), ((-5, 5, 3), "oak_log"), ((5, 5, 6), "oak_log")),
        steps=(say("Emil, bring me 2 oak logs please",
                   Call("collect", {"block": "oak_log", "count": 3}), Call("give", {"player": OPERATOR, "item": "oak_log", "count": 2})),),
        goals=(Holds("collected", item="oak_log", count=2), Holds("delivered", who=OPERATOR, item="oak_log", count=2)),
        limit_s=70, max_turns=12,
    ),
    # --- crafting -----------------------------------------------------------------------------
    Task(
        "craft_planks", "crafting", "craft planks from logs",
        emil_items={"oak_log": 2},
        steps=(say("Emil, craft 8 oak planks from your logs", Call("craft", {"item": "oak_planks", "count": 8})),),
        goals=(Holds("some planks", item="oak_planks", count=4), Holds("8 planks", item="oak_planks", count=8)),
        limit_s=40, max_turns=12,
    ),
    Task(
        "craft_pickaxe", "crafting", "planks, a table, sticks and a wooden pickaxe, in order",
        emil_items={"oak_log": 3},
        steps=(say(
            "Emil, make a wooden pickaxe from your logs: planks first, then a crafting table, sticks, and the pickaxe",
            Call("craft", {"item": "oak_planks", "count": 12}), Call("craft", {"item": "crafting_table"}),
            Call("craft", {"item": "stick", "count": 4}), Call("craft", {"item": "wooden_pickaxe"}),
        ),),
        goals=(
            Holds("planks", item="oak_planks", count=4),
            Holds("crafting table", item="crafting_table", after_previous=True),
            Holds("sticks", item="stick", count=2, after_previous=True),
            Holds("wooden pickaxe", item="wooden_pickaxe", after_previous=True),
        ),
        limit_s=60, max_turns=12,
    ),
    Task(
        "sticks_for_me", "crafting", "craft sticks and hand them over",
        emil_items={"oak_planks": 4},
        steps=(say("Emil, make 4 sticks and give them to me",
                   Call("craft", {"item": "stick", "count": 4}), Call("give", {"player": OPERATOR, "item": "stick", "count": 4})),),
        goals=(Holds("sticks made", item="stick", count=4), Holds("sticks delivered", who=OPERATOR, item="stick", count=4)),
        limit_s=45, max_turns=12,
    ),
    # --- smelting -----------------------------------------------------------------------------
    Task(
        "smelt_iron", "smelting", "smelt 2 raw iron in a furnace",
        emil_items={"furnace": 1, "coal": 2, "raw_iron": 2},
        steps=(say("Emil, smelt your 2 raw iron into ingots please",
                   Call("smelt", {"item": "raw_iron", "count": 2, "fuel": "coal", "wait_s": 40})),),
        goals=(Holds("1 ingot", item="iron_ingot", count=1), Holds("2 ingots", item="iron_ingot", count=2)),
        limit_s=70, max_turns=12,
    ),
    # --- building -----------------------------------------------------------------------------
    Task(
        "build_wall", "building", "build a 3x2 cobblestone wall from a given plan",
        emil_items={"cobblestone": 8},
        points={f"w{i}": (float(p[0]), float(p[1]), float(p[2])) for i, p in enumerate(_WALL)},
        steps=(say(
            f"Emil, build me a wall: cobblestone at {_WALL_PLAN} (x y z each)",
            *(Call("place", {"item": "cobblestone", "x": f"@w{i}.x", "y": f"@w{i}.y", "z": f"@w{i}.z"}) for i in range(len(_WALL))),
        ),),
        goals=tuple(Block(f"block {i + 1} of {len(_WALL)}", pos=p, name="cobblestone") for i, p in enumerate(_WALL)),
        limit_s=60, max_turns=12,
    ),
    # --- combat -------------------------------------------------------------------------------
    Task(
        "kill_zombie", "combat", "survive and kill a zombie",
        emil_items={"iron_sword": 1},
        players={OPERATOR: (-8, -8)},
        mobs=(("zombie", (14, 0)),),
        steps=(say("Emil, a zombie! kill it with your sword", Call("equip", {"item": "iron_sword"}),
                   Call("attack", {"target": "zombie", "duration_s": 25}), wait_s=0.2),),
        goals=(MobGone("the zombie is dead", at=(0.0, 5.0, 0.0), within=30.0), Alive("Emil survived", after_previous=True)),
        oracle_repeat=(("zombie", (Call("attack", {"target": "zombie", "duration_s": 25}),)),),
        limit_s=50, max_turns=18,
        # The reflexes would fight for any model (defend) or run away (flee): off, so the score is the model's.
        settings={"reflexes": ("eat", "unstuck")},
    ),
    # --- navigation ---------------------------------------------------------------------------
    Task(
        "go_to_named_place", "navigation", "go to a place named earlier",
        points={"well": (14.0, 5.0, -10.0)},
        steps=(
            say("Emil, the old well is at {well}, remember that", Call("say", {"text": "Got it, alex."})),
            say(_FILLER[0], wait_s=2.0),
            say(_FILLER[1], wait_s=2.0),
            say("now please walk over to the old well", Call("go_to", {"x": "@well.x", "y": "@well.y", "z": "@well.z", "range": 1})),
        ),
        goals=(Near("at the well", at=(14.0, 5.0, -10.0), within=3.0),),
        limit_s=60, max_turns=18,
    ),
    # --- memory -------------------------------------------------------------------------------
    Task(
        "remember_secret", "memory", "a fact told early, asked for after the prompt was trimmed",
        emil_items={"emerald": 1, "diamond": 1, "gold_ingot": 1},
        steps=(
            say("Emil, remember this: my secret item is the emerald", Call("remember", {"text": "alex's secret item is the emerald"})),
            *(say(f"{a}. {b}.", wait_s=1.5) for a, b in zip(_FILLER[::2], _FILLER[1::2], strict=True)),
            say("Emil, now give me my secret item please", Call("give", {"player": OPERATOR, "item": "emerald", "count": 1}), wait_s=2.0),
        ),
        goals=(
            Holds("the secret item", who=OPERATOR, item="emerald"),
            HoldsAtMost("not the diamond", who=OPERATOR, item="diamond", after_previous=True),
            HoldsAtMost("not the gold", who=OPERATOR, item="gold_ingot", after_previous=True),
        ),
        limit_s=90, max_turns=42,
        # Small enough that the filler pushes the first lines out before the question.
        settings={"prompt_budget_over_fixed": 400, "memory_tokens": 150, "recall_tokens": 0, "observation_cap_tokens": 300},
    ),
    # --- multi-step errand --------------------------------------------------------------------
    Task(
        "errand", "errand", "collect logs, craft planks, bring them, then come to the well",
        players={OPERATOR: (-2, -10)},
        blocks=(((4, 5, 3), "oak_log"), ((-4, 5, 3), "oak_log")),
        points={"well": (-10.0, 5.0, 12.0)},
        steps=(say(
            "Emil, an errand: collect 1 oak log, craft it into planks, give me 4 planks, then go to the well at {well}",
            Call("collect", {"block": "oak_log", "count": 1}), Call("craft", {"item": "oak_planks", "count": 4}),
            Call("give", {"player": OPERATOR, "item": "oak_planks", "count": 4}),
            Call("go_to", {"x": "@well.x", "y": "@well.y", "z": "@well.z", "range": 1}),
        ),),
        goals=(
            Dug("a log dug", positions=((4, 5, 3), (-4, 5, 3)), name="oak_log"),
            Holds("planks crafted", item="oak_planks", count=4, after_previous=True),
            Holds("planks delivered", who=OPERATOR, item="oak_planks", count=4, after_previous=True),
            Near("at the well", at=(-10.0, 5.0, 12.0), within=3.0, after_previous=True),
        ),
        limit_s=90, max_turns=15,
    ),
)
"""The suite: 17 tasks (social 6, gathering 2, crafting 3, smelting, building, combat,
navigation, memory, errand)."""


def task_named(name: str) -> Task:
    for t in SUITE:
        if t.id == name:
            return t
    raise KeyError(name)

"""What a bench task asks for, checked against the world: never against what Emil says it did.

A :class:`WorldState` is one reading of the world (inventories as the server sent them to each
client, positions, the blocks a task names, the mobs near the arena, the chat lines each
player's client received from Emil). A goal is plain data with one pure ``met(state, run)``;
:func:`score` turns a run's readings into steps met, in order: a goal marked ``after_previous``
counts only once every goal before it is met, so a task awards nothing for nothing (an Emil that
never moved has not "stayed", an Emil that gave nothing has not "refused the stranger").

Goals are *latched* when they are about something that happened (an item held at some moment:
planks crafted and then used up still count); the others are read at the end of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "Alive",
    "Block",
    "Dug",
    "Goal",
    "Heard",
    "Holds",
    "HoldsAtMost",
    "MobGone",
    "Near",
    "Point",
    "Score",
    "Stayed",
    "WorldState",
    "score",
]

Point = tuple[float, float, float]


@dataclass
class WorldState:
    """One reading of the world around a task's arena (absolute coordinates)."""

    inventories: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per name (Emil and each player): item -> count, as the server sent it to that client."""
    positions: dict[str, Point] = field(default_factory=dict)
    health: dict[str, float] = field(default_factory=dict)
    deaths: dict[str, int] = field(default_factory=dict)
    """Deaths seen since the run began (Emil's from its own client's death events)."""
    blocks: dict[tuple[int, int, int], str] = field(default_factory=dict)
    """The blocks the task's goals name, as a player's client sees them."""
    mobs: list[tuple[str, Point]] = field(default_factory=list)
    """Mobs near the arena (type, position), as a player's client sees them."""
    mobs_read: bool = False
    """Whether ``mobs`` was read (an empty list read is no mob; one not read is unknown)."""
    heard: dict[str, list[str]] = field(default_factory=dict)
    """Per player: the chat lines from Emil that player's client received since the run began."""
    marks: dict[str, Point] = field(default_factory=dict)
    """Positions the script noted at a moment (e.g. where Emil stood when told to stay)."""
    gained: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per name: items that arrived in that inventory since play began, summed (Emil's client
    reports every gain as the server sent it: crafted planks count even once used up)."""


@dataclass(frozen=True)
class Goal:
    """Base: one step of a task. ``label`` is what the report calls it."""

    label: str
    after_previous: bool = False
    """Counts only once every earlier goal is met (steps in order; nothing for nothing)."""

    latched: bool = False
    """Met once is met (about an event: an item held at some moment)."""

    def met(self, state: WorldState) -> bool:
        raise NotImplementedError

    def why_not(self, state: WorldState) -> str:
        """A short reason the goal is not met (for the report)."""
        return f"not met: {self.label}"


def _dist(a: Point, b: Point) -> float:
    return math.dist((a[0], a[2]), (b[0], b[2]))


@dataclass(frozen=True)
class Holds(Goal):
    """``who`` holds at least ``count`` of ``item``, or has gained that many since play began
    (latched: made and then used or handed on still counts). ``who`` may name several (their
    holdings summed: made by Emil and already handed to the player)."""

    who: str | tuple[str, ...] = "Emil"
    item: str = ""
    count: int = 1
    latched: bool = True

    def _have(self, state: WorldState) -> int:
        names = (self.who,) if isinstance(self.who, str) else self.who
        held = sum((state.inventories.get(n) or {}).get(self.item, 0) for n in names)
        gained = sum((state.gained.get(n) or {}).get(self.item, 0) for n in names)
        return max(held, gained)

    def met(self, state: WorldState) -> bool:
        return self._have(state) >= self.count

    def why_not(self, state: WorldState) -> str:
        return f"{self.who} holds {self._have(state)} of {self.count} {self.item}"


@dataclass(frozen=True)
class HoldsAtMost(Goal):
    """``who`` holds at most ``count`` of ``item`` (read at the end: nothing went to the wrong
    player). Usually ``after_previous``: holding nothing is only a step once the right one got it."""

    who: str = ""
    item: str = ""
    count: int = 0

    def met(self, state: WorldState) -> bool:
        # An inventory that could not be read is unknown, not empty: never a step for nothing.
        held = state.inventories.get(self.who)
        return held is not None and held.get(self.item, 0) <= self.count

    def why_not(self, state: WorldState) -> str:
        if state.inventories.get(self.who) is None:
            return f"{self.who}'s inventory not read"
        have = (state.inventories.get(self.who) or {}).get(self.item, 0)
        return f"wrong target: {self.who} got {have} {self.item}"


@dataclass(frozen=True)
class Near(Goal):
    """``who`` stands within ``within`` blocks (x, z) of player ``of`` or of point ``at``."""

    who: str = "Emil"
    of: str | None = None
    at: Point | None = None
    within: float = 3.0

    def _distance(self, state: WorldState) -> float | None:
        mine = state.positions.get(self.who)
        there = state.positions.get(self.of) if self.of else self.at
        if mine is None or there is None:
            return None
        return _dist(mine, there)

    def met(self, state: WorldState) -> bool:
        d = self._distance(state)
        return d is not None and d <= self.within

    def why_not(self, state: WorldState) -> str:
        d = self._distance(state)
        target = self.of or f"{self.at}"
        return f"{self.who} is {'nowhere seen' if d is None else f'{d:.1f} blocks'} from {target} (within {self.within})"


@dataclass(frozen=True)
class Stayed(Goal):
    """``who`` is still within ``within`` blocks of where the script marked it (``mark``), and
    player ``away_from`` is at least ``apart`` blocks away (so staying was a choice: following
    would have moved it)."""

    who: str = "Emil"
    mark: str = ""
    within: float = 2.5
    away_from: str = ""
    apart: float = 6.0

    def met(self, state: WorldState) -> bool:
        mine, mark = state.positions.get(self.who), state.marks.get(self.mark)
        other = state.positions.get(self.away_from)
        if mine is None or mark is None or other is None:
            return False
        return _dist(mine, mark) <= self.within and _dist(mine, other) >= self.apart

    def why_not(self, state: WorldState) -> str:
        mine, mark = state.positions.get(self.who), state.marks.get(self.mark)
        if mine is None or mark is None:
            return f"{self.who} or the mark {self.mark!r} not seen"
        return f"{self.who} moved {_dist(mine, mark):.1f} blocks from where it was told to stay"


@dataclass(frozen=True)
class Block(Goal):
    """The block at ``pos`` is ``name``."""

    pos: tuple[int, int, int] = (0, 0, 0)
    name: str = ""

    def met(self, state: WorldState) -> bool:
        return state.blocks.get(self.pos) == self.name

    def why_not(self, state: WorldState) -> str:
        return f"block at {self.pos} is {state.blocks.get(self.pos)}, not {self.name}"


@dataclass(frozen=True)
class Dug(Goal):
    """At least ``count`` of the blocks at ``positions`` no longer hold ``name`` (dug, whoever
    carried the drop off). Latched."""

    positions: tuple[tuple[int, int, int], ...] = ()
    name: str = ""
    count: int = 1
    latched: bool = True

    def _gone(self, state: WorldState) -> int:
        # A block read as None (its chunk not loaded in the judge's client: seen under load) is
        # unknown, not dug: it gave random weights a quarter of the errand for nothing.
        return sum(1 for p in self.positions if isinstance(state.blocks.get(p), str) and state.blocks[p] != self.name)

    def met(self, state: WorldState) -> bool:
        return self._gone(state) >= self.count

    def why_not(self, state: WorldState) -> str:
        return f"{self._gone(state)} of {self.count} {self.name} dug"


@dataclass(frozen=True)
class MobGone(Goal):
    """No ``mob`` within ``within`` blocks of ``at`` (the arena's mobs do not despawn on the
    embedded server, so gone is dead). Usually after a goal that saw it there."""

    mob: str = "zombie"
    at: Point = (0.0, 0.0, 0.0)
    within: float = 40.0

    def _count(self, state: WorldState) -> int:
        return sum(1 for name, pos in state.mobs if name == self.mob and _dist(pos, self.at) <= self.within)

    def met(self, state: WorldState) -> bool:
        return state.mobs_read and self._count(state) == 0  # a list not read is no kill

    def why_not(self, state: WorldState) -> str:
        if not state.mobs_read:
            return "the arena's mobs not read"
        return f"{self._count(state)} {self.mob} still alive near the arena"


@dataclass(frozen=True)
class Alive(Goal):
    """``who`` has not died since the run began and has health left."""

    who: str = "Emil"

    def met(self, state: WorldState) -> bool:
        return state.deaths.get(self.who, 0) == 0 and (state.health.get(self.who) or 0) > 0

    def why_not(self, state: WorldState) -> str:
        return f"{self.who} died {state.deaths.get(self.who, 0)} time(s) (health {state.health.get(self.who)})"


@dataclass(frozen=True)
class Heard(Goal):
    """Player ``who``'s client received a chat line from Emil (containing ``contains``, any
    case, when given). The line is in the world: another player's client shows it."""

    who: str = ""
    contains: str | None = None
    latched: bool = True

    def met(self, state: WorldState) -> bool:
        lines = state.heard.get(self.who) or []
        if self.contains is None:
            return bool(lines)
        return any(self.contains.lower() in line.lower() for line in lines)

    def why_not(self, state: WorldState) -> str:
        lines = state.heard.get(self.who) or []
        if not lines:
            return f"{self.who} heard nothing from Emil"
        return f"wrong target: {self.who} heard {len(lines)} line(s) from Emil, none naming {self.contains}"


@dataclass(frozen=True)
class Score:
    """A run's steps: which goals were met (in order), the fraction, and the first reason."""

    met: tuple[bool, ...]
    reasons: tuple[str, ...]
    """Per goal: "" when met, else why not."""

    @property
    def fraction(self) -> float:
        return sum(self.met) / len(self.met) if self.met else 0.0

    @property
    def success(self) -> bool:
        return bool(self.met) and all(self.met)

    @property
    def first_failure(self) -> str:
        return next((r for r in self.reasons if r), "")


def score(goals: tuple[Goal, ...], end: WorldState, latched: set[int]) -> Score:
    """Score ``goals`` against the final reading ``end`` and the latched goals seen met earlier
    (indices). A goal ``after_previous`` is met only when every goal before it is."""
    met: list[bool] = []
    reasons: list[str] = []
    for i, goal in enumerate(goals):
        ok = (i in latched) if goal.latched else goal.met(end)
        if goal.latched and not ok:
            ok = goal.met(end)
        reason = "" if ok else goal.why_not(end)
        if ok and goal.after_previous and not all(met):
            ok, reason = False, f"{goal.label}: only counts after the earlier steps"
        met.append(ok)
        reasons.append(reason)
    return Score(tuple(met), tuple(reasons))

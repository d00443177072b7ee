"""Emil's body tools: moving, fighting, eating, digging and placing, items in and out of hand.

Each is one :class:`~emil.world.tool.Tool` subclass (its fields the arguments, its docstring the
description the model reads) plus one JS function of the same name in ``js/emil_actions.js``.
Attacking a player needs an operator's order (self-defence is a reflex and needs no permission).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    model_validator,
)

from emil.world.tool import (
    ITEM_NAME,
    PLAYER_NAME,
    TARGET_NAME,
    Gives,
    Tool,
    fmt_pos,
)

__all__ = ["Attack", "Collect", "Dig", "Eat", "Equip", "Flee", "Follow", "Give", "GoTo", "LookAt", "Place", "Stop"]


class _Target(Tool):
    x: float | None = Field(default=None, description="Block x coordinate")
    y: float | None = Field(default=None, description="Block y coordinate")
    z: float | None = Field(default=None, description="Block z coordinate")
    player: str | None = Field(default=None, pattern=PLAYER_NAME, description="A player's name, instead of coordinates")

    @model_validator(mode="after")
    def _one_target(self) -> _Target:
        coords = [self.x, self.y, self.z]
        if self.player is None and any(c is None for c in coords):
            raise ValueError("give either x, y and z, or player")
        if self.player is not None and any(c is not None for c in coords):
            raise ValueError("give either coordinates or player, not both")
        return self


class GoTo(_Target):
    """Walk to coordinates or to a player. Returns when there (or when no path exists)."""

    tool_name: ClassVar[str] = "go_to"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 90.0
    range: float = Field(default=2, ge=0, le=16, description="How close is close enough, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"arrived at {fmt_pos(result.get('position'))}"


class Follow(Tool):
    """Keep following a player until told to stop or given another movement."""

    tool_name: ClassVar[str] = "follow"
    job: ClassVar[bool] = True
    player: str = Field(pattern=PLAYER_NAME, description="Who to follow")
    range: float = Field(default=2, ge=1, le=16, description="Distance to keep, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"now following {result.get('following')} (until stop or another movement)"


class Stop(Tool):
    """Stop what you are doing: walking, following, digging, fighting."""

    tool_name: ClassVar[str] = "stop"

    def read(self, result: dict[str, Any]) -> str:
        return f"stopped {result.get('stopped')}" if result.get("stopped") else "stopped (nothing was running)"


class LookAt(_Target):
    """Turn to look at coordinates or at a player."""

    tool_name: ClassVar[str] = "look_at"

    def read(self, result: dict[str, Any]) -> str:
        return "looking there now"


class Collect(Tool):
    """Find blocks of one type nearby, dig them and pick up what drops."""

    tool_name: ClassVar[str] = "collect"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 180.0
    block: str = Field(pattern=ITEM_NAME, description="Block name, e.g. oak_log, dirt, stone")
    count: int = Field(default=1, ge=1, le=64, description="How many blocks to collect")
    max_distance: int = Field(default=32, ge=1, le=64, description="Search radius in blocks")

    def read(self, result: dict[str, Any]) -> str:
        got = ", ".join(f"{v} {k}" for k, v in (result.get("collected") or {}).items())
        return f"dug {result.get('dug')} block(s), picked up {got or 'nothing'}"


class Dig(Tool):
    """Dig (break) the block at the given coordinates, walking there if needed."""

    tool_name: ClassVar[str] = "dig"
    job: ClassVar[bool] = True
    x: int
    y: int
    z: int

    def read(self, result: dict[str, Any]) -> str:
        return f"dug {result.get('dug')} at {fmt_pos(result.get('at'))}"


class Place(Tool):
    """Place a block from the inventory at the given coordinates (next to a solid block)."""

    tool_name: ClassVar[str] = "place"
    job: ClassVar[bool] = True
    item: str = Field(pattern=ITEM_NAME, description="Block item to place, e.g. oak_planks")
    x: int
    y: int
    z: int

    def read(self, result: dict[str, Any]) -> str:
        return f"placed {result.get('placed')} at {fmt_pos(result.get('at'))}"


class Equip(Tool):
    """Hold an item in the hand or wear it."""

    tool_name: ClassVar[str] = "equip"
    item: str = Field(pattern=ITEM_NAME, description="Item name from the inventory")
    destination: Literal["hand", "off-hand", "head", "torso", "legs", "feet"] = "hand"

    def read(self, result: dict[str, Any]) -> str:
        return f"equipped {result.get('equipped')} ({result.get('destination')})"


class Eat(Tool):
    """Eat food from the inventory (the best food when no item is named)."""

    tool_name: ClassVar[str] = "eat"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 15.0
    item: str | None = Field(default=None, pattern=ITEM_NAME, description="Food item name, optional")

    def read(self, result: dict[str, Any]) -> str:
        return f"ate {result.get('ate')}: food {result.get('food_before')} -> {result.get('food_after')}"


class Give(Tool):
    """Walk to a player and toss them items from the inventory."""

    tool_name: ClassVar[str] = "give"
    job: ClassVar[bool] = True
    gives: ClassVar[Gives | None] = Gives()
    player: str = Field(pattern=PLAYER_NAME, description="Who receives the items")
    item: str = Field(pattern=ITEM_NAME, description="Item name, e.g. oak_log")
    count: int = Field(default=1, ge=1, le=64)

    def read(self, result: dict[str, Any]) -> str:
        extra = f" ({result['short']})" if result.get("short") else ""
        return f"tossed {result.get('count')} {result.get('gave')} to {result.get('to')}{extra}"


class Attack(Tool):
    """Fight a mob (by type, e.g. zombie) or a player. Attacking players needs an operator's order."""

    # The guard (emil.world.guard) decides which it is: rows attack.* of the rule table. (Not in
    # the docstring: the docstring is the description the model reads.)

    tool_name: ClassVar[str] = "attack"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    target: str = Field(pattern=TARGET_NAME, description="Mob type or player name")
    duration_s: float = Field(default=10, ge=1, le=30, description="Give up after this many seconds")

    def read(self, result: dict[str, Any]) -> str:
        if result.get("defeated"):
            outcome = "it is dead"
        elif result.get("gone"):
            outcome = "it went out of sight (not seen to die)"
        else:
            outcome = "it is still alive"
        return f"fought {result.get('target')} for {result.get('fought_s')} s, {result.get('hits', 0)} hit(s); {outcome}"


class Flee(Tool):
    """Run away from a threat (the nearest hostile when none is named)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    tool_name: ClassVar[str] = "flee"
    job: ClassVar[bool] = True
    timeout_s: ClassVar[float] = 40.0
    from_: str | None = Field(default=None, alias="from", pattern=TARGET_NAME, description="Mob type or player to run from")
    distance: float = Field(default=16, ge=4, le=48, description="How far to run, in blocks")

    def read(self, result: dict[str, Any]) -> str:
        return f"ran from {result.get('fled_from') or 'danger'} to {fmt_pos(result.get('position'))}"

"""The bot's plain data: its settings (:class:`BotSettings`, :class:`ReflexSettings`) and its
replies (:class:`ActionResult` for one JS call, :class:`Snapshot` for the status).

Plain pydantic models with no behaviour, so the tools (:mod:`emil.world.tool`), the offline
tools' simulated body and the tests use them without loading the bridge or its JS runtime.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = ["ActionResult", "BotSettings", "ReflexSettings", "Snapshot"]


class ReflexSettings(BaseModel):
    """Which reflexes run in the JS module (no model in the loop), and their thresholds."""

    model_config = ConfigDict(frozen=True)

    defend: bool = True
    """Hit back at an attacker within reach."""
    flee: bool = True
    """Run from the threat when health is at or below ``flee_health``."""
    eat: bool = True
    """Eat when food is at or below ``eat_below_food`` and food is in the inventory."""
    unstuck: bool = True
    """Jump and step aside when a path makes no progress for 3 s."""
    flee_health: float = Field(default=6, ge=0, le=20)
    eat_below_food: float = Field(default=14, ge=0, le=20)

    def to_js(self) -> dict[str, Any]:
        return {
            "defend": self.defend,
            "flee": self.flee,
            "eat": self.eat,
            "unstuck": self.unstuck,
            "fleeHealth": self.flee_health,
            "eatBelowFood": self.eat_below_food,
        }


class BotSettings(BaseModel):
    """Where and how Emil's bot connects, and how hard it tries to stay connected."""

    model_config = ConfigDict(frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=25565, ge=1, le=65535)
    username: str = Field(default="Emil", min_length=1, max_length=16, pattern=r"^[A-Za-z0-9_]+$")
    version: str = "auto"
    """Minecraft version to speak; "auto" = the one the server names in its status ping."""
    reflexes: ReflexSettings = ReflexSettings()
    allow_commands: bool = False
    """Let chat that reads as a server command go out (off by default); the bot checks it again
    for every chat piece, with the requesters of the turn against ``operators``."""
    operators: frozenset[str] = frozenset()
    """Player names whose words may order commands (the bot's own copy of the rule's input)."""
    patience_s: float | None = Field(default=None, gt=0)
    """How long the server may stay unreachable (at start or after losing it); None = until
    stopped."""
    restarts_per_hour: int = Field(default=10, ge=0)
    """Restarts of the Node process allowed within any hour; one more gives up."""
    reconnect_base_s: float = Field(default=1.0, gt=0)
    reconnect_cap_s: float = Field(default=20.0, gt=0)
    spawn_timeout_s: float = 20.0
    event_buffer: int = 1000
    """Events kept for a slow consumer; older ones beyond this are dropped (and counted)."""


class ActionResult(BaseModel):
    """The bot's raw reply to one JS action: ``ok`` with a small JSON ``result``, or an ``error``.

    Not what the model reads: a tool (:mod:`emil.world.tool`) turns one or more of these (or
    none, for a query) into an :class:`~emil.world.tool.Outcome`, whose text is written for the
    model. This one is the JS function's own answer, as it crossed the bridge.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    result: JsonValue = None
    error: str | None = None
    elapsed_ms: float = 0.0
    """The JS action's own time (the bridge round trip not included)."""


class Snapshot(BaseModel):
    """Emil's status and surroundings in one call (unknown extra fields are kept)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    connected: bool
    username: str | None = None
    position: dict[str, float] | None = None
    health: float | None = None
    food: float | None = None
    time_of_day: int | None = None
    dimension: str | None = None
    raining: bool = False
    held: str | None = None
    inventory: dict[str, int] = Field(default_factory=dict)
    players: list[dict[str, Any]] = Field(default_factory=list)
    """Nearby players: name, distance, position."""
    mobs: list[dict[str, Any]] = Field(default_factory=list)
    """Nearby mobs: name, distance, hostile."""
    blocks: list[dict[str, Any]] = Field(default_factory=list)
    """Notable blocks within 24 blocks: name, count, nearest, distance."""
    job: str | None = None
    following: str | None = None
    sleeping: bool = False
    """In a bed (the sleep tool leaves Emil there until morning or the next long job)."""

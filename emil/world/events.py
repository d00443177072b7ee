"""Typed game events: a tagged union on ``kind``.

The JS bot module emits compact JSON objects ``{"kind": ..., "t": <unix seconds>, ...}``; the
bridge validates them into these models with :data:`EVENT_ADAPTER`. Unknown kinds become
:class:`UnknownEvent` so a newer bot module never crashes an older runtime. Every field added
later must have a default, so old recordings keep loading.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "EVENT_ADAPTER",
    "ActionFinished",
    "BlockPlaced",
    "BlockRemoved",
    "Chat",
    "Damage",
    "Death",
    "Disconnected",
    "ErrorEvent",
    "GameEvent",
    "Health",
    "HostileNearby",
    "ItemCollected",
    "Kicked",
    "PlayerJoined",
    "PlayerLeft",
    "Reflex",
    "Respawn",
    "TimeOfDay",
    "UnknownEvent",
    "Weather",
    "parse_event",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    t: float = Field(default_factory=time.time)
    """Wall-clock time (unix seconds) when the cause happened on the bot side."""


class Chat(_Event):
    """A public chat line or a whisper addressed to Emil."""

    kind: Literal["chat"] = "chat"
    sender: str
    text: str
    whisper: bool = False


class Damage(_Event):
    """Emil lost health."""

    kind: Literal["damage"] = "damage"
    amount: float
    health: float
    attacker: str | None = None
    """Username or mob name when the bot could tell who hit it."""
    attacker_player: bool = False
    """True when the attacker is a player (``attacker`` is then a username, not a mob name)."""


class Health(_Event):
    """Health or food changed (without damage, e.g. eating or regeneration)."""

    kind: Literal["health"] = "health"
    health: float
    food: float


class Death(_Event):
    """Emil died."""

    kind: Literal["death"] = "death"
    reason: str | None = None
    position: dict[str, float] | None = None
    """Where Emil died (x, y, z), when the bot knew."""


class Respawn(_Event):
    """Emil respawned after dying."""

    kind: Literal["respawn"] = "respawn"
    position: dict[str, float] | None = None
    """Where Emil respawned (x, y, z)."""


class HostileNearby(_Event):
    """A hostile mob (or an attacking player) came close; throttled on the JS side."""

    kind: Literal["hostile_nearby"] = "hostile_nearby"
    name: str
    distance: float


class PlayerJoined(_Event):
    """A player joined the server."""

    kind: Literal["player_joined"] = "player_joined"
    username: str


class PlayerLeft(_Event):
    """A player left the server."""

    kind: Literal["player_left"] = "player_left"
    username: str


class ItemCollected(_Event):
    """Items entered Emil's inventory."""

    kind: Literal["item_collected"] = "item_collected"
    item: str
    count: int = 1
    from_player: str | None = None
    """The player who tossed the items, when Emil picked up what a player had just thrown
    (None: any other cause, e.g. a block dug, a server /give)."""


class ActionFinished(_Event):
    """A coarse action ended (ok, failed, or aborted)."""

    kind: Literal["action_finished"] = "action_finished"
    action: str
    ok: bool
    result: Any = None
    error: str | None = None
    elapsed_ms: float = 0.0


class BlockPlaced(_Event):
    """A chest appeared (the ownership ledger notes who placed it: emil.trust.ledger)."""

    kind: Literal["block_placed"] = "block_placed"
    block: str
    position: dict[str, int]
    by: str | None = None
    """The player who swung within reach as it appeared, Emil's own name, or None (unknown)."""


class BlockRemoved(_Event):
    """A chest went (dug, burnt, exploded)."""

    kind: Literal["block_removed"] = "block_removed"
    block: str
    position: dict[str, int]


class Reflex(_Event):
    """A reflex acted without the model (self-defence, flee, eat, unstuck)."""

    kind: Literal["reflex"] = "reflex"
    reflex: str
    detail: str = ""


class TimeOfDay(_Event):
    """Ambient: the time of day changed phase (dawn, noon, dusk, night)."""

    kind: Literal["time"] = "time"
    phase: str
    time_of_day: int = 0


class Weather(_Event):
    """Ambient: rain started or stopped."""

    kind: Literal["weather"] = "weather"
    raining: bool


class Kicked(_Event):
    """The server kicked the bot."""

    kind: Literal["kicked"] = "kicked"
    reason: str = ""


class Disconnected(_Event):
    """The bot's connection ended."""

    kind: Literal["disconnected"] = "disconnected"
    reason: str = ""


class ErrorEvent(_Event):
    """The bot module reported an error."""

    kind: Literal["error"] = "error"
    message: str


class UnknownEvent(_Event):
    """An event kind this runtime does not know; kept, never fatal."""

    kind: Literal["unknown"] = "unknown"
    original_kind: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


GameEvent = Annotated[
    Chat
    | Damage
    | Health
    | Death
    | Respawn
    | HostileNearby
    | PlayerJoined
    | PlayerLeft
    | ItemCollected
    | ActionFinished
    | BlockPlaced
    | BlockRemoved
    | Reflex
    | TimeOfDay
    | Weather
    | Kicked
    | Disconnected
    | ErrorEvent
    | UnknownEvent,
    Field(discriminator="kind"),
]

EVENT_ADAPTER: TypeAdapter[GameEvent] = TypeAdapter(GameEvent)

_KNOWN = {
    "chat", "damage", "health", "death", "respawn", "hostile_nearby", "player_joined",
    "player_left", "item_collected", "action_finished", "block_placed", "block_removed", "reflex", "time", "weather", "kicked",
    "disconnected", "error",
}


def parse_event(data: dict[str, Any]) -> GameEvent:
    """Validate one event dict from the bot module; unknown kinds become UnknownEvent."""
    kind = data.get("kind")
    if kind not in _KNOWN:
        rest = {k: v for k, v in data.items() if k not in ("kind", "t")}
        return UnknownEvent(original_kind=str(kind), data=rest, **({"t": data["t"]} if "t" in data else {}))
    return EVENT_ADAPTER.validate_python(data)

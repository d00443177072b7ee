"""Perception: which game events start a turn, and the compact observation the model reads.

Events are classified into three priorities:

- ``urgent``  damage, a hostile within reach, health falling to the low mark, death, chat that
              names Emil, whispers. An urgent event starts a turn at once and interrupts a
              running action.
- ``normal``  other chat, joins and leaves, items collected, actions finished, reflexes,
              respawn and bot errors. They start a turn when Emil is idle; chat waits a short
              debounce so a burst of lines becomes one turn.
- ``ambient`` time of day, weather, health changes above the low mark, disconnects and kicks
              (the bridge reconnects; the model cannot act meanwhile). They only update the
              status and never start a turn.

The observation is one user message: the status (snapshot) first, then the new events. The
status lives only in the newest message, never in the system prompt, so every earlier prompt
token stays byte-identical and vLLM's prefix cache keeps serving it.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from emil.events import (
    ActionFinished,
    BlockPlaced,
    BlockRemoved,
    Chat,
    Damage,
    Death,
    Disconnected,
    ErrorEvent,
    GameEvent,
    Health,
    HostileNearby,
    ItemCollected,
    Kicked,
    PlayerJoined,
    PlayerLeft,
    Reflex,
    Respawn,
    TimeOfDay,
    UnknownEvent,
    Weather,
)
from emil.trust.npc import HELD_LIMIT, TurnBudget

__all__ = [
    "Perception",
    "PerceptionPolicy",
    "Priority",
    "Triaged",
    "asks_to_stop",
    "describe_event",
    "format_events",
    "format_observation",
    "format_status",
    "format_status_line",
]

Priority = Literal["urgent", "normal", "ambient"]


@dataclass(frozen=True)
class PerceptionPolicy:
    """The thresholds perception works with (from :class:`emil.config.Settings`)."""

    bot_name: str = "Emil"
    low_health: float = 6.0
    hostile_urgent_distance: float = 8.0
    chat_debounce_s: float = 0.4
    turns_per_minute: float | None = None
    """The turn-rate cap and the NPC chat budget (emil.trust.npc); None: neither (offline use)."""
    npcs: frozenset[str] = frozenset()
    npc_turns_per_minute: float = 2.0
    npc_exchanges: int = 3
    npc_loop_detection: bool = False
    speech_actions: frozenset[str] = frozenset({"say", "whisper"})
    """Actions that are Emil speaking (the tools that declare ``speaks``)."""


@dataclass(frozen=True)
class Triaged:
    """An event with the priority perception gave it and why."""

    event: GameEvent
    priority: Priority
    why: str = ""
    at: float = 0.0
    """``time.monotonic()`` when the event arrived (for turn latency)."""
    npc: bool = False
    """A chat line from a speaker taken for an NPC when it arrived (emil.trust.npc)."""


@dataclass
class Perception:
    """Classifies events, holds the pending ones, and decides when a turn should start.

    Not thread-safe; the agent loop owns it. ``now`` arguments are ``time.monotonic()`` values
    so tests can drive the clock.
    """

    policy: PerceptionPolicy = field(default_factory=PerceptionPolicy)
    pending: list[Triaged] = field(default_factory=list)
    ambient: dict[str, Any] = field(default_factory=dict)
    """Latest ambient facts (time phase, raining, health/food), shown in the status line."""
    _last_chat: float | None = None
    _last_health: float | None = None
    budget: TurnBudget | None = None
    """Which chat may start a turn, and how often turns start (None: every event, at once)."""
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        p = self.policy
        if self.budget is None and p.turns_per_minute is not None:
            self.budget = TurnBudget(npcs=p.npcs, npc_turns_per_minute=p.npc_turns_per_minute,
                                     npc_exchanges=p.npc_exchanges, turns_per_minute=p.turns_per_minute,
                                     detect_loops=p.npc_loop_detection, clock=self.clock)

    def is_npc(self, name: str) -> bool:
        """A player whose chat is budgeted (listed in npc_players, another Emil, or caught
        answering in a loop)."""
        return name in self.policy.npcs or (self.budget is not None and self.budget.is_npc(name))

    def emil_spoke(self) -> None:
        """Emil's own chat went out (loop detection, emil.trust.npc)."""
        if self.budget is not None:
            self.budget.emil_spoke()

    def echo(self, event: ActionFinished) -> None:
        """An action the loop awaited ended (its result is already the model's): a chat action
        that went out is Emil speaking."""
        if event.ok and event.action in self.policy.speech_actions:
            self.emil_spoke()

    def classify(self, event: GameEvent, *, npc: bool | None = None) -> tuple[Priority, str]:
        """Priority of one event and a short reason (pure apart from the health memory);
        ``npc``: whether a chat line's speaker is an NPC (None: ask :meth:`is_npc`)."""
        p = self.policy
        if npc is None:
            npc = isinstance(event, Chat) and self.is_npc(event.sender)
        match event:
            case Damage():
                return "urgent", f"hit by {event.attacker or 'something'}"
            case Death():
                return "urgent", "died"
            case HostileNearby() if event.distance <= p.hostile_urgent_distance:
                return "urgent", f"{event.name} within {event.distance:.0f} blocks"
            case HostileNearby():
                return "normal", f"{event.name} nearby"
            case Health() if event.health <= p.low_health and (
                self._last_health is None or self._last_health > p.low_health
            ):
                return "urgent", f"health low ({event.health:g})"
            case Health() | TimeOfDay() | Weather() | UnknownEvent() | BlockPlaced() | BlockRemoved():
                return "ambient", ""
            case Disconnected() | Kicked():
                # Nothing the model can do while the bridge reconnects; the status says so.
                return "ambient", event.kind
            case Chat() if event.sender == p.bot_name:
                return "ambient", "own chat"
            case Chat() if npc:
                return "normal", f"chat from the NPC {event.sender}"  # never urgent: it cannot interrupt
            case Chat() if event.whisper:
                return "urgent", f"whisper from {event.sender}"
            case Chat() if _names(event.text, p.bot_name):
                return "urgent", f"{event.sender} spoke to {p.bot_name}"
            case Chat():
                return "normal", f"chat from {event.sender}"
            case _:
                return "normal", event.kind

    def add(self, event: GameEvent, now: float | None = None, *, npc: bool | None = None) -> Triaged:
        """Classify and queue an event (ambient ones only update the status facts). ``npc``:
        whether a chat line is an NPC's, as recorded (replay); None: as perception sees it now."""
        now = time.monotonic() if now is None else now
        if self.budget is not None and isinstance(event, Chat) and event.sender != self.policy.bot_name:
            self.budget.heard(event.sender)
        if npc is None:
            npc = isinstance(event, Chat) and event.sender != self.policy.bot_name and self.is_npc(event.sender)
        priority, why = self.classify(event, npc=npc)
        self._remember(event)
        triaged = Triaged(event, priority, why, now, npc=npc)
        if priority != "ambient":
            self.pending.append(triaged)
            if isinstance(event, Chat) and not self._held(triaged):
                self._last_chat = now
            self._drop_old_held()
        return triaged

    @staticmethod
    def _npc_line(t: Triaged) -> bool:
        return t.npc

    def _held(self, t: Triaged) -> bool:
        """An NPC's line its budget does not let start a turn now (it joins the next one)."""
        return self.budget is not None and t.npc and isinstance(t.event, Chat) \
            and not self.budget.npc_may_start(t.event.sender)

    def _drop_old_held(self) -> None:
        npc = [t for t in self.pending if self._npc_line(t)]
        if len(npc) > HELD_LIMIT:
            dropped = {id(t) for t in npc[: len(npc) - HELD_LIMIT]}
            self.pending = [t for t in self.pending if id(t) not in dropped]

    def _remember(self, event: GameEvent) -> None:
        match event:
            case TimeOfDay():
                self.ambient["time"] = event.phase
            case Weather():
                self.ambient["raining"] = event.raining
            case Health():
                self.ambient["health"] = event.health
                self.ambient["food"] = event.food
                self._last_health = event.health
            case Damage():
                self.ambient["health"] = event.health
                self._last_health = event.health
            case Respawn():
                self._last_health = None
            case _:
                pass

    @property
    def urgent(self) -> bool:
        """True when an urgent event is pending."""
        return any(t.priority == "urgent" for t in self.pending)

    def wait_s(self, now: float | None = None) -> float | None:
        """Seconds until a turn should start: 0 = now, None = nothing pending.

        Urgent events start at once; chat waits out the debounce after the last chat line
        (an urgent line in the same burst does not wait); other normal events start at once.
        """
        if not self.pending:
            return None
        due = [t for t in self.pending if not self._held(t)]
        if not due:  # only NPC lines over their budget: wait for it (or for anything else)
            assert self.budget is not None
            return self.budget.npc_wait_s(sorted({t.event.sender for t in self.pending if isinstance(t.event, Chat)}))
        rate = self.budget.turn_wait_s() if self.budget is not None else 0.0
        if any(t.priority == "urgent" for t in due):
            return rate
        now = time.monotonic() if now is None else now
        if self._last_chat is not None and all(isinstance(t.event, Chat) for t in due):
            return max(rate, self._last_chat + self.policy.chat_debounce_s - now)
        return rate

    def take(self) -> list[Triaged]:
        """Remove and return the pending events, oldest first (held NPC lines included: they
        ride along in the turn something else started)."""
        if self.budget is not None:
            due = [t for t in self.pending if not self._held(t)]
            npc_due = [t for t in due if self._npc_line(t)]
            started_by_npc = bool(npc_due) and len(npc_due) == len(due)
            player_spoke = any(isinstance(t.event, Chat) and not self._npc_line(t) for t in self.pending)
            self.budget.started(
                npc_speakers=[t.event.sender for t in npc_due if isinstance(t.event, Chat)] if started_by_npc else [],
                player_spoke=player_spoke,
            )
        taken, self.pending = self.pending, []
        self._last_chat = None
        return taken

    def clear_actions(self) -> None:
        """Death clears queued action news: what was running no longer matters."""
        self.pending = [t for t in self.pending if not isinstance(t.event, ActionFinished)]


_STOP_WORDS = re.compile(r"(?<![\w])(stop|halt|wait|cancel|abort|freeze|hold on|never ?mind)(?![\w])", re.IGNORECASE)


def asks_to_stop(text: str) -> bool:
    """True when a chat line asks Emil to stop what it is doing ("Emil, stop!", "wait")."""
    return _STOP_WORDS.search(text) is not None


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE) is not None


def _fmt_num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_event(event: GameEvent) -> str:
    """One short line for the model about an event."""
    match event:
        case Chat(whisper=True):
            return f'{event.sender} whispers to you: "{event.text}"'
        case Chat():
            return f'{event.sender} says: "{event.text}"'
        case Damage():
            who = f" by {event.attacker}" if event.attacker else ""
            return f"you were hit{who}: -{event.amount:g} health, now {event.health:g}/20"
        case Health():
            return f"health {event.health:g}/20, food {event.food:g}/20"
        case Death():
            return f"you died ({event.reason})" if event.reason else "you died"
        case Respawn():
            return "you respawned"
        case HostileNearby():
            return f"hostile {event.name} {event.distance:.0f} blocks away"
        case PlayerJoined():
            return f"{event.username} joined the game"
        case PlayerLeft():
            return f"{event.username} left the game"
        case ItemCollected():
            giver = f" (tossed by {event.from_player})" if event.from_player else ""
            return f"you picked up {event.count} {event.item}{giver}"
        case ActionFinished():
            status = "ok" if event.ok else "failed"
            tail = f": {_short(event.error)}" if event.error else (f": {_short(event.result)}" if event.result not in (None, "") else "")
            return f"action {event.action} finished {status}{tail}"
        case Reflex():
            return f"reflex {event.reflex}" + (f": {event.detail}" if event.detail else "")
        case BlockPlaced():
            return f"{event.by or 'someone'} placed a {event.block} at {_fmt_pos(event.position)}"
        case BlockRemoved():
            return f"the {event.block} at {_fmt_pos(event.position)} is gone"
        case TimeOfDay():
            return f"it is now {event.phase}"
        case Weather():
            return "it started raining" if event.raining else "the rain stopped"
        case Kicked():
            return f"you were kicked: {event.reason}"
        case Disconnected():
            return f"connection lost: {event.reason}"
        case ErrorEvent():
            return f"bot error: {event.message}"
        case UnknownEvent():
            return f"{event.original_kind}: {_short(event.data)}"


def _fmt_pos(pos: Any) -> str | None:
    if isinstance(pos, Mapping):
        vals = [pos.get(k) for k in ("x", "y", "z")]
    elif isinstance(pos, Sequence) and not isinstance(pos, str):
        vals = list(pos)[:3]
    else:
        return None
    nums = [v for v in vals if isinstance(v, int | float)]
    if len(nums) != 3:
        return None
    return ",".join(str(math.floor(v)) for v in nums)  # block coordinates, as F3 shows them


def _fmt_named_list(items: Any, limit: int = 8) -> str | None:
    """Inventory/nearby lists: [{"name": "oak_log", "count": 3}] or {"oak_log": 3} or ["x"]."""
    parts: list[str] = []
    if isinstance(items, Mapping):
        parts = [f"{k} x{v}" if isinstance(v, int) else f"{k} {_short(v, 40)}" for k, v in items.items()]
    elif isinstance(items, Sequence) and not isinstance(items, str):
        for it in items:
            if isinstance(it, Mapping):
                name = it.get("name") or it.get("username") or it.get("type") or "?"
                extra = []
                if isinstance(it.get("count"), int) and it["count"] != 1:
                    extra.append(f"x{it['count']}")
                if isinstance(it.get("distance"), int | float) and it["distance"] >= 0:
                    extra.append(f"{it['distance']:.0f}m")
                parts.append(" ".join([str(name), *extra]))
            else:
                parts.append(str(it))
    else:
        return None
    if not parts:
        return "none"
    more = len(parts) - limit
    return ", ".join(parts[:limit]) + (f", +{more} more" if more > 0 else "")


_STATUS_KEYS = frozenset({
    "position", "health", "food", "time", "time_of_day", "dimension", "holding", "held", "inventory",
    "players", "mobs", "blocks", "action", "job", "following", "raining", "standing_on",
})
_QUIET_KEYS = frozenset({"t", "kind", "connected", "username", "reflexes", "yaw", "pitch", "standing_on"})


def _phase(ticks: int) -> str:
    """Minecraft time of day (0-24000 ticks, 0 = sunrise) as a word."""
    ticks %= 24000
    if ticks < 12000:
        return "day"
    if ticks < 13800:
        return "dusk"
    if ticks < 22200:
        return "night"
    return "dawn"


def format_status(snapshot: Mapping[str, Any] | None, ambient: Mapping[str, Any] | None = None) -> str:
    """The one-line status: position, health, food, time, inventory, who and what is near."""
    snap: dict[str, Any] = dict(ambient or {})
    snap.update(snapshot or {})
    if snap.get("connected") is False:
        return "not connected to the server"
    parts: list[str] = []
    pos = _fmt_pos(snap.get("position"))
    if pos:
        parts.append(f"pos {pos}")
    hp, food = snap.get("health"), snap.get("food")
    vitals = [f"health {_fmt_num(hp)}/20" if hp is not None else "", f"food {_fmt_num(food)}/20" if food is not None else ""]
    if any(vitals):
        parts.append(" ".join(v for v in vitals if v))
    when = snap.get("time")
    if when is None and isinstance(snap.get("time_of_day"), int):
        when = _phase(snap["time_of_day"])
    if when is not None:
        parts.append(f"time {when}")
    if snap.get("raining"):
        parts.append("raining")
    if snap.get("dimension") not in (None, "overworld", "minecraft:overworld"):
        parts.append(f"in {snap['dimension']}")
    held = snap.get("held") or snap.get("holding")
    if held:
        parts.append(f"holding {held}")
    for key, label in (("inventory", "inventory"), ("players", "players near"), ("mobs", "mobs near"), ("blocks", "blocks near")):
        if key in snap:
            text = _fmt_named_list(snap[key])
            if text is not None:
                parts.append(f"{label}: {text}")
    doing = snap.get("job") or snap.get("action")
    if doing:
        parts.append(f"doing {doing}")
    if snap.get("following"):
        parts.append(f"following {snap['following']}")
    for key, value in snap.items():
        if key not in _STATUS_KEYS and key not in _QUIET_KEYS and value not in (None, "", [], {}):
            parts.append(f"{key}: {_short(value, 60)}")
    return " | ".join(parts) if parts else "unknown"


def format_events(events: Iterable[Triaged], *, note: str | None = None) -> str:
    """The event part of an observation: one line per event (urgent ones marked), or a note."""
    lines = []
    if note:
        lines.append(f"[note] {note}")
    evs = list(events)
    if evs:
        lines.append("[events]")
        lines.extend(f"- {'(!) ' if t.priority == 'urgent' else ''}{describe_event(t.event)}" for t in evs)
    return "\n".join(lines) if lines else "[events] none"


def format_status_line(snapshot: Mapping[str, Any] | None, ambient: Mapping[str, Any] | None = None) -> str:
    """The status part of an observation (rides on the newest message only)."""
    return f"[status] {format_status(snapshot, ambient)}"


def format_observation(
    events: Iterable[Triaged],
    snapshot: Mapping[str, Any] | None,
    *,
    ambient: Mapping[str, Any] | None = None,
    note: str | None = None,
) -> str:
    """The whole observation as the model reads it: events, a blank line, the status."""
    return f"{format_events(events, note=note)}\n\n{format_status_line(snapshot, ambient)}"

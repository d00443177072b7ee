"""Perception: which game events start a turn, and when.

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

How the turn's events and Emil's status are then written for the model is
:mod:`emil.senses.observation`.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from emil.config import Settings
from emil.trust.npc import HELD_LIMIT, TurnBudget
from emil.world.events import (
    ActionFinished,
    BlockPlaced,
    BlockRemoved,
    Chat,
    Damage,
    Death,
    Disconnected,
    GameEvent,
    Health,
    HostileNearby,
    Kicked,
    Respawn,
    TimeOfDay,
    UnknownEvent,
    Weather,
)

__all__ = ["Perception", "Priority", "Triaged", "asks_to_stop"]

Priority = Literal["urgent", "normal", "ambient"]


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

    settings: Settings = field(default_factory=Settings)
    """What it reads: ``bot_name``, ``low_health``, ``hostile_urgent_distance``,
    ``chat_debounce_s``, ``npc_players``; with ``budgeted``, the turn budget's
    (``turns_per_minute``, ``npc_turns_per_minute``, ``npc_exchanges``, ``npc_loop_detection``)."""
    budgeted: bool = False
    """Live: turns start within the turn-rate cap and NPC chat within its budget (emil.trust.npc);
    off: every event, at once (replay, the offline tools)."""
    speech_actions: frozenset[str] = frozenset({"say", "whisper"})
    """Actions that are Emil speaking (the tools that declare ``speaks``)."""
    pending: list[Triaged] = field(default_factory=list)
    ambient: dict[str, Any] = field(default_factory=dict)
    """Latest ambient facts (time phase, raining, health/food), shown in the status line."""
    _last_chat: float | None = None
    _last_health: float | None = None
    budget: TurnBudget | None = None
    """Which chat may start a turn, and how often turns start (None: every event, at once)."""
    clock: Callable[[], float] = time.monotonic
    awaited: Counter[str] = field(default_factory=Counter)
    """Actions the driver dispatched and awaited whose ``action_finished`` has not come yet."""

    def __post_init__(self) -> None:
        s = self.settings
        if self.budget is None and self.budgeted:
            self.budget = TurnBudget(npcs=frozenset(s.npc_players), npc_turns_per_minute=s.npc_turns_per_minute,
                                     npc_exchanges=s.npc_exchanges, turns_per_minute=s.turns_per_minute,
                                     detect_loops=s.npc_loop_detection, clock=self.clock)

    def is_npc(self, name: str) -> bool:
        """A player whose chat is budgeted (listed in npc_players, another Emil, or caught
        answering in a loop)."""
        return name in self.settings.npc_players or (self.budget is not None and self.budget.is_npc(name))

    def emil_spoke(self) -> None:
        """Emil's own chat went out (loop detection, emil.trust.npc)."""
        if self.budget is not None:
            self.budget.emil_spoke()

    def dispatched(self, action: str) -> None:
        """The driver dispatched ``action`` and awaits its result itself."""
        self.awaited[action] += 1

    def echo(self, event: GameEvent) -> bool:
        """True when ``event`` is the end of an action the driver awaited (:meth:`dispatched`):
        its result is already the model's as a tool result, so it is no event and starts no
        turn; a chat action that went out is Emil speaking. The one place this rule is written
        (the live loop and replay both ask it)."""
        if not isinstance(event, ActionFinished) or self.awaited[event.action] <= 0:
            return False
        self.awaited[event.action] -= 1
        if event.ok and event.action in self.speech_actions:
            self.emil_spoke()
        return True

    def classify(self, event: GameEvent, *, npc: bool | None = None) -> tuple[Priority, str]:
        """Priority of one event and a short reason (pure apart from the health memory);
        ``npc``: whether a chat line's speaker is an NPC (None: ask :meth:`is_npc`)."""
        p = self.settings
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
        if self.budget is not None and isinstance(event, Chat) and event.sender != self.settings.bot_name:
            self.budget.heard(event.sender)
        if npc is None:
            npc = isinstance(event, Chat) and event.sender != self.settings.bot_name and self.is_npc(event.sender)
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
            return max(rate, self._last_chat + self.settings.chat_debounce_s - now)
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

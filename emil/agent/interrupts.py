"""Which urgent event interrupts what, and when: the rules of docs/reliability.md "Interrupts".

An urgent event interrupts a running action at once, and a model call in flight after a grace
when it is danger to Emil (a hit, a hostile close by, low health, death) or a "stop" from an
operator or from a player this turn answers. The same emergency does not interrupt its own
response (a second hit by the same attacker, a second line from the player being answered),
and one player's urgent lines interrupt at most once per ``urgent_interval_s``. The live loop
(:mod:`emil.agent.loop`) owns the cancel scopes; these rules decide.
"""

from __future__ import annotations

import math
import time

from emil.config import Settings
from emil.senses.perception import Perception, Triaged, asks_to_stop
from emil.world.events import Chat, Damage, Death, GameEvent, Health, HostileNearby

__all__ = ["Interrupts", "urgent_key"]


def urgent_key(event: GameEvent) -> str:
    """Same key = same emergency: a second hit by the same attacker, or a second line from the
    player being answered, does not abort the response."""
    match event:
        case Damage():
            return f"damage:{event.attacker}"
        case HostileNearby():
            return f"hostile:{event.name}"
        case Chat():
            return f"chat:{event.sender}"
        case _:
            return event.kind


class Interrupts:
    """The interrupt rules over one session (see the module doc)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        """Its ``operators`` (whose "stop" cancels a model call even when they did not start the
        turn) and ``urgent_interval_s``."""
        self.turn_keys: set[str] = set()
        """The emergencies the running turn answers (they do not interrupt it again)."""
        self.requesters: frozenset[str] = frozenset()
        """Every player whose words are in this turn (operator-only acts need all of them;
        a "stop" from any of them cancels a model call)."""
        self.quiet_until: dict[str, float] = {}
        """Player -> monotonic time before which their urgent lines do not interrupt again."""

    def begin_turn(self, triaged: list[Triaged]) -> None:
        """A turn starts with these events: its emergencies and its requesters."""
        self.turn_keys = {urgent_key(t.event) for t in triaged if t.priority == "urgent"}
        self.requesters = frozenset(t.event.sender for t in triaged if isinstance(t.event, Chat))

    def end_turn(self) -> None:
        self.turn_keys = set()
        self.requesters = frozenset()

    def asks_to_stop(self, event: GameEvent) -> bool:
        """A "stop" from an operator or from a player this turn is answering."""
        return (
            isinstance(event, Chat)
            and (event.sender in self.settings.operators or event.sender in self.requesters)
            and asks_to_stop(event.text)
        )

    def may_interrupt(self, triaged: Triaged, now: float) -> bool:
        event = triaged.event
        if isinstance(event, Death):
            return True
        if isinstance(event, Chat):
            if now < self.quiet_until.get(event.sender, -math.inf):
                return False  # this player interrupted a moment ago
            return urgent_key(event) not in self.turn_keys or self.asks_to_stop(event)
        return urgent_key(event) not in self.turn_keys

    def claim(self, triaged: Triaged) -> bool:
        """True when ``triaged`` interrupts now (and starts its player's quiet interval)."""
        now = time.monotonic()
        if not self.may_interrupt(triaged, now):
            return False
        if isinstance(triaged.event, Chat):
            self.quiet_until[triaged.event.sender] = now + self.settings.urgent_interval_s
        return True

    def cancels_call(self, triaged: Triaged) -> bool:
        """Worth cancelling a model call for: danger to Emil, or a stop from who may give it."""
        event = triaged.event
        if isinstance(event, Damage | Death | Health | HostileNearby):
            return True
        return self.asks_to_stop(event)

    def pending(self, perception: Perception) -> str | None:
        """The reason of the first pending urgent event that interrupts now (it claims), if any."""
        for t in perception.pending:
            if t.priority == "urgent" and self.claim(t):
                return t.why or t.event.kind
        return None


"""Which chat may start a turn: NPCs do not talk each other into a loop, and turns are rationed.

Two NPCs that answer every line addressed to them answer each other forever (two Emils on one
server made 527 model requests in 30 s). The budget, per Emil:

- **NPC chat never interrupts and starts a turn only within a budget.** An NPC is a player in
  ``npc_players``, another Emil on the same server found by :mod:`emil.world.peers`, or (when
  switched on) a speaker caught in a fast loop (below). Its chat is never urgent; it
  starts a turn only while its speaker has a token (``npc_turns_per_minute`` each) *and* fewer
  than ``npc_exchanges`` turns in a row were started by NPC chat alone. A line over budget is
  held: it joins the next turn something else starts (at most :data:`HELD_LIMIT` lines, the
  newest), so Emil still reads it. A real player's chat ends the run; so does
  :data:`RUN_RESET_S` without an NPC-started turn.
- **Loop detection** (``npc_loop_detection``, off by default). A speaker whose line came within
  :data:`REPLY_WINDOW_S` of Emil's own chat, :data:`LOOP_STREAK` times in a row, is treated as an
  NPC until it has been quiet for :data:`QUIET_RESET_S` (another Emil that nobody listed, or any
  bot that answers everything). Off by default: it takes people in a busy chat for NPCs (the
  next line often follows Emil's answer within the window whoever wrote it), a model-driven bot
  slower than the window is not caught anyway, and the turn-rate cap bounds an unlisted bot's
  load (docs/trust.md).
- **A turn-rate cap.** At most ``turns_per_minute`` turns start a minute (a bucket holding
  :func:`burst_of` turns), whatever starts them: it bounds the load on the model whatever the
  chat does.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from emil.trust.caps import TokenBucket

__all__ = ["HELD_LIMIT", "LOOP_STREAK", "QUIET_RESET_S", "REPLY_WINDOW_S", "RUN_RESET_S", "TurnBudget", "burst_of"]

REPLY_WINDOW_S = 3.0
"""A line this soon after Emil's own chat counts as an instant answer (a person reads and types
for longer than this most of the time)."""
LOOP_STREAK = 8
"""Instant answers in a row that mark a speaker as an NPC."""
QUIET_RESET_S = 120.0
"""An NPC found by loop detection is an ordinary player again after this long without a line."""
RUN_RESET_S = 120.0
"""The count of NPC-started turns in a row starts over after this long without one."""
HELD_LIMIT = 10
"""Held NPC lines kept for the next turn (the newest)."""


def burst_of(turns_per_minute: float) -> int:
    """How many turns may start back to back before the rate applies."""
    return max(1, min(5, math.floor(turns_per_minute)))


@dataclass
class TurnBudget:
    """The budget of one Emil (see the module docstring). ``clock`` is monotonic seconds."""

    npcs: frozenset[str] = frozenset()
    npc_turns_per_minute: float = 2.0
    npc_exchanges: int = 3
    turns_per_minute: float = 30.0
    detect_loops: bool = False
    """Mark instant answerers as NPCs (setting ``npc_loop_detection``)."""
    peers: Callable[[], frozenset[str]] | None = None
    """Other Emils on the same server, found without a list (emil.world.peers)."""
    clock: Callable[[], float] = time.monotonic
    detected: dict[str, float] = field(default_factory=dict)
    """Speakers loop detection marked as NPCs -> their last line's time."""
    npc_run: int = 0
    """Turns in a row started by NPC chat alone."""
    _last_npc_turn: float = -math.inf
    _spoke_at: float = -math.inf
    _streak: dict[str, int] = field(default_factory=dict)
    _answered: set[str] = field(default_factory=set)
    """Speakers who already answered Emil's latest line."""
    _npc_buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _turns: TokenBucket | None = None

    def __post_init__(self) -> None:
        self._turns = TokenBucket(self.turns_per_minute, burst_of(self.turns_per_minute), clock=self.clock)

    # --- who is an NPC -------------------------------------------------------------------

    def is_npc(self, speaker: str) -> bool:
        if speaker in self.npcs or (self.peers is not None and speaker in self.peers()):
            return True
        last = self.detected.get(speaker)
        if last is None:
            return False
        if self.clock() - last >= QUIET_RESET_S:
            del self.detected[speaker]
            self._streak.pop(speaker, None)
            return False
        return True

    def heard(self, speaker: str) -> None:
        """A chat line from ``speaker`` arrived now (loop detection)."""
        now = self.clock()
        if speaker in self.detected:
            self.detected[speaker] = now
        if speaker in self._answered:
            return  # a second line to the same remark: neither a new answer nor a pause
        self._answered.add(speaker)
        if now - self._spoke_at <= REPLY_WINDOW_S:
            self._streak[speaker] = self._streak.get(speaker, 0) + 1
            if self.detect_loops and self._streak[speaker] >= LOOP_STREAK and speaker not in self.npcs:
                self.detected[speaker] = now
        else:
            self._streak[speaker] = 0

    def emil_spoke(self) -> None:
        """Emil's own chat went out now."""
        self._spoke_at = self.clock()
        self._answered.clear()

    # --- starting turns ------------------------------------------------------------------

    def _bucket(self, speaker: str) -> TokenBucket:
        bucket = self._npc_buckets.get(speaker)
        if bucket is None:
            bucket = TokenBucket(self.npc_turns_per_minute, 1, clock=self.clock)
            self._npc_buckets[speaker] = bucket
        return bucket

    def _run(self) -> int:
        if self.clock() - self._last_npc_turn >= RUN_RESET_S:
            self.npc_run = 0
        return self.npc_run

    def npc_may_start(self, speaker: str) -> bool:
        """May a line from NPC ``speaker`` start a turn now?"""
        return self._run() < self.npc_exchanges and self._bucket(speaker).wait_s() == 0.0

    def npc_wait_s(self, speakers: Iterable[str]) -> float | None:
        """Seconds until a line from one of these NPCs may start a turn (None: not before a
        real player speaks or the run resets)."""
        if self._run() >= self.npc_exchanges:
            return max(0.0, self._last_npc_turn + RUN_RESET_S - self.clock())
        waits = [self._bucket(s).wait_s() for s in speakers]
        return min(waits) if waits else None

    def turn_wait_s(self) -> float:
        """Seconds until the turn-rate cap lets a turn start (0: now)."""
        assert self._turns is not None
        return self._turns.wait_s()

    def started(self, *, npc_speakers: Iterable[str], player_spoke: bool) -> None:
        """A turn started: ``npc_speakers`` are the NPCs whose lines started it (empty when
        something else did); ``player_spoke``: a real player's chat is in it."""
        assert self._turns is not None
        self._turns.take()
        starters = sorted(set(npc_speakers))
        if player_spoke:
            self.npc_run = 0
        elif starters:
            self._run()
            self.npc_run += 1
            self._last_npc_turn = self.clock()
            for s in starters:
                self._bucket(s).take()

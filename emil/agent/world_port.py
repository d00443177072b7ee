"""Emil's body as the settings describe it: the policy and the guard of a live session.

The body itself is :class:`emil.world.actions.BotWorld` (over the mineflayer bridge live, the
simulated body of the synthetic day): every tool call passes the guard (emil.world.guard: the
rule table of docs/trust.md) with the words of the turn; the guard sees every event (chests
placed and removed, players met) and every snapshot (what Emil carries) on the way through, and
keeps its ownership ledger in ``data_dir/ownership.json``.
"""

from __future__ import annotations

from emil.config import Settings
from emil.trust.ledger import Ledger
from emil.world.guard import Guard
from emil.world.tool import ActionPolicy

__all__ = ["OWNERSHIP_FILE", "action_policy", "guard_for"]

OWNERSHIP_FILE = "ownership.json"
"""The ownership ledger's file in ``data_dir`` (emil.trust.ledger)."""


def action_policy(s: Settings) -> ActionPolicy:
    """What the operator allows, from the settings (each turn adds its requesters)."""
    return ActionPolicy(settings=s)


def guard_for(settings: Settings, ledger: Ledger | None = None) -> Guard:
    """The guard the settings describe (the ledger in data_dir unless given)."""
    return Guard(settings, ledger if ledger is not None else Ledger.open(settings.data_dir / OWNERSHIP_FILE))

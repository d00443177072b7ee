"""Who owns what: chests by position, and what Emil holds for whom. Kept in data_dir.

The decisions (docs/trust.md, "Ownership"):

- A chest is owned by the player Emil saw place it (the player who swung within reach of the
  spot as the chest appeared), by Emil when Emil placed it, or by whoever an operator assigned
  it to (``claim_chest``). A chest Emil never saw placed is of unknown owner; only an operator
  may have Emil open or dig it. A chest Emil sees removed is forgotten.
- What Emil carries is Emil's own (picked up, dug, crafted, a gift a player tossed to it), except
  what it took out of a player's chest: that is *held for* the chest's owner until Emil gives it
  to them, stores it back in their chest, or an operator orders otherwise. Tools use Emil's own
  items first. When Emil has fewer of an item than it holds for players (it died, a reflex ate),
  what it holds is cut to what it has.
- Gifts of Emil's own items to ordinary players are counted per recipient (the give rate).

The file is JSON, written whole to a temporary file and renamed over the old one. A file that
cannot be read or parsed is moved aside (``ownership.json.damaged``) with one warning; Emil then
plays on *unsure*: everything it carries at that moment counts as of unknown owner (only an
operator may have it given, stored or used) and every chest as unknown. A store that cannot be
written (read-only, full) logs one warning and the rules go on from memory.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emil.trust.rules import Verdict

__all__ = ["SELF", "UNSURE", "ChestKey", "Ledger", "Source", "chest_key"]

SELF = "@emil"
"""The owner of what is Emil's own (never a player name: "@" is not allowed in names)."""
UNSURE = "@unknown"
"""The owner of what Emil carried when its ownership file turned out damaged."""

GIFT_WINDOW_S = 3600.0
"""The give rate counts gifts within this many seconds."""

_VERSION = 1
_log = logging.getLogger("emil.trust")

ChestKey = str
"""``"x,y,z"`` (block coordinates) or ``"x,y,z@dimension"`` outside the overworld."""


def chest_key(x: int, y: int, z: int, dimension: str | None = None) -> ChestKey:
    """The key of the chest block at ``x, y, z`` (in ``dimension``; overworld by default)."""
    dim = (dimension or "overworld").removeprefix("minecraft:")
    return f"{int(x)},{int(y)},{int(z)}" + ("" if dim == "overworld" else f"@{dim}")


@dataclass
class Source:
    """Where ``n`` of one item would come from: the recipient's or chest owner's lot
    (``theirs``), Emil's own, other players' lots (by owner)."""

    theirs: int = 0
    own: int = 0
    others: dict[str, int] = field(default_factory=dict)


@dataclass
class _Chest:
    owner: str
    how: str
    """placed (as Emil saw) | emil (Emil placed it) | claimed (an operator assigned it)"""
    t: float


@dataclass
class Ledger:
    """Chests and holdings, in memory and in ``path`` (None: memory only, for tests)."""

    path: Path | None = None
    clock: Callable[[], float] = time.time
    chests: dict[ChestKey, _Chest] = field(default_factory=dict)
    held: dict[str, dict[str, int]] = field(default_factory=dict)
    gifts: list[tuple[str, float, int]] = field(default_factory=list)
    unsure: bool = False
    """The file was damaged at start: everything then carried is of unknown owner."""
    _unsure_pending: bool = False
    _write_warned: bool = False

    # --- loading and saving ------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | None, *, clock: Callable[[], float] = time.time) -> Ledger:
        """The ledger in ``path``; never raises (see the module docstring)."""
        ledger = cls(path=path, clock=clock)
        if path is None or not path.exists():
            return ledger
        try:
            ledger._load(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
            ledger.chests.clear()
            ledger.held.clear()
            ledger.gifts.clear()
            ledger.unsure = ledger._unsure_pending = True
            aside = path.with_name(path.name + ".damaged")
            try:
                os.replace(path, aside)
                moved = f"moved aside to {aside}"
            except OSError as move_error:
                moved = f"could not be moved aside ({move_error.strerror})"
            _log.warning(
                "ownership file %s is unreadable (%s: %s); %s. Playing on unsure: what Emil carries now "
                "is of unknown owner (only an operator may have it given or used) and every chest is unknown",
                path, type(e).__name__, e, moved,
            )
        return ledger

    def _load(self, data: Any) -> None:
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise ValueError(f"not an ownership file of version {_VERSION}")
        for key, c in data["chests"].items():
            self.chests[str(key)] = _Chest(owner=str(c["owner"]), how=str(c["how"]), t=float(c["t"]))
        for owner, items in data["held"].items():
            self.held[str(owner)] = {str(k): int(v) for k, v in items.items() if int(v) > 0}
        self.gifts = [(str(p), float(t), int(n)) for p, t, n in data["gifts"]]
        self.unsure = bool(data.get("unsure", False))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _VERSION,
            "chests": {k: {"owner": c.owner, "how": c.how, "t": c.t} for k, c in sorted(self.chests.items())},
            "held": {p: dict(sorted(items.items())) for p, items in sorted(self.held.items()) if items},
            "gifts": [[p, t, n] for p, t, n in self.gifts],
            "unsure": self.unsure,
        }

    def save(self) -> bool:
        """Write the file (atomically); False, with one warning per session, when it cannot."""
        if self.path is None:
            return True
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as e:
            if not self._write_warned:
                self._write_warned = True
                _log.warning("cannot write the ownership file %s (%s); the rules go on from memory, "
                             "and what changed is lost at the next restart", self.path, e.strerror or e)
            return False
        return True

    # --- chests ------------------------------------------------------------------------

    def chest_owner(self, key: ChestKey) -> str | None:
        """SELF, a player's name, or None (unknown)."""
        chest = self.chests.get(key)
        return chest.owner if chest is not None else None

    def chest_how(self, key: ChestKey) -> str | None:
        chest = self.chests.get(key)
        return chest.how if chest is not None else None

    def set_chest(self, key: ChestKey, owner: str, how: str) -> None:
        self.chests[key] = _Chest(owner=owner, how=how, t=self.clock())
        self.save()

    def forget_chest(self, key: ChestKey) -> None:
        if self.chests.pop(key, None) is not None:
            self.save()

    # --- holdings ----------------------------------------------------------------------

    def held_for(self, owner: str) -> dict[str, int]:
        return dict(self.held.get(owner, {}))

    def held_total(self, item: str, *, besides: frozenset[str] = frozenset()) -> int:
        """How many ``item`` Emil holds for owners not in ``besides``."""
        return sum(items.get(item, 0) for owner, items in self.held.items() if owner not in besides)

    def own(self, inventory: Mapping[str, int], item: str) -> int:
        """How many ``item`` of what Emil carries are its own."""
        return max(0, int(inventory.get(item, 0)) - self.held_total(item))

    def hold(self, owner: str, items: Mapping[str, int]) -> None:
        """Emil now holds ``items`` for ``owner`` (SELF: nothing to note)."""
        if owner == SELF:
            return
        lot = self.held.setdefault(owner, {})
        for item, n in items.items():
            if n > 0:
                lot[item] = lot.get(item, 0) + int(n)
        self.save()

    def release(self, owner: str, item: str, n: int) -> int:
        """Up to ``n`` of ``item`` held for ``owner`` are no longer held; returns how many."""
        lot = self.held.get(owner)
        if not lot or n <= 0:
            return 0
        took = min(n, lot.get(item, 0))
        if took:
            lot[item] -= took
            if lot[item] <= 0:
                del lot[item]
            if not lot:
                del self.held[owner]
            self.save()
        return took

    def spend(self, item: str, n: int, *, first: tuple[str, ...] = ()) -> dict[str, int]:
        """``n`` of ``item`` left Emil's inventory: taken from the holdings of the owners in
        ``first`` (in order), then from Emil's own (nothing to note). Returns what was released
        per owner. Own items are *not* assumed first here: the caller says whose went."""
        out: dict[str, int] = {}
        left = n
        for owner in first:
            got = self.release(owner, item, left)
            if got:
                out[owner] = got
                left -= got
        return out

    def reconcile(self, inventory: Mapping[str, int]) -> None:
        """What Emil holds never exceeds what it carries (see the module docstring); on the
        first inventory after a damaged file, everything carried becomes of unknown owner."""
        changed = False
        if self._unsure_pending:
            self._unsure_pending = False
            lot = {k: int(v) for k, v in inventory.items() if int(v) > 0}
            if lot:
                self.held[UNSURE] = lot
            changed = True
        for item in {i for items in self.held.values() for i in items}:
            excess = self.held_total(item) - max(0, int(inventory.get(item, 0)))
            for owner in sorted(self.held, key=lambda o: (o != UNSURE, o)):
                if excess <= 0:
                    break
                lot = self.held[owner]
                cut = min(excess, lot.get(item, 0))
                if cut:
                    lot[item] -= cut
                    excess -= cut
                    changed = True
                    if lot[item] <= 0:
                        del lot[item]
        for owner in [o for o, items in self.held.items() if not items]:
            del self.held[owner]
        if changed:
            self.save()

    # --- the give rate -----------------------------------------------------------------

    def sources(self, inventory: Mapping[str, int], item: str, n: int, *, theirs: str | None,
                may_use: Callable[[str], Verdict]) -> tuple[Source, Verdict | None]:
        """Where ``n`` of ``item`` come from for a turn that may use them: ``theirs`` (the owner
        whose lot goes first: the recipient, the chest's owner), then Emil's own, then the lots
        of owners ``may_use(owner)`` allows; the verdict
        refusing the rest, when some are left (None: all found)."""
        src = Source()
        left = n
        if theirs is not None:
            src.theirs = min(left, self.held_for(theirs).get(item, 0))
            left -= src.theirs
        src.own = min(left, self.own(inventory, item))
        left -= src.own
        refusal: Verdict | None = None
        for owner in sorted(self.held):
            if left <= 0:
                break
            if owner == theirs:
                continue
            have = self.held[owner].get(item, 0)
            if not have:
                continue
            verdict = may_use(owner)
            if not verdict.allowed:
                whose = "are of unknown owner" if owner == UNSURE else f"are held for {owner}"
                refusal = refusal or Verdict(False, verdict.rule, f"{have} of the {item} Emil carries {whose}; {verdict.why}")
                continue
            take = min(left, have)
            src.others[owner] = take
            left -= take
        return src, (refusal if left > 0 else None)

    def spent(self, item: str, src: Source, n: int, *, theirs: str | None) -> None:
        """``n`` of ``item`` left the inventory as ``src`` planned (fewer: the last pools first
        stay untouched)."""
        left = n
        if theirs is not None and src.theirs:
            left -= self.release(theirs, item, min(left, src.theirs))
        left -= min(left, src.own)
        for owner, k in src.others.items():
            if left <= 0:
                break
            left -= self.release(owner, item, min(left, k))

    def chest_owner_of(self, found: Mapping[str, Any]) -> tuple[str, str | None]:
        """The row suffix (emil, owned, unknown) and the owner of a chest the bot found
        (``chest``, its ``blocks`` and ``dimension``)."""
        dim = found.get("dimension") if isinstance(found.get("dimension"), str) else None
        blocks = found.get("blocks") or [found["chest"]]
        owners = {self.chest_owner(chest_key(b["x"], b["y"], b["z"], dim)) for b in blocks}
        if None in owners:
            return "unknown", None
        players = sorted(o for o in owners if o is not None and o != SELF)
        if not players:
            return "emil", SELF
        if len(players) > 1:
            return "owned", "+".join(players)  # two players' halves of one large chest: nobody alone
        return "owned", players[0]

    def record_gift(self, recipient: str, count: int) -> None:
        now = self.clock()
        self.gifts = [g for g in self.gifts if now - g[1] < GIFT_WINDOW_S]
        self.gifts.append((recipient, now, int(count)))
        self.save()

    def given_recently(self, recipient: str) -> int:
        """Items of Emil's own given to ``recipient`` within the last GIFT_WINDOW_S."""
        now = self.clock()
        return sum(n for p, t, n in self.gifts if p == recipient and now - t < GIFT_WINDOW_S and math.isfinite(t))

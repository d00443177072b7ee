"""An in-process double of the bot for the guard's unit tests: inventory, chests, players, mobs.

Not the bot: it answers the JS calls the guard and the item tools make (find_chest,
classify_target, take, store, give, drop, say, whisper, attack, dig, collect, place, eat,
ask_confirm) the way the JS functions do, on a few dictionaries, and records every call. The
integration tests (tests/integration/world/test_trust.py) play the same rules on the real bot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from emil.world.wire import ActionResult, Snapshot

Pos = tuple[int, int, int]
MOBS = frozenset({"zombie", "skeleton", "spider", "cow", "wolf", "villager", "cat"})
GENERIC = frozenset({"player", "players", "everyone", "me", "nearest"})


@dataclass
class WorldDouble:
    inventory: dict[str, int] = field(default_factory=dict)
    chests: dict[Pos, dict[str, int]] = field(default_factory=dict)
    online: list[str] = field(default_factory=lambda: ["Olga", "bob", "carl", "Tess"])
    received: dict[str, dict[str, int]] = field(default_factory=dict)
    """What each player got from give."""
    ground: dict[str, int] = field(default_factory=dict)
    """What Emil dropped."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    here: Pos = (0, 5, 0)

    # --- what the tests read ---------------------------------------------------------

    def said(self) -> list[str]:
        return [a["text"] for n, a in self.calls if n == "say"]

    def whispers(self, to: str) -> list[str]:
        return [a["text"] for n, a in self.calls if n == "whisper" and a["player"] == to]

    def acted(self, name: str) -> list[dict[str, Any]]:
        return [a for n, a in self.calls if n == name]

    # --- the bot ---------------------------------------------------------------------

    async def snapshot(self) -> Snapshot:
        return Snapshot(connected=True, inventory={k: v for k, v in self.inventory.items() if v > 0},
                        players=[{"name": n, "distance": 3.0} for n in self.online])

    async def act(self, name: str, args: Mapping[str, Any] | None = None, timeout: float = 60.0, *, job: bool = False) -> ActionResult:  # noqa: ASYNC109
        a = dict(args or {})
        self.calls.append((name, a))
        try:
            result = getattr(self, f"_{name}")(a)
        except ValueError as e:
            return ActionResult(ok=False, error=str(e))
        return ActionResult(ok=True, result=result)

    def _chest_at(self, a: dict[str, Any]) -> Pos:
        if "x" in a:
            pos = (a["x"], a["y"], a["z"])
            if pos not in self.chests:
                raise ValueError(f"there is air, not a chest, at {pos}")
            return pos
        if not self.chests:
            raise ValueError("no chest within 32 blocks")
        return min(self.chests, key=lambda p: sum((p[i] - self.here[i]) ** 2 for i in range(3)))

    def _find_chest(self, a: dict[str, Any]) -> dict[str, Any]:
        pos = self._chest_at(a)
        blocks = [p for p in self.chests if p[1] == pos[1] and abs(p[0] - pos[0]) + abs(p[2] - pos[2]) <= 1]
        as_dict = lambda p: {"x": p[0], "y": p[1], "z": p[2]}  # noqa: E731
        return {"chest": as_dict(pos), "blocks": [as_dict(p) for p in blocks], "dimension": "overworld"}

    def _classify_target(self, a: dict[str, Any]) -> dict[str, Any]:
        t = str(a["target"]).lower()
        if t in GENERIC:
            return {"kind": "generic", "name": t}
        for n in self.online:
            if n.lower() == t:
                return {"kind": "player", "name": n}
        if t in MOBS:
            return {"kind": "mob", "name": t}
        return {"kind": "unknown", "name": a["target"]}

    def _move(self, src: dict[str, int], dst: dict[str, int], items: dict[str, int]) -> dict[str, int]:
        moved = {}
        for item, n in items.items():
            k = min(n, src.get(item, 0))
            if k:
                src[item] -= k
                dst[item] = dst.get(item, 0) + k
                moved[item] = k
        return moved

    def _take(self, a: dict[str, Any]) -> dict[str, Any]:
        pos = self._chest_at(a)
        return {"took": self._move(self.chests[pos], self.inventory, a["items"]), "chest": {"x": pos[0], "y": pos[1], "z": pos[2]}}

    def _store(self, a: dict[str, Any]) -> dict[str, Any]:
        pos = self._chest_at(a)
        return {"stored": self._move(self.inventory, self.chests[pos], a["items"]), "chest": {"x": pos[0], "y": pos[1], "z": pos[2]}}

    def _give(self, a: dict[str, Any]) -> dict[str, Any]:
        if a["player"] not in self.online:
            raise ValueError(f"cannot see {a['player']}")
        got = self._move(self.inventory, self.received.setdefault(a["player"], {}), {a["item"]: a.get("count", 1)})
        if not got:
            raise ValueError(f"no {a['item']} in the inventory")
        return {"gave": a["item"], "count": got[a["item"]], "to": a["player"]}

    def _drop(self, a: dict[str, Any]) -> dict[str, Any]:
        got = self._move(self.inventory, self.ground, {a["item"]: a.get("count", 1)})
        if not got:
            raise ValueError(f"no {a['item']} in the inventory")
        return {"dropped": a["item"], "count": got[a["item"]]}

    def _say(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"said": a["text"]}

    def _whisper(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"to": a["player"], "said": a["text"]}

    def _ask_confirm(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"asked": a["operators"], "code": a["code"]}

    def _attack(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"target": a["target"], "hits": 3, "defeated": True, "fought_s": 2.0}

    def _dig(self, a: dict[str, Any]) -> dict[str, Any]:
        pos = (a["x"], a["y"], a["z"])
        if pos in self.chests:
            del self.chests[pos]
            return {"dug": "chest", "at": {"x": pos[0], "y": pos[1], "z": pos[2]}}
        return {"dug": "dirt", "at": {"x": pos[0], "y": pos[1], "z": pos[2]}}

    def _collect(self, a: dict[str, Any]) -> dict[str, Any]:
        return {"dug": a.get("count", 1), "collected": {a["block"]: a.get("count", 1)}}

    def _place(self, a: dict[str, Any]) -> dict[str, Any]:
        if self.inventory.get(a["item"], 0) < 1:
            raise ValueError(f"no {a['item']} in the inventory")
        self.inventory[a["item"]] -= 1
        return {"placed": a["item"], "at": {"x": a["x"], "y": a["y"], "z": a["z"]}}

    def _eat(self, a: dict[str, Any]) -> dict[str, Any]:
        item = a.get("item") or "bread"
        if self.inventory.get(item, 0) < 1:
            raise ValueError(f"no {item} in the inventory")
        self.inventory[item] -= 1
        return {"ate": item, "food_before": 10, "food_after": 15}

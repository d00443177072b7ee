"""The synthetic day's world: a small simulation of Emil's surroundings and body.

:class:`SimWorld` holds what the bot would report (position, health, food, inventory, the
players online and where, hostiles close by, the time of day, rain) and answers each tool's
bridge action as the JS bot module would (:meth:`SimWorld.act`); :class:`SimBody` puts it
behind the bridge's interface (:class:`emil.world.tool.BotLike`), so the real tool classes run
against it. Seeded by the day (:mod:`emil.offline.synthetic`).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from emil.world.events import GameEvent
from emil.world.wire import ActionResult, Snapshot

__all__ = ["BOT", "DURATIONS", "FLOOD", "GIFTS", "HOSTILES", "ITEMS", "SMALL_TALK", "SimBody", "SimWorld", "pos", "resolve"]

BOT = "Emil"


ITEMS = {"wood": "oak_log", "logs": "oak_log", "stone": "cobblestone", "coal": "coal", "sand": "sand", "dirt": "dirt"}
GIFTS = ("bread", "apple", "torch", "cooked_beef", "iron_ingot", "carrot", "oak_planks")
SMALL_TALK = (
    "anyone seen diamonds around here?", "it's getting dark", "lol", "brb", "nice build!",
    "who took my pickaxe", "the river flooded again", "gg", "where is the village?", "ok",
)
FLOOD = ("hahaha", "spam spam spam", "look at me", "EMIL EMIL", "wheee", "hello hello hello", "asdfgh")
HOSTILES = ("zombie", "skeleton", "spider", "creeper")



def resolve(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never waits on anything (a tool against the simulated body)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a synthetic tool waited on something real")


def pos(x: float, y: float, z: float) -> dict[str, float]:
    return {"x": round(x, 1), "y": round(y, 1), "z": round(z, 1)}


class SimWorld:
    """The simulated world and Emil's body in it; answers the tools as the bot module would."""

    def __init__(self, rng: random.Random, start: float) -> None:
        self.rng = rng
        self.t = start
        self.start = start
        self.pos = pos(10.0, 64.0, -4.0)
        self.health, self.food = 20.0, 20.0
        self.inventory: Counter[str] = Counter({"stone_pickaxe": 1, "oak_planks": 12, "bread": 2, "torch": 8})
        self.held: str | None = "stone_pickaxe"
        self.following: str | None = None
        self.raining = False
        self.online: dict[str, dict[str, float]] = {}
        self.hostiles: list[tuple[str, float]] = []

    @property
    def ticks(self) -> int:
        # A Minecraft day is 20 minutes; the session starts at sunrise + 1000 ticks.
        return int(1000 + (self.t - self.start) * 20) % 24000

    def snapshot(self) -> dict[str, Any]:
        players: list[dict[str, Any]] = []
        for name, where in sorted(self.online.items()):
            d = math.dist((where["x"], where["y"], where["z"]), (self.pos["x"], self.pos["y"], self.pos["z"]))
            if d <= 48:
                players.append({"name": name, "distance": round(d, 1), "position": where})
        players.sort(key=lambda p: p["distance"])
        mobs = [{"name": n, "distance": round(d, 1), "hostile": True} for n, d in self.hostiles]
        near_home = math.dist((self.pos["x"], self.pos["z"]), (12, -7)) < 16
        blocks = [{"name": "oak_log", "count": 14, "nearest": {"x": 18, "y": 64, "z": 3}, "distance": 9.2}]
        if near_home:
            blocks.append({"name": "chest", "count": 1, "nearest": {"x": 12, "y": 64, "z": -7}, "distance": 3.1})
            blocks.append({"name": "crafting_table", "count": 1, "nearest": {"x": 9, "y": 64, "z": -6}, "distance": 2.4})
        return {
            "connected": True, "username": BOT, "position": dict(self.pos), "health": self.health,
            "food": self.food, "time_of_day": self.ticks, "dimension": "overworld", "raining": self.raining,
            "held": self.held, "standing_on": "grass_block", "inventory": dict(sorted(self.inventory.items())),
            "players": players[:10], "mobs": mobs[:10], "blocks": blocks, "job": None,
            "following": self.following, "reflexes": {},
        }

    def act(self, name: str, args: dict[str, Any]) -> ActionResult:
        rng = self.rng
        if name in ("say", "whisper", "look_at"):
            return ActionResult(ok=True, result={})
        if name == "go_to":
            target: dict[str, float] | None = self.online.get(str(args.get("player"))) if args.get("player") else None
            if args.get("player") and target is None:
                return ActionResult(ok=False, error=f"player {args.get('player')} is not in sight")
            if target is None:
                target = pos(float(args["x"]), float(args["y"]), float(args["z"]))
            self.pos = pos(target["x"] + 1.2, target["y"], target["z"] - 0.7)
            return ActionResult(ok=True, result={"position": dict(self.pos)})
        if name == "follow":
            self.following = str(args["player"])
            return ActionResult(ok=True, result={"following": self.following})
        if name == "stop":
            stopped = "follow" if self.following else None
            self.following = None
            return ActionResult(ok=True, result={"stopped": stopped})
        if name == "collect":
            block, count = str(args["block"]), int(args.get("count") or 1)
            if rng.random() < 0.12:
                return ActionResult(ok=False, error=f"no {block} within {args.get('max_distance', 32)} blocks")
            got = count if rng.random() < 0.8 else max(1, count - rng.randint(1, count))
            self.inventory[block] += got
            return ActionResult(ok=True, result={"dug": got, "collected": {block: got}})
        if name == "give":
            item, count, player = str(args["item"]), int(args.get("count") or 1), str(args["player"])
            if player not in self.online:
                return ActionResult(ok=False, error=f"player {player} is not in sight")
            have = self.inventory[item]
            if have <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            n = min(have, count)
            self.inventory[item] -= n
            short = f"only had {n}" if n < count else None
            return ActionResult(ok=True, result={"count": n, "gave": item, "to": player, **({"short": short} if short else {})})
        if name == "attack":
            mob = str(args["target"])
            won = rng.random() < 0.85
            if won:
                self.hostiles = [h for h in self.hostiles if h[0] != mob]
            return ActionResult(ok=True, result={"target": mob, "fought_s": round(rng.uniform(2, 9), 1),
                                                 "hits": rng.randint(2, 7), "defeated": won})
        if name == "flee":
            self.pos = pos(self.pos["x"] + 14, self.pos["y"], self.pos["z"] + 6)
            self.hostiles = []
            return ActionResult(ok=True, result={"fled_from": args.get("from") or "zombie", "position": dict(self.pos)})
        if name == "eat":
            food = next((f for f in ("cooked_beef", "bread", "apple", "carrot") if self.inventory[f] > 0), None)
            if food is None:
                return ActionResult(ok=False, error="nothing to eat")
            self.inventory[food] -= 1
            before, self.food = self.food, min(20.0, self.food + 6)
            return ActionResult(ok=True, result={"ate": food, "food_before": before, "food_after": self.food})
        if name == "equip":
            item = str(args["item"])
            if self.inventory[item] <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            self.held = item
            return ActionResult(ok=True, result={"equipped": item, "destination": args.get("destination", "hand")})
        if name == "place":
            item = str(args["item"])
            if self.inventory[item] <= 0:
                return ActionResult(ok=False, error=f"no {item} in the inventory")
            self.inventory[item] -= 1
            return ActionResult(ok=True, result={"placed": item, "at": {k: args[k] for k in ("x", "y", "z")}})
        if name == "dig":
            return ActionResult(ok=True, result={"dug": "dirt", "at": {k: args[k] for k in ("x", "y", "z")}})
        return ActionResult(ok=False, error=f"{name} is not simulated")


class SimBody:
    """The simulated Emil as the tool classes see a bot (:class:`emil.world.tool.BotLike`)."""

    def __init__(self, world: SimWorld) -> None:
        self.world = world

    async def act(self, name: str, args: Any = None, timeout: float = 60.0, *, job: bool = False) -> ActionResult:  # noqa: ASYNC109
        return self.world.act(name, dict(args or {}))

    async def snapshot(self) -> Snapshot:
        return Snapshot.model_validate(self.world.snapshot())

    @property
    def events(self) -> AsyncIterator[GameEvent]:
        """None from the body itself: the day feeds its happenings to perception directly."""
        return _no_events()

    async def abort(self) -> None:
        """Nothing runs beyond its call in the simulation."""


async def _no_events() -> AsyncIterator[GameEvent]:
    return
    yield


DURATIONS = {"go_to": (4, 20), "collect": (15, 60), "give": (3, 12), "attack": (2, 9), "flee": (3, 8),
               "eat": (1.6, 2), "follow": (0.2, 0.5)}
"""Game seconds a tool call takes (jobs return when done, as live); anything else ~0.2 s."""



"""Emil's questions about itself, answered from one status snapshot without a bridge action:
``inventory``, ``nearby``, ``status``."""

from __future__ import annotations

from typing import ClassVar

from emil.world.tool import (
    Outcome,
    Query,
    fmt_pos,
)
from emil.world.wire import Snapshot

__all__ = ["Inventory", "Nearby", "Status"]


class Inventory(Query):
    """List what you carry."""

    tool_name: ClassVar[str] = "inventory"

    def answer(self, snap: Snapshot) -> Outcome:
        text = "inventory: " + (", ".join(f"{v} {k}" for k, v in sorted(snap.inventory.items())) or "empty")
        if snap.held:
            text += f"; holding {snap.held}"
        return Outcome(True, text, dict(snap.inventory))


class Nearby(Query):
    """List players, mobs and notable blocks around you."""

    tool_name: ClassVar[str] = "nearby"

    def answer(self, snap: Snapshot) -> Outcome:
        players = ", ".join(f"{p['name']} {p['distance']}m" for p in snap.players) or "none"
        mobs = ", ".join(f"{m['name']}{' (hostile)' if m.get('hostile') else ''} {m['distance']}m" for m in snap.mobs) or "none"
        blocks = ", ".join(f"{b['name']} x{b['count']} nearest {fmt_pos(b.get('nearest'))}" for b in snap.blocks) or "nothing notable"
        data = snap.model_dump(mode="json", include={"players", "mobs", "blocks"})
        return Outcome(True, f"players: {players}; mobs: {mobs}; blocks: {blocks}", data)


class Status(Query):
    """Your health, food, position, time of day and what you are doing."""

    tool_name: ClassVar[str] = "status"

    def answer(self, snap: Snapshot) -> Outcome:
        text = (
            f"health {snap.health}/20, food {snap.food}/20, at {fmt_pos(snap.position)} "
            f"in the {snap.dimension}, time {snap.time_of_day}"
            + (", raining" if snap.raining else "")
            + (", asleep in bed" if snap.sleeping else "")
            + (f", busy with {snap.job}" if snap.job else "")
            + (f", following {snap.following}" if snap.following else "")
        )
        return Outcome(True, text, snap.model_dump(mode="json"))

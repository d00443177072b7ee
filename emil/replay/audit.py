"""``run_emil.py replay FILE --actions``: every action of a recording, by the player it served.

Each ``tool_result`` record names the players whose words were in its turn (``requested_by``)
and the row of the rule table that allowed or refused it (``rule``; docs/trust.md, "Audit"). An
action is listed under each of its requesters; an action nobody asked for (Emil on its own, a
hit, a hostile) under "(nobody)"; an action recorded without either field (a recording older
than the rule table) under "(not recorded)".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from emil.recording import ToolResultRecord

__all__ = ["NOBODY", "UNRECORDED", "Action", "actions_by_player", "format_actions"]

NOBODY = "(nobody)"
"""Where actions nobody's words asked for are listed."""
UNRECORDED = "(not recorded)"
"""Where actions of recordings older than the audit fields are listed."""


@dataclass(frozen=True)
class Action:
    """One tool call of the recording, as the audit lists it."""

    turn: int | None
    step: int
    name: str
    arguments: dict[str, Any] | None
    ok: bool
    refused: bool
    rule: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "step": self.step, "tool": self.name, "arguments": self.arguments,
                "ok": self.ok, "refused": self.refused, "rule": self.rule, "text": self.text}


def actions_by_player(records: Iterable[object]) -> dict[str, list[Action]]:
    """The recording's tool results, by requester (players in name order, "(nobody)" last)."""
    out: dict[str, list[Action]] = {}
    for r in records:
        if not isinstance(r, ToolResultRecord):
            continue
        action = Action(turn=r.turn, step=r.step, name=r.name, arguments=r.arguments, ok=r.ok,
                        refused=r.text.startswith("refused") or (isinstance(r.data, dict) and r.data.get("refused") is True),
                        rule=r.rule or "-", text=r.text)
        for who in r.requested_by or [NOBODY if r.rule else UNRECORDED]:
            out.setdefault(who, []).append(action)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] in (NOBODY, UNRECORDED), kv[0].lower(), kv[0])))


def format_actions(name: str, by_player: dict[str, list[Action]], *, as_json: bool = False) -> str:
    """The listing for one recording (text, or JSON with ``as_json``)."""
    if as_json:
        return json.dumps({"file": name, "players": {p: [a.to_json() for a in acts] for p, acts in by_player.items()}},
                          indent=2, ensure_ascii=False)
    seen = {id(a): a for acts in by_player.values() for a in acts}
    refused = sum(1 for a in seen.values() if a.refused)
    lines = [f"{name}: {len(seen)} action(s), {refused} refused; by the player whose words asked:"]
    if not by_player:
        lines.append("  (no actions)")
    for player, acts in by_player.items():
        n_refused = sum(1 for a in acts if a.refused)
        lines.append(f"  {player}: {len(acts)} action(s), {n_refused} refused")
        for a in acts:
            args = json.dumps(a.arguments, ensure_ascii=False, separators=(",", ":")) if a.arguments is not None else "-"
            verdict = "REFUSED" if a.refused else ("ok" if a.ok else "failed")
            text = a.text if len(a.text) <= 140 else a.text[:139] + "…"
            lines.append(f"    turn {a.turn if a.turn is not None else '-'}.{a.step} {a.name} {args[:120]}  "
                         f"{verdict} [{a.rule}]  {text}")
    return "\n".join(lines)

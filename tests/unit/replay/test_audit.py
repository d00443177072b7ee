"""replay --actions: every action under the players whose words asked for it, with its rule."""

from __future__ import annotations

import json

from emil.recording import ToolResultRecord
from emil.replay.audit import NOBODY, UNRECORDED, actions_by_player, format_actions


def _r(turn: int, name: str, who: list[str], rule: str, ok: bool = True, text: str = "done") -> ToolResultRecord:
    return ToolResultRecord(turn=turn, step=1, name=name, arguments={"a": 1}, ok=ok, text=text, requested_by=who, rule=rule)


def test_actions_are_listed_per_requester_with_their_rule() -> None:
    records = [
        _r(1, "take", ["carl"], "take.owned", ok=False, text="refused: take: only bob (the owner)..."),
        _r(2, "take", ["bob"], "take.owned"),
        _r(3, "attack", [], "attack.mob"),
        _r(4, "say", ["bob", "carl"], "chat.line"),
        _r(5, "say", [], ""),
        "not a tool result",
    ]
    by = actions_by_player(records)
    assert list(by) == ["bob", "carl", NOBODY, UNRECORDED]
    assert [a.rule for a in by["bob"]] == ["take.owned", "chat.line"]
    assert [(a.refused, a.rule) for a in by["carl"]] == [(True, "take.owned"), (False, "chat.line")]
    text = format_actions("s.jsonl", by)
    assert text.startswith("s.jsonl: 5 action(s), 1 refused") and "REFUSED [take.owned]" in text
    data = json.loads(format_actions("s.jsonl", by, as_json=True))
    assert data["players"]["carl"][0]["refused"] is True and data["players"][UNRECORDED][0]["rule"] == "-"


def test_old_recordings_load_without_the_audit_fields() -> None:
    old = ToolResultRecord.model_validate({"kind": "tool_result", "turn": 1, "name": "say", "ok": True, "text": "x"})
    assert old.requested_by == [] and old.rule == ""

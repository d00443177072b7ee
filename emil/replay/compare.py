"""Where today's code builds a different request than the recorded one, message by message."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["MessageChange", "RequestDiff", "describe_message", "diff_messages"]


def _key(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def describe_message(message: dict[str, Any], width: int = 48) -> str:
    """``role: first words`` of a message, for reports."""
    role = str(message.get("role", "?"))
    content = message.get("content")
    if not content and message.get("tool_calls"):
        names = [str((c.get("function") or {}).get("name", "?")) for c in message["tool_calls"]]
        content = "calls " + ", ".join(names)
    text = " ".join(str(content or "").split())
    return f"{role}: {text[: width - 1] + '…' if len(text) > width else text}"


@dataclass(frozen=True)
class MessageChange:
    """A run of messages that differ between the recorded and today's request."""

    op: Literal["changed", "added", "removed"]
    """``added``: only today's request has them; ``removed``: only the recorded one."""
    recorded: tuple[int, int]
    """Index range [start, end) in the recorded request's messages."""
    today: tuple[int, int]
    recorded_tokens: int
    today_tokens: int
    first: str
    """The first differing message, described (today's side unless removed)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "recorded": list(self.recorded),
            "today": list(self.today),
            "recorded_tokens": self.recorded_tokens,
            "today_tokens": self.today_tokens,
            "first": self.first,
        }


@dataclass(frozen=True)
class RequestDiff:
    """One step's recorded request against the request today's code built."""

    turn: int
    step: int
    recorded_messages: int
    today_messages: int
    recorded_predicted: int | None
    """What the recording's context manager predicted."""
    recorded_actual: int | None
    """What the server said (``usage.prompt_tokens``), when known."""
    today_tokens: int
    changes: tuple[MessageChange, ...]

    @property
    def identical(self) -> bool:
        return not self.changes

    @property
    def token_delta(self) -> int | None:
        """Today's prompt tokens minus the recorded prompt's (server count when known)."""
        base = self.recorded_actual if self.recorded_actual is not None else self.recorded_predicted
        return None if base is None else self.today_tokens - base

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "step": self.step,
            "recorded_messages": self.recorded_messages,
            "today_messages": self.today_messages,
            "recorded_predicted": self.recorded_predicted,
            "recorded_actual": self.recorded_actual,
            "today_tokens": self.today_tokens,
            "token_delta": self.token_delta,
            "identical": self.identical,
            "changes": [c.to_json() for c in self.changes],
        }


def diff_messages(
    recorded: Sequence[dict[str, Any]],
    today: Sequence[dict[str, Any]],
    *,
    recorded_tokens: Sequence[int],
    today_tokens: Sequence[int],
) -> tuple[MessageChange, ...]:
    """Runs of differing messages (difflib over exact message content), with their tokens."""
    matcher = difflib.SequenceMatcher(
        None, [_key(m) for m in recorded], [_key(m) for m in today], autojunk=False
    )
    changes: list[MessageChange] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        op: Literal["changed", "added", "removed"] = (
            "added" if tag == "insert" else "removed" if tag == "delete" else "changed"
        )
        first = describe_message(today[b0] if b1 > b0 else recorded[a0])
        changes.append(
            MessageChange(
                op, (a0, a1), (b0, b1),
                sum(recorded_tokens[a0:a1]), sum(today_tokens[b0:b1]), first,
            )
        )
    return tuple(changes)


TokenSplit = Callable[[Sequence[dict[str, Any]]], list[int]]
"""Tokens attributed to each message of a request (the manager's per-message block counts)."""

"""The slow reference for the manager's one fast path besides the block cache (tests only).

``PlainSizes`` sizes every trim-ladder candidate with a full count of the prompt, where the
manager's own sizes derive a one-turn step from the two turns involved. Swap it in with
``monkeypatch.setattr("emil.context.manager._Sizes", PlainSizes)``.
"""

from __future__ import annotations

from emil.context.history import History, Message, Turn
from emil.context.manager import ContextManager

__all__ = ["PlainSizes"]


class PlainSizes:
    """:class:`~emil.context.ladder.Sizes` that count every candidate in full."""

    def __init__(self, manager: ContextManager) -> None:
        self._manager = manager

    def measure(self, history: History) -> int:
        return self._manager.count(history)

    def swap(self, history: History, tokens: int, index: int, turn: Turn) -> tuple[History, int]:
        out = History((*history.turns[:index], turn, *history.turns[index + 1 :]), history.memory)
        return out, self.measure(out)

    def fold(self, history: History, tokens: int, memory: Message | None) -> tuple[History, int]:
        out = History(history.turns[1:], memory)
        return out, self.measure(out)

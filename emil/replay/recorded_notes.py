"""The pinned notes block during replay: what the recorded session sent, never today's store.

A session with memory sends its notes (emil.memory) as the message right after the system
prompt, re-rendered only at trims. Replay has no notes database of that moment, and must not
read today's: it serves the context manager the block the recorded request of the current
step carried, so a replay stays deterministic and compares like with like.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from emil.memory.render import NOTES_HEADER

__all__ = ["RecordedNotes", "notes_in"]


def notes_in(messages: Sequence[dict[str, Any]]) -> str | None:
    """The notes block of a request's messages (the user message right after the system)."""
    if len(messages) < 2 or messages[1].get("role") != "user":
        return None
    content = messages[1].get("content")
    return content if isinstance(content, str) and content.startswith(NOTES_HEADER) else None


class RecordedNotes:
    """A :class:`~emil.context.rungs.NotesSource` answering from recorded requests."""

    def __init__(self, messages: Sequence[dict[str, Any]] = ()) -> None:
        self.messages: Sequence[dict[str, Any]] = messages
        """The recorded request of the step being replayed (set by the replayer)."""

    def prepare(self) -> None:
        """Nothing to bring up to date: the recorded block is the block."""

    def text(self) -> str | None:
        return notes_in(self.messages)

"""Recorded completions as an LLM: the replay implementation of ``complete(request)``."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from emil.exceptions import EmilError
from emil.llm.types import ChatRequest, Completion
from emil.recording import CompletionRecord, Record

__all__ = ["RecordedLLM", "ReplayExhausted"]


class ReplayExhausted(EmilError):
    """A replay asked for more completions than the recording holds (it ended or was cut)."""


class RecordedLLM:
    """Answers each request with the next recorded completion, in recorded order.

    The answer does not depend on the request: replay asks the same questions in the same
    order as the session did, and what changed in the question is what replay reports. Every
    request received is kept in ``requests`` for that comparison.
    """

    def __init__(self, completions: Iterable[Completion | CompletionRecord]) -> None:
        self._queue: deque[Completion] = deque(
            c.to_completion() if isinstance(c, CompletionRecord) else c for c in completions
        )
        self.requests: list[ChatRequest] = []

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> RecordedLLM:
        """Every completion of a recording, in file order."""
        return cls(r for r in records if isinstance(r, CompletionRecord))

    @property
    def remaining(self) -> int:
        return len(self._queue)

    async def complete(self, request: ChatRequest) -> Completion:
        """The next recorded completion; ReplayExhausted when there is none left."""
        self.requests.append(request)
        if not self._queue:
            raise ReplayExhausted(
                f"request {len(self.requests)} has no recorded completion (the recording ends here)"
            )
        return self._queue.popleft()

"""Summaries in a budget sweep: the ``summarise`` rung with an injected summary writer, timed
like a served model.

A sweep (and the recall benchmark) runs the real :class:`~emil.memory.summariser.Summariser`
between turns, as the agent loop does. The model side is a :class:`SummaryModel` the tool
script chooses (tools/tune_budget.py and tools/bench_recall.py pass the double's text reducer
the vLLM-dialect double answers with, rules, not a model), called in-process; its usage is
counted in real tokens of the session's counter. A request takes the time the served model
would (prefill plus decode at the rates of :class:`SummaryTiming`): when the next turn of the
session starts sooner, the turn cancels the request, as live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from emil.context.history import History
from emil.context.manager import ContextManager
from emil.llm.types import ChatRequest, Completion, Usage
from emil.memory.summariser import Summariser
from emil.memory.summary import load_summary_prompt
from emil.model.tokens import TokenCounter
from emil.recording import SummaryRecord

__all__ = ["SummaryModel", "SummaryTiming", "SummaryWriter", "SweepSummaries"]

SummaryWriter = Callable[[ChatRequest], str]
"""The text that answers one summary request (:func:`emil.memory.summary.summary_request`)."""


@dataclass(frozen=True)
class SummaryTiming:
    """How long the served model takes for a summary (an assumption, not a measurement: set it
    to what the operator's server does; the double's defaults are no faster)."""

    max_tokens: int = 512
    """The ``summary_max_tokens`` setting."""
    prefill_tps: float = 4000.0
    decode_tps: float = 50.0


@dataclass(frozen=True)
class SummaryModel:
    """The model side of a sweep's summaries, chosen by the tool script."""

    write: SummaryWriter
    label: str
    """What writes the summaries, as reports name it (e.g. "the double's text reducer (extractive rules, not a model)")."""
    timing: SummaryTiming = field(default_factory=SummaryTiming)


class _Timed:
    """A :class:`SummaryModel` behind the ``LLM`` seam, with real token counts and the time a
    served model would take; a request longer than ``gap_s`` is cancelled by the next turn."""

    def __init__(self, counter: TokenCounter, model: SummaryModel) -> None:
        self.counter, self.timing, self.write = counter, model.timing, model.write
        self.gap_s = float("inf")
        self.scope: anyio.CancelScope | None = None

    async def complete(self, request: ChatRequest) -> Completion:
        prompt = sum(self.counter.count(str(m.get("content") or "")) + 4 for m in request.messages)
        content = self.write(request)
        out = min(self.counter.count(content), request.max_completion_tokens)
        seconds = prompt / self.timing.prefill_tps + out / self.timing.decode_tps
        if seconds > self.gap_s and self.scope is not None:
            self.scope.cancel()  # the next turn starts first
            await anyio.lowlevel.checkpoint()
        return Completion(content=content, finish_reason="stop", usage=Usage(prompt_tokens=prompt, completion_tokens=out))


class SweepSummaries:
    """One session's summariser in a sweep, and what it asked (its ``summary`` records)."""

    def __init__(self, counter: TokenCounter, model: SummaryModel, *, name: str = "Emil") -> None:
        self.records: list[SummaryRecord] = []
        self.llm = _Timed(counter, model)
        self.summariser = Summariser(
            prompt=load_summary_prompt(None, name=name, max_tokens=model.timing.max_tokens), name=name,
            max_tokens=model.timing.max_tokens,
            record=self.records.append, clock=lambda: 0.0,
        )

    async def between_turns(self, manager: ContextManager, history: History, gap_s: float) -> None:
        """The loop idles for ``gap_s`` game seconds: prepare, cancelled if the turn comes first."""
        self.llm.gap_s = gap_s
        with anyio.CancelScope() as scope:
            self.llm.scope = scope
            await manager.prepare(history, llm=self.llm)
        self.llm.scope = None

    def count(self, predicate: Callable[[SummaryRecord], bool] = lambda r: True) -> int:
        return sum(1 for r in self.records if predicate(r))

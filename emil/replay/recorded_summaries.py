"""The summarise rung during replay: the summaries the recorded session made, never a model's.

A session's ``summarise`` rung folds turns into lines the served model wrote between turns; a
``summary`` record keeps each answer with the keys of the turns it covers. Replay serves those
lines to today's rung (:class:`RecordedSummaries`), so a trim that folded a summary live folds
the same lines again and the replayed requests match the recorded ones. With ``--endpoint``,
:class:`SummaryJudge` asks a live model each recorded summary request again and sets its facts
beside the recorded ones: a real model's summaries judged on recorded situations.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from emil.context.history import History, Turn
from emil.context.ladder import Preparation
from emil.exceptions import EmilError
from emil.llm.types import LLM
from emil.memory.notes import Fact
from emil.memory.summary import Parsed, note_lines, parse_summary, summary_request, turn_key
from emil.recording import SummaryRecord

__all__ = ["RecordedSummaries", "SummaryJudge", "SummaryVerdict"]


class RecordedSummaries:
    """A :class:`~emil.context.rungs.SummarySource` answering from ``summary`` records."""

    def __init__(self, records: Iterable[SummaryRecord]) -> None:
        self._by_first: dict[str, list[SummaryRecord]] = {}
        for r in records:
            if r.outcome == "ready" and r.covers and r.lines:
                self._by_first.setdefault(r.covers[0], []).append(r)

    async def prepare(self, preparation: Preparation) -> None:
        """Nothing to ask: the recording holds the answers."""

    def ready(self, turns: Sequence[Turn]) -> tuple[int, Sequence[str]] | None:
        if not turns:
            return None
        for r in reversed(self._by_first.get(turn_key(turns[0]), [])):
            n = len(r.covers)
            if n <= len(turns) and [turn_key(t) for t in turns[:n]] == r.covers:
                return n, note_lines(r.lines)
        return None

    def used(self, count: int) -> None:
        """Nothing to write: the facts went to the recorded session's notes."""


@dataclass(frozen=True)
class SummaryVerdict:
    """One recorded summary request asked again of a live model: its facts beside the recorded."""

    turns: int
    """How many turns the summary covers."""
    recorded_outcome: str
    live_outcome: str
    """ready | invalid (with ``reason``) | failed."""
    reason: str = ""
    kept: int = 0
    """Recorded facts the live model also named."""
    dropped: int = 0
    """Recorded facts the live model left out."""
    new: int = 0
    """Facts only the live model named (grounded in the turns)."""
    invented: int = 0
    """Facts the live model named that the turns do not show (left out by the check)."""
    live_lines: int = 0
    live_completion_tokens: int | None = None
    recorded_completion_tokens: int | None = None
    live_latency_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _key(fact: dict[str, Any] | Fact) -> tuple[str, str, str, str]:
    f = fact if isinstance(fact, Fact) else Fact.model_validate(fact)
    return (f.about, f.subject.lower(), f.topic, f.detail.lower())


class SummaryJudge:
    """``replay --endpoint``: every recorded summary request, rebuilt from the replayed turns it
    covers, asked again of the live model; its answer checked like live and its facts set
    beside the recorded ones (kept, dropped, new, invented)."""

    def __init__(self, records: Iterable[SummaryRecord], live: LLM, *, prompt: str, name: str, max_tokens: int) -> None:
        self._pending = [r for r in records if r.covers and r.outcome in ("ready", "invalid")]
        self.live, self.prompt, self.name, self.max_tokens = live, prompt, name, max_tokens
        self.verdicts: list[SummaryVerdict] = []

    async def between_turns(self, history: History) -> None:
        """Ask for the recorded summaries whose turns the replayed history now starts with."""
        keys: list[str] | None = None
        for r in list(self._pending):
            if len(r.covers) > len(history.turns):
                continue
            keys = keys or [turn_key(t) for t in history.turns]
            if keys[: len(r.covers)] == r.covers:
                self._pending.remove(r)
                await self._ask(r, history.turns[: len(r.covers)])

    async def _ask(self, r: SummaryRecord, turns: Sequence[Turn]) -> None:
        request = summary_request(turns, prompt=self.prompt, name=self.name, max_tokens=self.max_tokens)
        started = time.perf_counter()
        base = SummaryVerdict(len(turns), r.outcome, "failed", recorded_completion_tokens=r.completion_tokens)
        try:
            completion = await self.live.complete(request)
        except EmilError as e:
            self.verdicts.append(replace(base, reason=str(e), live_latency_s=time.perf_counter() - started))
            return
        latency = time.perf_counter() - started
        tokens = completion.usage.completion_tokens if completion.usage else None
        parsed = parse_summary(completion.content, source=str(request.messages[1]["content"]))
        if not isinstance(parsed, Parsed):
            self.verdicts.append(replace(base, live_outcome="invalid", reason=parsed,
                                         live_completion_tokens=tokens, live_latency_s=latency))
            return
        recorded = {_key(f) for f in r.facts}
        live = {_key(f) for f in parsed.facts}
        self.verdicts.append(replace(
            base, live_outcome="ready", kept=len(recorded & live), dropped=len(recorded - live),
            new=len(live - recorded), invented=parsed.dropped_facts, live_lines=len(parsed.lines),
            live_completion_tokens=tokens, live_latency_s=latency,
        ))

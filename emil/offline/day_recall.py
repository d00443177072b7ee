"""The recall benchmark's runs (tools/bench_recall.py): a synthetic day with facts said in
conversation, through today's context manager per budget and memory setup; a restart in the
middle of the day; the retrieval time at the end of a day over an archive of tens of thousands
of lines.

Setups, side by side (:data:`SETUPS`):

- ``digest``: no notes, no summaries, no retrieval: the ladder's deterministic digest only;
- ``notes``: the pinned notes block (learned from events, refreshed at trims);
- ``notes+summaries``: the notes, and the summarise rung asking the summary writer the caller
  chose (tools/bench_recall.py: the double's text reducer, timed as a served model);
- ``all``: the notes, the summaries, and each turn's observation ending with the lines the
  archive recalls for it (``recall_tokens``): what Emil runs with by default.

Each runs twice: with the facts said, and the null run (the same day, the same probes, nothing
said), which must find (almost) none.

"In the prompt" means two things, both measured (:mod:`emil.offline.recall`): the day's **last
prompt** holds the fact's probe, or the prompt of a turn in which the fact's speaker **asks**
about it without the probe (its ``question``) holds it.

The restart: the day's first ``cut`` hours are played in a data_dir; a new session opens it as
Emil does at start (:func:`emil.memory.wiring.open_memory`): its first prompt (the notes block)
and the prompt of a first turn that asks (the notes block and the lines recalled into it).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.retrieval import Recollection, query_terms
from emil.memory.wiring import open_memory
from emil.model.tokens import TokenCounter
from emil.offline.facts import Wordings
from emil.offline.recall import Recall, asked_recall, recall
from emil.offline.simulate import BudgetPoint, simulate
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import BOT, SyntheticDay, day_trace, synthetic_day

__all__ = ["SETUPS", "RestartRecall", "Setup", "restart_recall", "retrieval_times", "run_day"]

Setup = Literal["digest", "notes", "notes+summaries", "all"]
SETUPS: tuple[Setup, ...] = ("digest", "notes", "notes+summaries", "all")


def run_day(day: SyntheticDay, budget: Budget, counter: TokenCounter, setup: Setup, *,
            summaries: SummaryModel | None = None, recall_tokens: int = 300) -> BudgetPoint:
    """One budget, one memory setup, over a generated day kept in a data_dir (see the module
    doc); ``summaries`` is the summary writer of the setups with summaries (required there)."""
    trace = day_trace(day)
    if setup == "digest":
        trace = replace(trace, steps=tuple(s for s in trace.steps if s.op != "notes"))
    with_summaries = setup in ("notes+summaries", "all")
    if with_summaries and summaries is None:
        raise ValueError(f"the {setup} setup needs a summary writer (summaries=)")
    with_recall = setup == "all"
    if with_recall and trace.archive is None:
        raise ValueError(f"the {setup} setup needs the day kept in a data_dir (its archive)")
    return simulate(trace, budget, counter, summaries=summaries if with_summaries else None,
                    recall_tokens=recall_tokens if with_recall else 0)


@dataclass(frozen=True)
class RestartRecall:
    """What a new session remembers of the session before it."""

    cut_hours: float
    first: Recall
    """The facts in its first prompt (the notes block)."""
    asked: Recall
    """The facts in the prompt of a first turn where the speaker asks (notes + recalled lines)."""
    notes_tokens: int


def restart_recall(
    *, cut_hours: float, seed: int, counter: TokenCounter, memory_tokens: int, recall_tokens: int = 300,
    plant: bool = True, per_kind: int = 3, data_dir: Path | None = None, wordings: Wordings = "main",
) -> RestartRecall:
    """Play ``cut_hours`` of the day in a data_dir, start a new session on it, and look for the
    facts said before the cut in its first prompt and in a first turn that asks about each."""
    with tempfile.TemporaryDirectory(prefix="emil-restart-") as scratch:
        folder = data_dir or Path(scratch)
        day = synthetic_day(cut_hours, seed=seed, data_dir=folder, memory_tokens=memory_tokens, plant=plant,
                            per_kind=per_kind, wordings=wordings)
        with open_memory(folder, bot_name=BOT, retention_days=0, durable=False) as memory:  # the next session's start
            text = memory.pinned(max_tokens=memory_tokens, tokens_of=counter.count).text()
            first = History(notes=Message.memory(text) if text else None)
            recollection = memory.recall(max_tokens=recall_tokens, tokens_of=counter.count) if recall_tokens else None
            at = day.turns[-1].t + 600.0 if day.turns else 0.0
            asked = asked_recall(first, day.planted, at=at, recollection=recollection)
    return RestartRecall(cut_hours, recall(first, day.planted), asked, counter.count(text or ""))


@dataclass(frozen=True)
class RetrievalTimes:
    """Retrieval per turn that searches at the end of a day, over an archive of ``lines`` lines."""

    lines: int
    turns: int
    median_ms: float
    p95_ms: float
    cpu_median_ms: float = 0.0
    cpu_p95_ms: float = 0.0
    """The same turns in CPU time of the searching thread: what the search costs without the
    waits of a shared machine (wall time is what a player would notice; both are printed)."""


def retrieval_times(day: SyntheticDay, counter: TokenCounter, *, lines: int, recall_tokens: int = 300,
                    horizon_s: float = 7200.0, measure_s: float = 3 * 3600.0) -> RetrievalTimes:
    """The day's last ``measure_s`` of turns that search (their chat has a content word: the
    others recall nothing and take no time), each recalling from an archive of at least
    ``lines`` lines: the day's own archive, and earlier days of the same server (its lines
    again, a day earlier each) until there are that many; ``horizon_s``: how much of the day the
    history still holds verbatim (2 h, about a 36k budget's). The two hours before are played
    unmeasured: at the end of a day the session has been recalling all day."""
    if day.data_dir is None:
        raise ValueError("the day must be kept in a data_dir (its archive)")
    with tempfile.TemporaryDirectory(prefix="emil-retrieval-") as scratch:
        source = Archive.open_existing(day.data_dir / ARCHIVE_FILE)
        try:
            own = source.recent(limit=10**9)
        finally:
            source.close()
        big = Archive.open(Path(scratch), retention_days=0, durable=False)
        try:
            days = 0
            while big.count() < lines or days == 0:
                big.import_lines([replace(line, t=line.t - days * 86400.0) for line in own])
                days += 1
            recollection = Recollection(big, max_tokens=recall_tokens, tokens_of=counter.count, bot_name=BOT)
            end = day.turns[-1].t if day.turns else 0.0
            seconds: list[float] = []
            cpu: list[float] = []
            for turn in day.turns:
                if turn.t < end - measure_s - 2 * 3600.0 or turn.topic is None:
                    continue
                searches = bool(query_terms(turn.topic, bot_name=BOT))
                started, started_cpu = time.perf_counter(), time.thread_time()
                recollection.block(turn.topic, since=turn.t - horizon_s, now=turn.t, turn_t=turn.t)
                if turn.t >= end - measure_s and searches:
                    seconds.append(time.perf_counter() - started)
                    cpu.append(time.thread_time() - started_cpu)
            total = big.count()
        finally:
            big.close()
    return RetrievalTimes(total, len(seconds), *_median_p95(seconds), *_median_p95(cpu))


def _median_p95(seconds: list[float]) -> tuple[float, float]:
    """Median and 95th percentile in milliseconds (0 when nothing was measured)."""
    ordered = sorted(seconds)
    if not ordered:
        return 0.0, 0.0
    return round(1000 * statistics.median(ordered), 3), round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3)


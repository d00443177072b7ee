"""The recall benchmark's runs: a synthetic day through today's context manager per budget and
memory setup, and a restart in the middle of the day (tools/bench_recall.py).

Three setups, side by side:

- ``digest``: no notes, no summaries: the ladder's deterministic digest only (memory before
  issue #13);
- ``notes``: the pinned notes block (learned from events, refreshed at trims), the digest;
- ``notes+summaries``: the notes, and the summarise rung asking the summary writer the caller
  chose (tools/bench_recall.py: the SCRIPTED one, timed as a served model) between turns.

The restart: the day's first ``cut`` hours are played with notes in a data_dir; a new session
opens that data_dir as Emil does at start (:func:`emil.memory.session.open_memory`) and its first
prompt's notes block is searched for the facts planted before the cut.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.memory.session import open_memory
from emil.model.tokens import TokenCounter
from emil.offline.recall import Recall, recall
from emil.offline.simulate import BudgetPoint, simulate
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import BOT, SyntheticDay, day_trace, synthetic_day

__all__ = ["SETUPS", "Setup", "restart_recall", "run_day"]

Setup = Literal["digest", "notes", "notes+summaries"]
SETUPS: tuple[Setup, ...] = ("digest", "notes", "notes+summaries")


def run_day(day: SyntheticDay, budget: Budget, counter: TokenCounter, setup: Setup, *,
            summaries: SummaryModel | None = None) -> BudgetPoint:
    """One budget, one memory setup, over a generated day (see the module doc); ``summaries``
    is the summary writer of ``notes+summaries`` (required there)."""
    trace = day_trace(day)
    if setup == "digest":
        trace = replace(trace, steps=tuple(s for s in trace.steps if s.op != "notes"))
    if setup == "notes+summaries" and summaries is None:
        raise ValueError("the notes+summaries setup needs a summary writer (summaries=)")
    summaries = summaries if setup == "notes+summaries" else None
    return simulate(trace, budget, counter, summaries=summaries)


@dataclass(frozen=True)
class RestartRecall:
    """What a new session's first prompt remembers of the session before it."""

    cut_hours: float
    players: Recall
    places: Recall
    notes_tokens: int


def restart_recall(
    *, cut_hours: float, seed: int, counter: TokenCounter, memory_tokens: int, data_dir: Path | None = None,
) -> RestartRecall:
    """Play ``cut_hours`` of the day with notes, start a new session on the same data_dir, and
    look for the planted player and place facts in its first prompt (the notes block)."""
    with tempfile.TemporaryDirectory(prefix="emil-restart-") as scratch:
        folder = data_dir or Path(scratch)
        day = synthetic_day(cut_hours, seed=seed, data_dir=folder, memory_tokens=memory_tokens)
        with open_memory(folder, bot_name=BOT) as memory:  # the next session's start
            text = memory.pinned(max_tokens=memory_tokens, tokens_of=counter.count).text()
    first = History(notes=Message.memory(text) if text else None)
    planted = day.planted
    return RestartRecall(
        cut_hours,
        recall(first, [f for f in planted if f.about == "player"]),
        recall(first, [f for f in planted if f.about == "place"]),
        counter.count(text or ""),
    )

"""One budget over one session: today's context manager assembles every request of a trace.

For one (window, output reserve, prompt budget) the real :class:`ContextManager` assembles
every request of the session in order, keeping the trimmed history it returns exactly as the
agent loop does, and :func:`simulate` measures what an operator feels (:class:`BudgetPoint`):
how often the ladder fires, how much it throws away, how far back Emil remembers (memory
horizon, game time), the peak prompt, requests that would not fit the window, and what trims
cost the prefix cache (every trim forces vLLM to prefill the rest of the prompt again). The
sweep over many budgets is :mod:`emil.offline.budget_sweep`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import anyio

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.incremental import IncrementalCounter
from emil.context.manager import ContextManager
from emil.context.rungs import RefreshNotes, Summarise
from emil.exceptions import BudgetError
from emil.memory.archive import Archive
from emil.memory.render import quoted_in
from emil.memory.retrieval import Recollection
from emil.memory.summary import note_lines
from emil.model.family import ModelFamily
from emil.model.resolve import family_for_recording
from emil.model.tokens import TokenCounter
from emil.offline.recall import asked_recall, recall
from emil.offline.summaries import SummaryModel, SweepSummaries
from emil.offline.trace import SessionTrace

__all__ = ["BudgetPoint", "ManagerFactory", "SharedCaches", "simulate"]


class _CharCounter:
    """Counts characters: with a budget scaled by N it is exactly "chars / N estimated tokens"."""

    name = "characters"
    special_tokens: frozenset[str] = frozenset()

    def count(self, text: str) -> int:
        return len(text)

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


_CHARS = _CharCounter()


class SharedCaches:
    """The exact counters shared by every manager of one sweep in one process.

    Each budget runs the same session through a fresh manager; with one shared
    :class:`IncrementalCounter` (its block cache is keyed by content, so what one budget counted
    holds for the next) every budget after the first counts almost nothing again. Changes
    speed, not results.
    """

    def __init__(self) -> None:
        self._counters: dict[tuple[int, str, bool, bool], IncrementalCounter] = {}

    def incremental(
        self,
        counter: TokenCounter,
        family: ModelFamily,
        enable_thinking: bool,
        preserve_thinking: bool,
    ) -> IncrementalCounter:
        assert family.template is not None, "a sweep counts with a local template"
        key = (id(counter), family.template().source, enable_thinking, preserve_thinking)
        found = self._counters.get(key)
        if found is None or found.counter is not counter:
            found = IncrementalCounter(
                counter, enable_thinking=enable_thinking,
                preserve_thinking=preserve_thinking, family=family,
            )
            self._counters[key] = found
        return found


@dataclass(frozen=True)
class BudgetPoint:
    """What one budget did to one session (or to several, summed)."""

    window: int
    output_reserve: int
    prompt_budget: int
    requests: int
    hours: float
    """Game time covered, from the first to the last request."""
    trims: int
    """Assemblies that trimmed (one batched trim can fire several rungs)."""
    trims_per_hour: float
    evicted_per_trim: float
    """Mean messages that left the verbatim history per trim (evicted, folded or rewritten)."""
    horizon_median_min: float | None
    """Median memory horizon over requests from the first trim on, minutes; None = never trimmed."""
    horizon_min_min: float | None
    """Shortest horizon from the first trim on (what Emil is sure to remember), minutes."""
    peak_prompt_tokens: int
    overflows: int
    """Requests whose prompt + output reserve exceed the window, or that could not fit at all."""
    append_only_share: float
    """Share of requests whose prompt starts with the whole previous prompt unchanged."""
    reprefill_tokens_per_hour: float
    """Tokens of already-seen history prefilled again because a trim changed the prefix."""
    seconds: float
    """Wall time of this simulation."""
    first_prompt_tokens: int = 0
    """The first request's prompt (system prompt + tool specs + one observation): no budget
    below it can work."""
    prefix_reuse: float = 0.0
    """Share of prompt tokens (after the first request) shared with the previous prompt."""
    planted: int = 0
    """Facts planted in the session (the synthetic day; 0 = recall not measured)."""
    found: dict[str, int] = field(default_factory=dict)
    """Planted facts recoverable from the last prompt, by where (emil.offline.recall.WHERE)."""
    summary_requests: int = 0
    """Requests of the summarise rung (0 when the sweep runs without summaries)."""
    summaries_used: int = 0
    summaries_cancelled: int = 0
    summary_prompt_tokens: int = 0
    summary_completion_tokens: int = 0
    summaries_cut: int = 0
    """Summaries whose lines were cut to ``summary_max_tokens``."""
    summary_max_line_tokens: int = 0
    """The longest summary as the memory note holds it (real tokens): never over the cap."""
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """Per kind of planted fact: [found in the last prompt, planted]."""
    asked_planted: int = 0
    """Facts with a question, asked at the end (0 = not measured)."""
    asked_found: dict[str, int] = field(default_factory=dict)
    """Facts in the prompt of a turn where their speaker asks about them (no probe), by where."""
    asked_by_kind: dict[str, list[int]] = field(default_factory=dict)
    recalled_turns: int = 0
    """Turns that got recalled lines (retrieval on)."""
    recall_tokens_per_turn: float = 0.0
    """Mean tokens of recalled lines added per turn (every turn counted)."""
    recall_ms_median: float = 0.0
    recall_ms_p95: float = 0.0
    """Wall time of retrieval per turn (search and rendering), over the day's last hour."""
    memory_tokens_per_request: float = 0.0
    """Mean prompt tokens that memory holds per request: the notes block, the memory note and
    the recalled lines still in the history."""

    @property
    def turns_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else float("inf")

    @property
    def recall(self) -> float | None:
        """Share of planted facts recoverable from the last prompt (None: none planted)."""
        return sum(self.found.values()) / self.planted if self.planted else None

    @property
    def asked(self) -> float | None:
        """Share of planted facts in the prompt of the turn that asks about them (None: not measured)."""
        return sum(self.asked_found.values()) / self.asked_planted if self.asked_planted else None

    def per_hour(self, value: float) -> float:
        return value / self.hours if self.hours > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["turns_per_s"] = round(self.turns_per_s, 1)
        out["recall"] = None if self.recall is None else round(self.recall, 4)
        out["asked"] = None if self.asked is None else round(self.asked, 4)
        out["summary_requests_per_hour"] = round(self.per_hour(self.summary_requests), 2)
        out["summary_requests_per_trim"] = round(self.summary_requests / self.trims, 3) if self.trims else 0.0
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetPoint:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


ManagerFactory = Callable[[Budget, SessionTrace], ContextManager]


def _text_tokens(counter: TokenCounter, message: Message) -> int:
    parts = [message.text, message.reasoning or ""]
    parts += [c.get("arguments", "") for c in message.tool_calls]
    return sum(counter.count(p) for p in parts if p)


class _TraceNotes:
    """The ``refresh_notes`` rung's source in a sweep: the block as the trace says it changed."""

    def __init__(self) -> None:
        self.latest: str | None = None

    def prepare(self) -> None:
        """The trace's blocks are rendered already."""

    def text(self) -> str | None:
        return self.latest


def simulate(
    trace: SessionTrace,
    budget: Budget,
    counter: TokenCounter,
    *,
    manager_factory: ManagerFactory | None = None,
    assume_chars_per_token: float | None = None,
    shared: SharedCaches | None = None,
    summaries: SummaryModel | None = None,
    recall_tokens: int = 0,
) -> BudgetPoint:
    """Assemble every request of ``trace`` under ``budget`` and measure the outcome.

    ``recall_tokens``: each turn's observation ends with the lines the trace's archive recalls
    for what the turn is about, within this bound, as the agent loop does (0 = no retrieval; a
    trace without an archive or topics: none either). With planted facts, the end of the trace
    also asks each fact's question in a turn of its own (:func:`emil.offline.recall.asked_recall`).

    ``summaries``: run the ``summarise`` rung between turns, with this summary writer timed as
    a served model (:mod:`emil.offline.summaries`); None = the digest only.

    ``assume_chars_per_token``: budget in *estimated* tokens (characters / this), as the harness
    in the field notes did, while ``counter`` stays the truth: peak and overflow are then the
    real sizes of what the estimate let through. (The manager counts characters against a
    budget scaled by the same factor: exactly chars / N, and still additive, so still fast.)

    ``shared``: caches to share with the other simulations of a sweep (see
    :class:`SharedCaches`); the default manager then uses them.

    The trace's pinned notes blocks go in as live: the first in the first prompt, later ones at
    the next trim (``refresh_notes``). With planted facts (the synthetic day), the point holds
    which the last prompt still has (:mod:`emil.offline.recall`).
    """
    return anyio.run(_simulate, trace, budget, counter, manager_factory, assume_chars_per_token, shared, summaries,
                     recall_tokens)


async def _simulate(
    trace: SessionTrace,
    budget: Budget,
    counter: TokenCounter,
    manager_factory: ManagerFactory | None,
    assume_chars_per_token: float | None,
    shared: SharedCaches | None,
    summaries: SummaryModel | None,
    recall_tokens: int = 0,
) -> BudgetPoint:
    started = time.perf_counter()
    archive = Archive.open_existing(trace.archive) if recall_tokens > 0 and trace.archive is not None else None
    try:
        return await _run(trace, budget, counter, manager_factory, assume_chars_per_token, shared, summaries,
                          recall_tokens, archive, started)
    finally:
        if archive is not None:
            archive.close()


async def _run(
    trace: SessionTrace,
    budget: Budget,
    counter: TokenCounter,
    manager_factory: ManagerFactory | None,
    assume_chars_per_token: float | None,
    shared: SharedCaches | None,
    summaries: SummaryModel | None,
    recall_tokens: int,
    archive: Archive | None,
    started: float,
) -> BudgetPoint:
    recollection = Recollection(archive, max_tokens=recall_tokens, tokens_of=counter.count) if archive is not None else None
    recall_times: list[tuple[float, float]] = []  # (game time, seconds)
    recalled_tokens: dict[int, int] = {}  # opening message id -> tokens of its recalled lines
    memory_tokens: list[int] = []
    family = family_for_recording(trace.header, model_family=trace.model_family)
    truth: IncrementalCounter | None = None
    managed_budget = budget
    manager_counter: TokenCounter = counter
    if assume_chars_per_token is not None:
        a = assume_chars_per_token
        truth = (
            IncrementalCounter(
                counter, enable_thinking=trace.enable_thinking,
                preserve_thinking=trace.preserve_thinking, family=family,
            )
            if shared is None
            else shared.incremental(
                counter, family, trace.enable_thinking, trace.preserve_thinking
            )
        )
        manager_counter = _CHARS
        managed_budget = Budget(
            window=round(budget.window * a), output_reserve=round(budget.output_reserve * a),
            margin=round(budget.margin * a), low_water=budget.low_water,
        )
    notes = _TraceNotes()
    summariser = SweepSummaries(counter, summaries) if summaries is not None else None
    if manager_factory is None:
        manager = ContextManager(
            manager_counter, managed_budget, trace.system_prompt, trace.tools,
            trace.enable_thinking, family=family, preserve_thinking=trace.preserve_thinking,
            incremental=None if shared is None else shared.incremental(
                manager_counter, family, trace.enable_thinking, trace.preserve_thinking
            ),
            rungs=[RefreshNotes(notes), Summarise(summariser.summariser if summariser else None)],
        )
    else:
        manager = manager_factory(managed_budget, trace)
    history = History()
    last_event: float | None = None
    last_sent: History | None = None
    shared_tokens = prompt_tokens = 0
    have_previous = False
    arrived: list[Message] = []  # messages since the previous request
    requests = trims = evicted = overflows = appends = compared = peak = 0
    first_tokens = 0
    reprefill = 0
    horizons: list[float] = []
    trimmed_once = False
    first_now: float | None = None
    last_now: float | None = None
    for step in trace.steps:
        if step.op == "notes":
            notes.latest = step.text
            if not requests:  # the block the session started with
                history = replace(history, notes=Message.memory(step.text) if step.text else None)
            continue
        if step.op != "request":
            assert step.message is not None
            if step.op == "turn" or not history.turns:
                if summariser is not None and history.turns:
                    start = step.message.event_time
                    gap = start - last_event if start is not None and last_event is not None else float("inf")
                    await summariser.between_turns(manager, history, gap)
                message = step.message
                if recollection is not None and step.topic is not None and message.event_time is not None:
                    t = message.event_time
                    block = recollection.block(step.topic, since=history.oldest_event_time(), now=t, turn_t=t,
                                               pinned=quoted_in(history.notes.content if history.notes else None))
                    recall_times.append((t, recollection.last_seconds))
                    if block:
                        message = message.with_changes(content=f"{message.content}\n\n{block}")
                        recalled_tokens[message.id] = counter.count(block)
                history = history.start_turn(message)
                arrived.append(message)
                if message.event_time is not None:
                    last_event = message.event_time
                continue
            history = history.append(step.message)
            if step.message.event_time is not None:
                last_event = step.message.event_time
            arrived.append(step.message)
            continue
        requests += 1
        now = step.now
        if now is not None:
            first_now = now if first_now is None else first_now
            last_now = now
        before = history
        try:
            assembly = manager.assemble(history, now=now)
        except BudgetError:
            overflows += 1
            have_previous = False
            continue
        history = last_sent = assembly.history
        if recollection is not None or history.notes is not None or history.memory is not None:
            memory_tokens.append(_memory_tokens(manager, history, recalled_tokens))
        if assembly.trims:
            trims += 1
            trimmed_once = True
            kept = {m.id for m in history.messages()}
            evicted += sum(1 for m in before.messages() if m.id not in kept)
        tokens = assembly.predicted_tokens
        if truth is not None:
            # What the estimate let through, in real tokens of the served model.
            tokens = truth.count(manager.sequence(assembly.history), trace.tools or None)
        peak = max(peak, tokens)
        first_tokens = first_tokens or tokens
        if tokens + budget.output_reserve > budget.window:
            overflows += 1
        if have_previous:
            compared += 1
            shared_tokens += assembly.shared_prefix_tokens
            prompt_tokens += assembly.predicted_tokens
            if assembly.extends_previous:
                appends += 1
            else:
                # Everything after the shared prefix is prefilled again; the part of it that
                # is new since the last request would have been prefilled anyway.
                # (Counted only here: nearly every request appends, and counting every message's
                # text was a third of the tokenising of a cold sweep.)
                new_tokens = sum(_text_tokens(counter, m) for m in arrived)
                reprefill += max(0, tokens - assembly.shared_prefix_tokens - new_tokens)
        have_previous = True
        arrived.clear()
        if trimmed_once and now is not None and assembly.horizon_s is not None:
            horizons.append(assembly.horizon_s)
    hours = ((last_now - first_now) / 3600.0) if first_now is not None and last_now is not None else 0.0
    per_hour = 1.0 / hours if hours > 0 else 0.0
    # Recall from the last prompt that was sent: none sent (every request overflowed), none held.
    found = recall(last_sent, trace.planted, now=last_now) if trace.planted and last_sent is not None else None
    asked = (asked_recall(last_sent, trace.planted, at=last_now + 60.0, recollection=recollection)
             if trace.planted and last_sent is not None and last_now is not None else None)
    records = summariser.records if summariser is not None else []
    ready = [r for r in records if r.outcome == "ready"]
    end = max((t for t, _ in recall_times), default=0.0)
    late = sorted(s for t, s in recall_times if t >= end - 3600.0)
    return BudgetPoint(
        window=budget.window,
        output_reserve=budget.output_reserve,
        prompt_budget=budget.prompt_budget,
        requests=requests,
        hours=round(hours, 4),
        trims=trims,
        trims_per_hour=round(trims * per_hour, 2),
        evicted_per_trim=round(evicted / trims, 1) if trims else 0.0,
        horizon_median_min=round(statistics.median(horizons) / 60, 2) if horizons else None,
        horizon_min_min=round(min(horizons) / 60, 2) if horizons else None,
        peak_prompt_tokens=peak,
        first_prompt_tokens=first_tokens,
        overflows=overflows,
        append_only_share=round(appends / compared, 4) if compared else 1.0,
        reprefill_tokens_per_hour=round(reprefill * per_hour, 1),
        seconds=time.perf_counter() - started,
        prefix_reuse=round(shared_tokens / prompt_tokens, 4) if prompt_tokens else 1.0,
        planted=len([f for f in trace.planted if last_now is None or f.t <= last_now]) if trace.planted else 0,
        found=dict(found.found) if found else {},
        summary_requests=len(records),
        summaries_used=summariser.summariser.stats.used if summariser is not None else 0,
        summaries_cancelled=sum(r.outcome == "cancelled" for r in records),
        summary_prompt_tokens=sum(r.prompt_tokens or 0 for r in records),
        summary_completion_tokens=sum(r.completion_tokens or 0 for r in records),
        summaries_cut=sum(r.reason.startswith("cut to") for r in ready),
        summary_max_line_tokens=max((counter.count("\n".join(note_lines(r.lines))) for r in ready), default=0),
        by_kind={k: list(v) for k, v in found.by_kind.items()} if found else {},
        asked_planted=asked.planted if asked else 0,
        asked_found=dict(asked.found) if asked else {},
        asked_by_kind={k: list(v) for k, v in asked.by_kind.items()} if asked else {},
        recalled_turns=len(recalled_tokens),
        recall_tokens_per_turn=round(sum(recalled_tokens.values()) / len(recall_times), 1) if recall_times else 0.0,
        recall_ms_median=round(1000 * statistics.median(late), 3) if late else 0.0,
        recall_ms_p95=round(1000 * late[min(len(late) - 1, int(0.95 * len(late)))], 3) if late else 0.0,
        memory_tokens_per_request=round(statistics.mean(memory_tokens), 1) if memory_tokens else 0.0,
    )


def _memory_tokens(manager: ContextManager, history: History, recalled: dict[int, int]) -> int:
    """Prompt tokens that memory holds in ``history``: the notes block, the memory note, and the
    recalled lines of the turns still there."""
    inc = manager.incremental
    held = sum(inc.message_tokens(m) for m in (history.notes, history.memory) if m is not None)
    return held + sum(recalled.get(turn[0].id, 0) for turn in history.turns)



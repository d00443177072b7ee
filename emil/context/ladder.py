"""The trim ladder as data: an ordered list of rung objects, cheapest loss first.

A :class:`Rung` is one class with one job: a ``name``, :meth:`Rung.apply` (what it does to the
history) and optionally an async :meth:`Rung.prepare` run between turns. :func:`run_ladder`
applies the rungs in order through a :class:`Trim`, which measures every candidate exactly,
keeps it only if it frees tokens, stops each rung at the low-water mark (the hard budget for a
``hard`` rung) and records one :class:`TrimRecord` per rung that freed tokens. ``apply`` is
synchronous and does no I/O: it runs inside ``assemble``, inside the overflow recovery. Work
that needs the model happens in ``prepare``; ``apply`` uses what is ready by then. The
built-in rungs, their registry and the checks on a configured order are in ``rungs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from emil.config.settings import DEFAULT_RUNGS
from emil.context.history import History, Message, Turn
from emil.llm.types import LLM

__all__ = ["DEFAULT_RUNGS", "LadderConfig", "Preparation", "Rung", "Trim", "TrimRecord", "run_ladder"]


class TrimRecord(BaseModel):
    """What one rung of one trim did; also the recording's ``trim`` record (the loop stamps
    ``turn`` and writes it as it is)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal["trim"] = "trim"
    t: float = Field(default_factory=time.time)
    """Unix time of the trim (the ``now`` the prompt was assembled at)."""
    turn: int | None = None
    """The agent turn it happened in (None inside the context manager)."""
    rung: str = ""
    messages_touched: int = 0
    """History messages the rung rewrote or removed (an evicted memory note counts one)."""
    tokens_freed: int = 0
    """Negative when the rung grew the prompt (``refresh_notes`` with new notes)."""
    horizon_after_s: float | None = None
    """Age of the oldest game event still held verbatim after the rung."""
    tokens_before: int | None = None
    """Prompt tokens before and after the rung (None in recordings older than these fields)."""
    tokens_after: int | None = None


@dataclass(frozen=True)
class LadderConfig:
    """The rung order and the knobs of the built-in rungs; defaults suit Emil's results."""

    rungs: tuple[str, ...] = DEFAULT_RUNGS
    elide_over_tokens: int = 160
    """Tool results bigger than this (in tokens) are elided."""
    memory_max_tokens: int = 1200
    """The memory note rolls: its oldest lines drop beyond this size."""


class Trim:
    """One run of the ladder: the history being trimmed, its exact size, and the one way a rung
    changes it, :meth:`try_history` (and its shorthands), kept only if it frees tokens."""

    def __init__(
        self, history: History, tokens: int, measure: Callable[[History], int], *, target: int,
        ceiling: int, now: float, config: LadderConfig, tokens_of: Callable[[str], int],
    ) -> None:
        self.history, self.tokens, self._measure = history, tokens, measure
        self.target = target
        """Where the running rung stops: the low-water mark, or ``ceiling`` for a hard rung."""
        self.ceiling, self.now, self.config = ceiling, now, config
        self.tokens_of = tokens_of
        """Exact tokens of a text (stub and memory-note sizes)."""
        self.touched = 0

    @property
    def over(self) -> bool:
        return self.tokens > self.target

    def try_history(self, candidate: History) -> bool:
        """Make ``candidate`` the trimmed history if it is smaller (measured exactly). Its
        oldest status is shown whole first: a rung that removed the statuses before it removed
        what its change was read against (:meth:`History.status_based`)."""
        candidate = candidate.status_based()
        tokens = self._measure(candidate)
        if tokens >= self.tokens:
            return False
        self._take(candidate, tokens)
        return True

    def take(self, candidate: History) -> None:
        """Make ``candidate`` the history whatever its size: a rung that updates rather than
        shrinks (``refresh_notes``); the rungs after it trim what it added."""
        candidate = candidate.status_based()
        self._take(candidate, self._measure(candidate))

    def _take(self, candidate: History, tokens: int) -> None:
        # Touched: the messages of the turns it replaced or dropped that it does not keep.
        old, new = set(map(id, self.history.turns)), set(map(id, candidate.turns))
        kept = {id(m) for t in candidate.turns if id(t) not in old for m in t}
        self.touched += sum(id(m) not in kept for t in self.history.turns if id(t) not in new for m in t)
        self.touched += self.history.memory is not None and candidate.memory is None
        self.touched += self.history.notes is not candidate.notes
        self.history, self.tokens = candidate, tokens

    def try_swap(self, index: int, turn: Turn) -> bool:
        """Replace ``turns[index]`` with ``turn`` if that frees tokens."""
        turns = self.history.turns
        return self.try_history(replace(self.history, turns=(*turns[:index], turn, *turns[index + 1 :])))

    def try_fold(self, memory: Message | None) -> bool:
        """Drop the oldest turn and make ``memory`` the memory note, if that frees tokens."""
        return self.try_history(replace(self.history, turns=self.history.turns[1:], memory=memory))


@dataclass(frozen=True)
class Preparation:
    """What a rung's between-turns step sees: the history the next turn starts from, the budget
    and low-water mark the next trim trims to, the ladder's config, exact counters, and the
    served model."""

    history: History
    budget: int
    target: int
    config: LadderConfig
    measure: Callable[[History], int]
    tokens_of: Callable[[str], int]
    llm: LLM | None = None
    """The served model's client (a short request, e.g. a summary); None offline, where a rung
    that needs it prepares nothing and its fallback applies."""

    @cached_property
    def tokens(self) -> int:
        """Exact prompt tokens of :attr:`history` (counted when first asked)."""
        return self.measure(self.history)


class Rung:
    """One rung of the trim ladder: subclass it, set ``name``, implement :meth:`apply`. Built
    once per context manager, so it may keep state across trims (what :meth:`prepare` made)."""

    name: ClassVar[str] = ""
    """The name in ``trim_rungs`` and in trim records."""
    hard: ClassVar[bool] = False
    """Trims only above the hard budget, not down to the low-water mark."""
    required: ClassVar[str] = ""
    """Non-empty: why a ladder without this rung cannot guarantee that a prompt fits."""
    last: ClassVar[bool] = False
    """Must be the last rung."""

    def apply(self, trim: Trim) -> None:
        """Shrink ``trim.history`` while ``trim.over``, through ``trim.try_*``."""
        raise NotImplementedError

    async def prepare(self, preparation: Preparation) -> None:
        """Between turns, off the hot path: make ready what :meth:`apply` will use at the next
        trim (it may await the model; a turn that starts cancels it)."""


def run_ladder(
    history: History, rungs: Sequence[Rung], measure: Callable[[History], int], *, target: int,
    ceiling: int | None = None, tokens: int | None = None, now: float | None = None,
    config: LadderConfig | None = None, tokens_of: Callable[[str], int],
) -> tuple[History, list[TrimRecord], int]:
    """Trim ``history`` with ``rungs`` in order until ``measure`` (its exact prompt tokens; the
    size ``tokens`` when already known) is at or under ``target``; ``hard`` rungs stop at
    ``ceiling``, the hard budget; ``tokens_of`` counts a text exactly (stubs, memory notes). Returns the trimmed history, one record per rung that freed
    tokens, and the final size: as small as the ladder can make it if it cannot reach the
    target (the caller decides whether that fits)."""
    now = time.time() if now is None else now
    ceiling = target if ceiling is None else ceiling
    trim = Trim(
        history, measure(history) if tokens is None else tokens, measure, target=target,
        ceiling=ceiling, now=now, config=config or LadderConfig(), tokens_of=tokens_of,
    )
    records: list[TrimRecord] = []
    for rung in rungs:
        trim.target = max(target, ceiling) if rung.hard else target
        if not trim.over:
            continue
        before, trim.touched = trim.tokens, 0
        rung.apply(trim)
        if trim.touched:
            records.append(TrimRecord(
                t=now, rung=rung.name, messages_touched=trim.touched, tokens_freed=before - trim.tokens,
                horizon_after_s=trim.history.horizon(now), tokens_before=before, tokens_after=trim.tokens,
            ))
    return trim.history, records, trim.tokens

"""The trim ladder as data: an ordered list of rung objects, cheapest loss first.

A :class:`Rung` is one class with one job (its ``name``, what :meth:`Rung.apply` does to the
history, and optionally an async :meth:`Rung.prepare` run between turns). :func:`run_ladder`
applies the rungs in order to a :class:`Trim`, which measures every step exactly, keeps a step
only if it makes the prompt smaller, stops each rung at the target (the low-water mark; the
hard budget for a rung marked ``hard``) and writes one :class:`TrimRecord` per rung that freed
tokens. The built-in rungs, their registry and the checks on a configured order are in
:mod:`emil.context.rungs`.

``apply`` is synchronous and asks nothing of the outside world: it runs inside ``assemble``,
which runs inside the overflow recovery. Work that needs the model (a written summary) happens
in ``prepare``, between turns, and ``apply`` only uses what is ready by then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from emil.context.history import History, Message, Turn

__all__ = [
    "DEFAULT_RUNGS",
    "LadderConfig",
    "Preparation",
    "Rung",
    "Trim",
    "TrimRecord",
    "run_ladder",
]

DEFAULT_RUNGS: tuple[str, ...] = (
    "drop_reasoning", "collapse_status", "elide_results", "fold", "evict", "cut_newest",
)


class TrimRecord(BaseModel):
    """What one rung of one trim did; also the recording's ``trim`` record (one type for both:
    the loop stamps ``turn`` and writes it as it is)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal["trim"] = "trim"
    t: float = Field(default_factory=time.time)
    """Unix time of the trim (the ``now`` the prompt was assembled at)."""
    turn: int | None = None
    """The agent turn it happened in (set by the loop; None inside the context manager)."""
    rung: str = ""
    messages_touched: int = 0
    """Messages of the history the rung rewrote or removed (folded turns count, the memory
    note they went into does not; a memory note evicted counts one)."""
    tokens_freed: int = 0
    horizon_after_s: float | None = None
    """Age of the oldest game event still held verbatim after the rung."""
    tokens_before: int | None = None
    """Prompt tokens before and after the rung (None in recordings older than these fields)."""
    tokens_after: int | None = None


@dataclass(frozen=True)
class LadderConfig:
    """The rung order and the knobs of the built-in rungs; defaults suit Emil's results."""

    rungs: tuple[str, ...] = DEFAULT_RUNGS
    """Rung names in the order they run (see :mod:`emil.context.rungs` for the checks)."""
    elide_over_tokens: int = 160
    """Tool results bigger than this (in tokens) are elided (``elide_results``, ``cut_newest``)."""
    memory_max_tokens: int = 1200
    """The memory note rolls: its oldest lines drop beyond this size."""


class Trim:
    """One run of the ladder: the history being trimmed, its exact size, and the only way a
    rung changes it: :meth:`try_history` (and its shorthands), kept only if it frees tokens."""

    def __init__(
        self,
        history: History,
        tokens: int,
        measure: Callable[[History], int],
        *,
        target: int,
        ceiling: int,
        now: float,
        config: LadderConfig,
        tokens_of: Callable[[str], int],
    ) -> None:
        self.history = history
        self.tokens = tokens
        self.target = target
        """Where this rung stops: the low-water mark, or the hard budget for a ``hard`` rung."""
        self.ceiling = ceiling
        self.now = now
        self.config = config
        self.tokens_of = tokens_of
        """Exact tokens of a text (stub and memory-note sizes)."""
        self.touched = 0
        self._measure = measure

    @property
    def over(self) -> bool:
        """True while the prompt is above this rung's target."""
        return self.tokens > self.target

    def try_history(self, candidate: History) -> bool:
        """Make ``candidate`` the trimmed history if it is smaller (measured exactly)."""
        tokens = self._measure(candidate)
        if tokens >= self.tokens:
            return False
        # Touched: messages of the history that the candidate no longer holds as they were.
        kept = set(map(id, candidate.messages()))
        self.touched += sum(1 for m in self.history.messages() if id(m) not in kept)
        if self.history.memory is not None and candidate.memory is None:
            self.touched += 1
        self.history, self.tokens = candidate, tokens
        return True

    def try_swap(self, index: int, turn: Turn) -> bool:
        """Replace ``turns[index]`` with ``turn`` if that frees tokens."""
        turns = self.history.turns
        return self.try_history(History((*turns[:index], turn, *turns[index + 1 :]), self.history.memory))

    def try_fold(self, memory: Message | None) -> bool:
        """Drop the oldest turn and make ``memory`` the memory note, if that frees tokens."""
        return self.try_history(History(self.history.turns[1:], memory))


@dataclass(frozen=True)
class Preparation:
    """What a rung's between-turns step sees: the history as the next turn will find it, its
    exact size, and the budget and low-water mark the next trim will trim to."""

    history: History
    tokens: int
    budget: int
    target: int
    measure: Callable[[History], int]
    tokens_of: Callable[[str], int]


class Rung:
    """One rung of the trim ladder; subclass it, set ``name``, implement :meth:`apply`.

    A rung is built once per context manager with the ladder's config, so it may keep state
    across trims (e.g. what :meth:`prepare` made ready).
    """

    name: ClassVar[str] = ""
    """The name used in ``trim_rungs`` and in trim records."""
    hard: ClassVar[bool] = False
    """Trim only above the hard budget, not down to the low-water mark (the turn in progress:
    what it loses are actions the model would take again)."""
    required: ClassVar[str] = ""
    """Non-empty: why a ladder without this rung cannot guarantee that a prompt fits."""
    last: ClassVar[bool] = False
    """Must be the last rung of the ladder."""

    def __init__(self, config: LadderConfig) -> None:
        self.config = config

    def apply(self, trim: Trim) -> None:
        """Shrink ``trim.history`` while ``trim.over``, through ``trim.try_*``; synchronous and
        free of I/O (it runs inside the overflow recovery)."""
        raise NotImplementedError

    async def prepare(self, preparation: Preparation) -> None:
        """Between turns, off the hot path: make ready what :meth:`apply` will use at the next
        trim (it may await the model; a turn that starts cancels it)."""
        return None


def run_ladder(
    history: History,
    rungs: Sequence[Rung],
    measure: Callable[[History], int],
    *,
    target: int,
    ceiling: int | None = None,
    tokens: int | None = None,
    now: float | None = None,
    config: LadderConfig | None = None,
    tokens_of: Callable[[str], int] = lambda text: len(text) // 3,
) -> tuple[History, list[TrimRecord], int]:
    """Trim ``history`` with ``rungs`` in order until ``measure`` (exact prompt tokens) says it is
    at or under ``target``.

    ``ceiling`` is the hard budget (default ``target``), where ``hard`` rungs stop. ``tokens``
    is the size of ``history`` when already known. Returns the trimmed history, one record per
    rung that freed tokens, and the final size; if the last rung cannot reach the target the
    result is as small as the ladder can make it, and the caller decides whether it fits.
    """
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
        if trim.touched and trim.tokens < before:
            records.append(
                TrimRecord(
                    t=now, rung=rung.name, messages_touched=trim.touched,
                    tokens_freed=before - trim.tokens, horizon_after_s=trim.history.horizon(now),
                    tokens_before=before, tokens_after=trim.tokens,
                )
            )
    return trim.history, records, trim.tokens

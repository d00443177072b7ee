"""The ``summarise`` rung's source: summaries the served model writes between turns.

:meth:`Summariser.prepare` runs in the ladder's between-turns step (never inside ``assemble``
or the overflow recovery; a turn that starts cancels it). When the prompt is within about two
turns of the budget, it picks the oldest turns the next trim will fold to reach the low-water
mark, and asks the served model once to summarise them (:mod:`emil.memory.summary`). The
checked answer waits for that trim: :meth:`Summariser.ready` hands its lines to the rung only
if the history still starts with exactly those turns. So a summary is made per low-water trim,
and between trims the prompt stays append-only.

At most one request per trim: once asked (answered, refused, failed or cancelled by a turn),
the summariser waits until the oldest turn changes, that is until a trim happened. Whatever has
no summary ready is folded by the ``fold`` rung's deterministic digest: the endpoint busy or
slow, a turn that came first, an answer that is not valid, or lines that do not free tokens. Every request ends in one ``summary`` record (its outcome, lines, facts,
tokens), so a replay serves the same lines (:mod:`emil.replay.recorded_summaries`). The facts of a
summary the rung used go to the notes store (:meth:`MemoryStore.facts_from_summary`) at the
next preparation, never inside a trim.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import anyio

from emil.context.history import Turn
from emil.context.ladder import Preparation
from emil.exceptions import EmilError
from emil.memory.notes import Fact
from emil.memory.store import MemoryStore
from emil.memory.summary import (
    Parsed,
    cap_lines,
    note_lines,
    parse_summary,
    summary_request,
    turn_key,
)
from emil.recording import SummaryRecord

__all__ = ["Summariser", "SummaryStats"]

_log = logging.getLogger("emil.memory")

_AHEAD_TURNS = 2
"""A summary is asked for when the prompt is this many (recent, average) turns from the budget."""
_RECENT = 8


@dataclass(frozen=True)
class _Ready:
    keys: tuple[str, ...]
    lines: tuple[str, ...]
    facts: tuple[Fact, ...]


@dataclass
class SummaryStats:
    """What the summariser asked and got (for benchmarks and the session summary)."""

    requests: int = 0
    ready: int = 0
    used: int = 0
    failed: int = 0
    cancelled: int = 0
    cut: int = 0
    """Answers whose lines were longer than the cap and were cut to it."""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Summariser:
    """Asks the served model for summaries of the oldest turns (see the module doc).

    ``prompt``: the summary instructions (:func:`~emil.memory.summary.load_summary_prompt`);
    ``store``: where the facts of used summaries go (None: nowhere); ``record``: where each
    ``summary`` record goes (the session's recorder); ``neutralise``: the served vocabulary's
    special-token breaker for the turns' untrusted text.
    """

    def __init__(
        self,
        *,
        prompt: str,
        name: str = "Emil",
        max_tokens: int = 512,
        timeout_s: float = 60.0,
        store: MemoryStore | None = None,
        record: Callable[[SummaryRecord], None] | None = None,
        neutralise: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.prompt, self.name, self.max_tokens, self.timeout_s = prompt, name, max_tokens, timeout_s
        self.store, self.record, self.neutralise, self.clock = store, record, neutralise, clock
        self.stats = SummaryStats()
        self._ready: _Ready | None = None
        self._applied: list[_Ready] = []
        self._asked: str | None = None
        """The oldest turn's key when the model was last asked (one request per trim)."""
        self._failed_once = False

    # -- the rung's side (synchronous, no I/O) -------------------------------------------------------

    def ready(self, turns: Sequence[Turn]) -> tuple[int, Sequence[str]] | None:
        """Lines for the ``n`` oldest of ``turns``, if a summary of exactly those is ready."""
        r = self._ready
        if r is None or len(r.keys) > len(turns):
            return None
        if tuple(turn_key(t) for t in turns[: len(r.keys)]) != r.keys:
            return None
        return len(r.keys), r.lines

    def used(self, count: int) -> None:
        """The rung folded the summary's turns: its facts are written at the next preparation."""
        if self._ready is not None and len(self._ready.keys) == count:
            self._applied.append(self._ready)
            self._ready = None
            self.stats.used += 1

    # -- between turns -------------------------------------------------------------------------------

    async def prepare(self, p: Preparation) -> None:
        """Write the facts of used summaries, then ask for the next one if a trim is near."""
        self._write_facts()
        if p.llm is None or self.max_tokens <= 0:
            return
        turns = p.history.turns
        if len(turns) < 3:
            return
        first = turn_key(turns[0])
        if self._asked == first:
            return
        n = self._turns_to_fold(p)
        if n == 0:
            return
        self._asked = first
        await self._ask(p, turns[:n])

    def _turns_to_fold(self, p: Preparation) -> int:
        """How many oldest turns the next trim will fold (0: no trim within two turns)."""
        history, turns = p.history, p.history.turns
        k = min(_RECENT, len(turns) - 2)
        step = (p.tokens - p.measure(replace(history, turns=turns[:-k]))) / k
        if p.tokens + _AHEAD_TURNS * step <= p.budget:
            return 0
        goal = p.target - step
        # What stays, measured as the trim will see it: the cheap collapse_status (before
        # summarise in the default ladder) leaves only the newest status line, shown whole
        # (status_based). Without this the summary covers more turns than the trim needs to
        # fold, and the horizon shrinks.
        last = len(turns) - 1
        lean = tuple(
            t if i == last or not any(m.status for m in t) else tuple(m.with_changes(status=None, status_full=None) if m.status else m for m in t)
            for i, t in enumerate(turns)
        )

        def rest(n: int) -> int:
            return p.measure(replace(history, turns=lean[n:]).status_based())

        lo, hi = 1, last  # never the newest turn
        if rest(hi) > goal:
            return hi
        while lo < hi:  # the smallest n whose remaining history is at or under the goal
            mid = (lo + hi) // 2
            if rest(mid) <= goal:
                hi = mid
            else:
                lo = mid + 1
        return lo

    async def _ask(self, p: Preparation, cover: Sequence[Turn]) -> None:
        assert p.llm is not None
        keys = [turn_key(t) for t in cover]
        request = summary_request(cover, prompt=self.prompt, name=self.name, max_tokens=self.max_tokens, neutralise=self.neutralise)
        source = str(request.messages[1]["content"])
        started = time.perf_counter()
        self.stats.requests += 1
        outcome, reason, text, usage = "failed", "", None, None
        try:
            with anyio.fail_after(self.timeout_s):
                completion = await p.llm.complete(request)
            text, usage = completion.content, completion.usage
        except anyio.get_cancelled_exc_class():
            self.stats.cancelled += 1
            self._write(SummaryRecord(covers=keys, outcome="cancelled", reason="a turn started", max_tokens=self.max_tokens,
                                      elapsed_s=time.perf_counter() - started))
            raise
        except TimeoutError:
            reason = f"no answer within {self.timeout_s:g} s"
        except EmilError as e:  # busy, unreachable, refused: the digest folds these turns
            reason = f"{type(e).__name__}: {e}"
        parsed: Parsed | str = reason
        if text is not None or not reason:
            parsed = parse_summary(text, source=source)
        if usage is not None:
            self.stats.prompt_tokens += usage.prompt_tokens
            self.stats.completion_tokens += usage.completion_tokens
        if isinstance(parsed, Parsed):
            capped, cut = cap_lines(parsed.lines, self.max_tokens, p.tokens_of)
            if not capped:
                parsed = f"no line fits the cap of {self.max_tokens} tokens"
            elif cut:
                self.stats.cut += 1
                reason = f"cut to {self.max_tokens} tokens at a sentence boundary ({len(parsed.lines)} lines -> {len(capped)})"
                parsed = parsed.model_copy(update={"lines": capped})
        if isinstance(parsed, Parsed):
            outcome = "ready"
            self.stats.ready += 1
            self._ready = _Ready(tuple(keys), note_lines(parsed.lines), tuple(parsed.facts))
        else:
            outcome, reason = ("invalid" if text is not None else "failed"), parsed
            self.stats.failed += 1
            if not self._failed_once:
                self._failed_once = True
                _log.warning("summary of %d turns not used (%s); the digest folds them", len(cover), reason)
        self._write(SummaryRecord(
            covers=keys, outcome=outcome, reason=reason, text=text, max_tokens=self.max_tokens,
            lines=list(parsed.lines) if isinstance(parsed, Parsed) else [],
            facts=[f.model_dump() for f in parsed.facts] if isinstance(parsed, Parsed) else [],
            dropped_facts=parsed.dropped_facts if isinstance(parsed, Parsed) else 0,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            elapsed_s=round(time.perf_counter() - started, 3),
        ))

    def _write(self, record: SummaryRecord) -> None:
        if self.record is not None:
            self.record(record)

    def _write_facts(self) -> None:
        applied, self._applied = self._applied, []
        if self.store is None:
            return
        for summary in applied:
            try:
                self.store.facts_from_summary(summary.facts, t=self.clock())
            except (sqlite3.Error, OSError) as e:
                _log.error("memory: could not write a summary's facts (%s); playing on without them", e)

"""Measured recall: which planted facts a prompt still holds, and where.

A :class:`PlantedFact` (planted by the synthetic day, :mod:`emil.offline.synthetic`) counts as
recoverable from a prompt when one of its probes matches: every string of the probe in one line
of one message, case-insensitive. Where it was found is the first of: the history verbatim
(``verbatim``), the rolling memory note the ladder folds turns into (``memory note``), the
pinned notes block (``notes``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from emil.context.history import History, Message

__all__ = ["WHERE", "PlantedFact", "Recall", "find_fact", "recall"]

Where = Literal["verbatim", "memory note", "notes"]
WHERE: tuple[Where, ...] = ("verbatim", "memory note", "notes")


@dataclass(frozen=True)
class PlantedFact:
    """A fact planted at a known game time, and how to find it in a prompt.

    ``probes``: alternatives, each a set of strings that must all appear (case-insensitive) in
    one line of the prompt for the fact to count."""

    t: float
    what: str
    probes: tuple[tuple[str, ...], ...]
    about: Literal["player", "place"]


def _lines(messages: Iterable[Message]) -> list[str]:
    out: list[str] = []
    for m in messages:
        texts = [m.text, *(c["arguments"] for c in m.tool_calls)]
        out += [line.lower() for text in texts if text for line in text.splitlines()]
    return out


def _holds(lines: Sequence[str], fact: PlantedFact) -> bool:
    return any(all(s.lower() in line for s in probe) for probe in fact.probes for line in lines)


def find_fact(history: History, fact: PlantedFact) -> Where | None:
    """Where in the prompt of ``history`` the fact is recoverable, or None."""
    parts: dict[Where, list[Message]] = {
        "verbatim": history.messages(),
        "memory note": [history.memory] if history.memory is not None else [],
        "notes": [history.notes] if history.notes is not None else [],
    }
    for where in WHERE:
        if _holds(_lines(parts[where]), fact):
            return where
    return None


@dataclass(frozen=True)
class Recall:
    """The planted facts found in one prompt."""

    planted: int
    found: dict[str, int]
    """Facts found, per :data:`WHERE`."""
    missing: tuple[str, ...]
    """What the facts not found were (their ``what``)."""

    @property
    def share(self) -> float:
        return sum(self.found.values()) / self.planted if self.planted else 1.0


def recall(history: History, planted: Iterable[PlantedFact], *, now: float | None = None) -> Recall:
    """Which of the facts planted up to ``now`` the prompt of ``history`` holds."""
    facts = [f for f in planted if now is None or f.t <= now]
    found: Counter[str] = Counter()
    missing: list[str] = []
    for fact in facts:
        where = find_fact(history, fact)
        if where is None:
            missing.append(fact.what)
        else:
            found[where] += 1
    return Recall(len(facts), {w: found[w] for w in WHERE}, tuple(missing))

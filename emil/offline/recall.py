"""Measured recall: which planted facts a prompt still holds, and where.

A :class:`PlantedFact` (planted by the synthetic day, :mod:`emil.offline.synthetic`) counts as
in a prompt when one of its probes matches: every string of the probe in one line of one
message, case-insensitive, as a whole word or phrase ("bell" is not in "bella"). Where it was found is the first of: the history verbatim
(``verbatim``), the lines the archive recalled into a turn's observation (``recalled``), the
rolling memory note the ladder folds turns into (``memory note``), the pinned notes block
(``notes``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from emil.context.history import History, Message
from emil.memory.render import quoted_in
from emil.memory.retrieval import RECALL_HEADER, Recollection, Topic
from emil.senses.observation import describe_event
from emil.world.events import Chat

__all__ = ["WHERE", "PlantedFact", "Recall", "asked_recall", "find_fact", "prompt_lines", "recall"]

Where = Literal["verbatim", "recalled", "memory note", "notes"]
WHERE: tuple[Where, ...] = ("verbatim", "recalled", "memory note", "notes")


@dataclass(frozen=True)
class PlantedFact:
    """A fact planted at a known game time, and how to find it in a prompt.

    ``probes``: alternatives, each a set of strings that must all appear (case-insensitive) in
    one line of the prompt for the fact to count."""

    t: float
    what: str
    probes: tuple[tuple[str, ...], ...]
    about: Literal["player", "place"]
    kind: str = "event"
    """What kind of fact (emil.offline.facts.KINDS for facts said in conversation)."""
    speaker: str = ""
    """Who said it (a fact said in conversation)."""
    question: str = ""
    """How its speaker asks about it later without the probe (the "asked" measure)."""


def _lines(messages: Iterable[Message], *, recalled: bool | None = None) -> list[str]:
    """The prompt lines of ``messages``, lower-cased; ``recalled``: only the lines of recalled
    blocks (True), or none of them (False)."""
    out: list[str] = []
    for m in messages:
        texts = [m.text, *(c["arguments"] for c in m.tool_calls)]
        for text in texts:
            if not text:
                continue
            before, _sep, after = text.partition(RECALL_HEADER)
            parts = [text] if recalled is None else [after] if recalled else [before]
            out += [line.lower() for part in parts for line in part.splitlines()]
    return out


@functools.cache
def _word(text: str) -> re.Pattern[str]:
    # A probe string matches as a whole word or phrase: "bell" is not in "bella", "51" not in "510".
    return re.compile(rf"(?<!\w){re.escape(text.lower())}(?!\w)")


def _holds(lines: Sequence[str], fact: PlantedFact) -> bool:
    return any(all(_word(s).search(line) for s in probe) for probe in fact.probes for line in lines)


def prompt_lines(history: History) -> dict[Where, list[str]]:
    """The lines of the prompt of ``history``, lower-cased, by where they are."""
    return {
        "verbatim": _lines(history.messages(), recalled=False),
        "recalled": _lines(history.messages(), recalled=True),
        "memory note": _lines([history.memory] if history.memory is not None else []),
        "notes": _lines([history.notes] if history.notes is not None else []),
    }


def find_fact(history: History | dict[Where, list[str]], fact: PlantedFact) -> Where | None:
    """Where in the prompt of ``history`` (or its :func:`prompt_lines`) the fact is, or None."""
    lines = prompt_lines(history) if isinstance(history, History) else history
    for where in WHERE:
        if _holds(lines[where], fact):
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
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per kind of fact: (found, planted)."""

    @property
    def share(self) -> float:
        return sum(self.found.values()) / self.planted if self.planted else 1.0


def recall(history: History, planted: Iterable[PlantedFact], *, now: float | None = None) -> Recall:
    """Which of the facts planted up to ``now`` the prompt of ``history`` holds."""
    facts = [f for f in planted if now is None or f.t <= now]
    found: Counter[str] = Counter()
    missing: list[str] = []
    lines = prompt_lines(history) if facts else {}
    kinds: dict[str, list[int]] = {}
    for fact in facts:
        where = find_fact(lines, fact)
        tally = kinds.setdefault(fact.kind, [0, 0])
        tally[1] += 1
        if where is None:
            missing.append(fact.what)
        else:
            found[where] += 1
            tally[0] += 1
    return Recall(len(facts), {w: found[w] for w in WHERE}, tuple(missing), {k: (v[0], v[1]) for k, v in kinds.items()})


def asked_recall(history: History, planted: Iterable[PlantedFact], *, at: float,
                 recollection: Recollection | None = None) -> Recall:
    """Which facts a turn brings into the prompt when the fact's speaker asks about it at game
    time ``at`` without the probe (its ``question``): the prompt of ``history`` plus that
    turn's observation, with the lines ``recollection`` recalls into it (None: no retrieval).
    Each fact's turn is asked alone, none joins the history (:meth:`Recollection.block` with
    ``keep=False``)."""
    facts = [f for f in planted if f.question and f.t <= at]
    base = prompt_lines(history) if facts else {}
    since = history.oldest_event_time()
    pinned = quoted_in(history.notes.content if history.notes is not None else None)
    found: Counter[str] = Counter()
    missing: list[str] = []
    kinds: dict[str, list[int]] = {}
    for fact in facts:
        line = describe_event(Chat(t=at, sender=fact.speaker, text=fact.question))
        block = None
        if recollection is not None:
            topic = Topic(chat=(fact.question,), speakers=frozenset({fact.speaker}), present=frozenset({fact.speaker}))
            block = recollection.block(topic, since=since, now=at, turn_t=at, keep=False, pinned=pinned)
        lines = dict(base)
        lines["verbatim"] = [*base["verbatim"], line.lower()]
        lines["recalled"] = [*base["recalled"], *(x.lower() for x in (block or "").splitlines())]
        where = find_fact(lines, fact)
        tally = kinds.setdefault(fact.kind, [0, 0])
        tally[1] += 1
        if where is None:
            missing.append(fact.what)
        else:
            found[where] += 1
            tally[0] += 1
    return Recall(len(facts), {w: found[w] for w in WHERE}, tuple(missing), {k: (v[0], v[1]) for k, v in kinds.items()})

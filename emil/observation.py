"""A turn's observation within its token cap: floods are coalesced, never fatal.

A slow model call during a chat flood used to gather ~600 lines into one 32k-token observation
that could not fit any budget. :func:`compose_events` renders the pending events as
:func:`emil.perception.format_events` does while they fit ``cap_tokens``; beyond it, it gives
up detail in this order, re-measuring after each step:

1. other events (joins, pick-ups, reflexes, finished actions...) become one line of counts per
   kind, repeated hits by one attacker one line, a hostile's sightings its latest;
2. chat keeps each player's latest lines verbatim (8, then 4, 2, 1) and says how many earlier
   lines it left out;
3. then only the most recent speakers keep a line (halving), the others are counted;
4. a cap too small for even that gets the text cut to fit, marked as cut.

Urgent events other than chat are never dropped before step 4 (repeated hits fold into one
line); everything shown keeps its ``(!)`` mark and its order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from emil.events import Chat, Damage, HostileNearby
from emil.perception import Triaged, describe_event

__all__ = ["Composed", "compose_events"]

_CHAT_KEEP = (8, 4, 2, 1)


@dataclass(frozen=True)
class Composed:
    """An observation's event text and how much of the flood it summarised."""

    text: str
    events: int
    """Events pending when the turn started."""
    shown: int
    """Events shown verbatim (the rest are counted in summary lines)."""
    cut: bool = False
    """The text was cut to fit (the cap is smaller than even one line per kind)."""


def _line(t: Triaged) -> str:
    return f"- {'(!) ' if t.priority == 'urgent' else ''}{describe_event(t.event)}"


def _render(summary: list[str], kept: list[Triaged]) -> str:
    if not summary and not kept:
        return "[events] none"
    return "\n".join(["[events]", *summary, *(_line(t) for t in kept)])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _fold_others(events: Sequence[Triaged]) -> tuple[list[str], list[Triaged]]:
    """Step 1: non-chat events that are not urgent become counts; hits and sightings fold."""
    summary: list[str] = []
    kept: list[Triaged] = []
    others: Counter[str] = Counter()
    hits: dict[str, list[Triaged]] = {}
    sighted: dict[str, Triaged] = {}
    for t in events:
        ev = t.event
        if isinstance(ev, Chat):
            kept.append(t)
        elif isinstance(ev, Damage):
            hits.setdefault(ev.attacker or "something", []).append(t)
        elif isinstance(ev, HostileNearby) and t.priority == "urgent":
            sighted[ev.name] = t
        elif t.priority == "urgent":
            kept.append(t)
        else:
            others[ev.kind] += 1
    if others:
        parts = ", ".join(f"{n} {kind}" for kind, n in others.most_common())
        summary.append(f"- ({_plural(sum(others.values()), 'other event')} not shown: {parts})")
    for attacker, ts in hits.items():
        last = ts[-1]
        if len(ts) == 1:
            kept.append(last)
            continue
        assert isinstance(last.event, Damage)
        lost = sum(t.event.amount for t in ts if isinstance(t.event, Damage))
        summary.append(
            f"- (!) you were hit {len(ts)} times by {attacker}: -{lost:g} health in all, "
            f"now {last.event.health:g}/20"
        )
    kept.extend(sighted.values())
    order = {id(t): i for i, t in enumerate(events)}
    kept.sort(key=lambda t: order[id(t)])
    return summary, kept


def _chat_keep(kept: list[Triaged], per_player: int, players: int | None) -> tuple[list[str], list[Triaged]]:
    """Steps 2-3: each speaker's latest ``per_player`` lines; only the latest ``players`` speak."""
    lines: dict[str, list[Triaged]] = {}
    for t in kept:
        if isinstance(t.event, Chat):
            lines.setdefault(t.event.sender, []).append(t)
    # most recent speaker first
    speakers = sorted(lines, key=lambda who: max(t.at for t in lines[who]), reverse=True)
    heard = speakers[:players]
    drop: set[int] = set()
    summary: list[str] = []
    for who in heard:
        older = lines[who][:-per_player]
        if older:
            drop.update(id(t) for t in older)
            summary.append(f"- ({who} said {_plural(len(older), 'earlier line')}, not shown)")
    silent = speakers[len(heard):]
    if silent:
        said = sum(len(lines[who]) for who in silent)
        for who in silent:
            drop.update(id(t) for t in lines[who])
        summary.append(
            f"- ({_plural(len(silent), 'more player')} said {_plural(said, 'line')}, not shown: "
            f"{', '.join(silent[:5])}{', ...' if len(silent) > 5 else ''})"
        )
    return summary, [t for t in kept if id(t) not in drop]


def _cut_to(text: str, cap: int, count: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` (plus a cut mark) within ``cap`` tokens."""
    mark = "\n[... cut to fit]"
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid] + mark) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + mark if count(text[:lo] + mark) <= cap else ""


def compose_events(
    events: Sequence[Triaged],
    *,
    cap_tokens: int | None,
    count: Callable[[str], int],
) -> Composed:
    """The event part of an observation, within ``cap_tokens`` (None: no cap); see module doc."""
    full = _render([], list(events))
    n = len(events)
    if cap_tokens is None or count(full) <= cap_tokens:
        return Composed(full, n, n)
    folded, kept = _fold_others(events)
    text = _render(folded, kept)
    if count(text) <= cap_tokens:
        return Composed(text, n, len(kept))
    speakers = len({t.event.sender for t in kept if isinstance(t.event, Chat)})
    for per_player in _CHAT_KEEP:
        chat_summary, shown = _chat_keep(kept, per_player, None)
        text = _render(folded + chat_summary, shown)
        if count(text) <= cap_tokens:
            return Composed(text, n, len(shown))
    players = speakers
    while players > 1:
        players //= 2
        chat_summary, shown = _chat_keep(kept, 1, players)
        text = _render(folded + chat_summary, shown)
        if count(text) <= cap_tokens:
            return Composed(text, n, len(shown))
    return Composed(_cut_to(text, cap_tokens, count), n, len(shown), cut=True)

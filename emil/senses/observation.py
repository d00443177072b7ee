"""A turn's observation, the words the model reads: events and status, within a token cap.

The observation is one user message: the new events, then the status (snapshot). The status
lives only in the newest message, never in the system prompt, so every earlier prompt token
stays byte-identical and vLLM's prefix cache keeps serving it. :func:`describe_event` writes
one line per event, :func:`format_status` the status, :func:`format_observation` the whole.

Floods are coalesced, never fatal.

A slow model call during a chat flood used to gather ~600 lines into one 32k-token observation
that could not fit any budget. :func:`compose_events` renders the pending events as
:func:`format_events` does while they fit ``cap_tokens``; beyond it, it gives
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

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emil.senses.perception import Triaged
from emil.world.events import (
    ActionFinished,
    BlockPlaced,
    BlockRemoved,
    Chat,
    Damage,
    Death,
    Disconnected,
    ErrorEvent,
    GameEvent,
    Health,
    HostileNearby,
    ItemCollected,
    Kicked,
    PlayerJoined,
    PlayerLeft,
    Reflex,
    Respawn,
    TimeOfDay,
    UnknownEvent,
    Weather,
)

__all__ = [
    "Composed",
    "compose_events",
    "describe_event",
    "format_events",
    "format_observation",
    "format_status",
    "format_status_line",
    "private_call",
    "without_whispers",
]

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


def _fmt_num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


_WHISPERED = re.compile(r'^(?P<head>(?:- )?(?:\(!\) )?[A-Za-z0-9_]{1,16}) whispers to you: ".*$', re.M)
PRIVATE_WORDS = "(private words, left out)"


def without_whispers(text: str) -> str:
    """``text`` (observation lines) with the words of every whisper to Emil left out, who
    whispered kept: what a memory that every player's turns read (the memory note, a summary)
    may hold of a whisper. The words stay in their own turn and in the archive, which gives
    them back only to the player who whispered them."""
    return _WHISPERED.sub(rf"\g<head> whispered to you {PRIVATE_WORDS}", text)


def private_call(name: str, arguments: str) -> str | None:
    """Emil's call as a shared memory may tell it, when its words were for one player only
    (``whisper``): to whom, not what; None for every other call."""
    if name != "whisper":
        return None
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError):
        args = None
    to = args.get("player") if isinstance(args, dict) else None
    return f"whispered to {to if isinstance(to, str) else 'a player'} {PRIVATE_WORDS}"


def describe_event(event: GameEvent) -> str:
    """One short line for the model about an event."""
    match event:
        case Chat(whisper=True):
            return f'{event.sender} whispers to you: "{event.text}"'
        case Chat():
            return f'{event.sender} says: "{event.text}"'
        case Damage():
            who = f" by {event.attacker}" if event.attacker else ""
            return f"you were hit{who}: -{event.amount:g} health, now {event.health:g}/20"
        case Health():
            return f"health {event.health:g}/20, food {event.food:g}/20"
        case Death():
            return f"you died ({event.reason})" if event.reason else "you died"
        case Respawn():
            return "you respawned"
        case HostileNearby():
            return f"hostile {event.name} {event.distance:.0f} blocks away"
        case PlayerJoined():
            return f"{event.username} joined the game"
        case PlayerLeft():
            return f"{event.username} left the game"
        case ItemCollected():
            giver = f" (tossed by {event.from_player})" if event.from_player else ""
            return f"you picked up {event.count} {event.item}{giver}"
        case ActionFinished():
            status = "ok" if event.ok else "failed"
            tail = f": {_short(event.error)}" if event.error else (f": {_short(event.result)}" if event.result not in (None, "") else "")
            return f"action {event.action} finished {status}{tail}"
        case Reflex():
            return f"reflex {event.reflex}" + (f": {event.detail}" if event.detail else "")
        case BlockPlaced():
            return f"{event.by or 'someone'} placed a {event.block} at {_fmt_pos(event.position)}"
        case BlockRemoved():
            return f"the {event.block} at {_fmt_pos(event.position)} is gone"
        case TimeOfDay():
            return f"it is now {event.phase}"
        case Weather():
            return "it started raining" if event.raining else "the rain stopped"
        case Kicked():
            return f"you were kicked: {event.reason}"
        case Disconnected():
            return f"connection lost: {event.reason}"
        case ErrorEvent():
            return f"bot error: {event.message}"
        case UnknownEvent():
            return f"{event.original_kind}: {_short(event.data)}"


def _fmt_pos(pos: Any) -> str | None:
    if isinstance(pos, Mapping):
        vals = [pos.get(k) for k in ("x", "y", "z")]
    elif isinstance(pos, Sequence) and not isinstance(pos, str):
        vals = list(pos)[:3]
    else:
        return None
    nums = [v for v in vals if isinstance(v, int | float)]
    if len(nums) != 3:
        return None
    return ",".join(str(math.floor(v)) for v in nums)  # block coordinates, as F3 shows them


def _fmt_named_list(items: Any, limit: int = 8) -> str | None:
    """Inventory/nearby lists: [{"name": "oak_log", "count": 3}] or {"oak_log": 3} or ["x"]."""
    parts: list[str] = []
    if isinstance(items, Mapping):
        parts = [f"{k} x{v}" if isinstance(v, int) else f"{k} {_short(v, 40)}" for k, v in items.items()]
    elif isinstance(items, Sequence) and not isinstance(items, str):
        for it in items:
            if isinstance(it, Mapping):
                name = it.get("name") or it.get("username") or it.get("type") or "?"
                extra = []
                if isinstance(it.get("count"), int) and it["count"] != 1:
                    extra.append(f"x{it['count']}")
                if isinstance(it.get("distance"), int | float) and it["distance"] >= 0:
                    extra.append(f"{it['distance']:.0f}m")
                parts.append(" ".join([str(name), *extra]))
            else:
                parts.append(str(it))
    else:
        return None
    if not parts:
        return "none"
    more = len(parts) - limit
    return ", ".join(parts[:limit]) + (f", +{more} more" if more > 0 else "")


_STATUS_KEYS = frozenset({
    "position", "health", "food", "time", "time_of_day", "dimension", "holding", "held", "inventory",
    "players", "mobs", "blocks", "action", "job", "following", "raining", "standing_on",
})
_QUIET_KEYS = frozenset({"t", "kind", "connected", "username", "reflexes", "yaw", "pitch", "standing_on"})


def _phase(ticks: int) -> str:
    """Minecraft time of day (0-24000 ticks, 0 = sunrise) as a word."""
    ticks %= 24000
    if ticks < 12000:
        return "day"
    if ticks < 13800:
        return "dusk"
    if ticks < 22200:
        return "night"
    return "dawn"


def format_status(snapshot: Mapping[str, Any] | None, ambient: Mapping[str, Any] | None = None) -> str:
    """The one-line status: position, health, food, time, inventory, who and what is near."""
    snap: dict[str, Any] = dict(ambient or {})
    snap.update(snapshot or {})
    if snap.get("connected") is False:
        return "not connected to the server"
    parts: list[str] = []
    pos = _fmt_pos(snap.get("position"))
    if pos:
        parts.append(f"pos {pos}")
    hp, food = snap.get("health"), snap.get("food")
    vitals = [f"health {_fmt_num(hp)}/20" if hp is not None else "", f"food {_fmt_num(food)}/20" if food is not None else ""]
    if any(vitals):
        parts.append(" ".join(v for v in vitals if v))
    when = snap.get("time")
    if when is None and isinstance(snap.get("time_of_day"), int):
        when = _phase(snap["time_of_day"])
    if when is not None:
        parts.append(f"time {when}")
    if snap.get("raining"):
        parts.append("raining")
    if snap.get("dimension") not in (None, "overworld", "minecraft:overworld"):
        parts.append(f"in {snap['dimension']}")
    held = snap.get("held") or snap.get("holding")
    if held:
        parts.append(f"holding {held}")
    for key, label in (("inventory", "inventory"), ("players", "players near"), ("mobs", "mobs near"), ("blocks", "blocks near")):
        if key in snap:
            text = _fmt_named_list(snap[key])
            if text is not None:
                parts.append(f"{label}: {text}")
    doing = snap.get("job") or snap.get("action")
    if doing:
        parts.append(f"doing {doing}")
    if snap.get("following"):
        parts.append(f"following {snap['following']}")
    for key, value in snap.items():
        if key not in _STATUS_KEYS and key not in _QUIET_KEYS and value not in (None, "", [], {}):
            parts.append(f"{key}: {_short(value, 60)}")
    return " | ".join(parts) if parts else "unknown"


def format_events(events: Iterable[Triaged], *, note: str | None = None) -> str:
    """The event part of an observation: one line per event (urgent ones marked), or a note."""
    lines = []
    if note:
        lines.append(f"[note] {note}")
    evs = list(events)
    if evs:
        lines.append("[events]")
        lines.extend(f"- {'(!) ' if t.priority == 'urgent' else ''}{describe_event(t.event)}" for t in evs)
    return "\n".join(lines) if lines else "[events] none"


def format_status_line(snapshot: Mapping[str, Any] | None, ambient: Mapping[str, Any] | None = None) -> str:
    """The status part of an observation (rides on the newest message only)."""
    return f"[status] {format_status(snapshot, ambient)}"


def format_observation(
    events: Iterable[Triaged],
    snapshot: Mapping[str, Any] | None,
    *,
    ambient: Mapping[str, Any] | None = None,
    note: str | None = None,
) -> str:
    """The whole observation as the model reads it: events, a blank line, the status."""
    return f"{format_events(events, note=note)}\n\n{format_status_line(snapshot, ambient)}"

"""A SCRIPTED summariser (rules, not a model) for the vLLM-dialect double and the benchmarks.

It answers a summary request (:func:`emil.memory.summary.summary_request`) the way the summary
prompt asks a model to: from the turns' text it keeps who asked Emil for what and what Emil
did about it, gifts both ways, hits by players, places with their coordinates, promises and
deaths, in a few short lines; routine (fights with mobs, meals, small talk, floods, following)
is counted, not retold; facts name only what the turns show. Its first line says it is
scripted. A real model's summaries are judged with ``run_emil.py replay --endpoint`` on recorded
situations (docs/memory.md).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from emil.llm.types import ChatRequest
from emil.memory.summary import MAX_FACTS
from emil.testing.script import Reply, ScriptRequest, last_text

__all__ = ["SCRIPTED_LABEL", "SCRIPTED_MARK", "scripted_summary", "scripted_summary_text"]

SCRIPTED_MARK = "(scripted summary, not a model)"
SCRIPTED_LABEL = "the SCRIPTED summariser (not a model)"
"""How reports name this summariser (emil.offline.summaries.SummaryModel.label)."""
_LINES = 8
_LINE_CHARS = 170

_TURN = re.compile(r"^(\d\d:\d\d):\d\d events: (.*)$")
_DID = re.compile(r"^\s+(\S+) did: (.*)$")
_CALL = re.compile(r"(?:^|; )(\w+) (\{[^{}]*\}) -> ")
_SAYS = re.compile(r'^(?:\(!\) )?(\w{1,16}) (says|whispers to you): "(.*)"$')
_PLACE = re.compile(r"\bmy (\w+) is at (-?\d+)[ ,]+(-?\d+)[ ,]+(-?\d+)", re.I)
_GIFT = re.compile(r"you picked up (\d+) (\w+) \(tossed by (\w{1,16})\)")
_HIT = re.compile(r"you were hit by (\w{1,16})")
_DIED = re.compile(r"you died(?: \((.*)\))?")
_GAVE = re.compile(r"tossed (\d+) (\w+) to (\w{1,16})")
_PROMISE = re.compile(r"\b(I'll|I will|I promise|I'm going to)\b", re.I)


def _calls(actions: str) -> list[tuple[str, dict[str, Any], str]]:
    found = list(_CALL.finditer(actions))
    out = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(actions)
        try:
            args = json.loads(m.group(2))
        except json.JSONDecodeError:
            args = {}
        out.append((m.group(1), args if isinstance(args, dict) else {}, actions[m.end() : end]))
    return out


def scripted_summary(request: ScriptRequest) -> Reply:
    """The JSON answer to a summary request (see the module doc)."""
    text = last_text(request, "user")
    turns: list[tuple[str, list[str], str, str]] = []  # (clock, events, name, actions)
    clock, events = "", ""
    for line in text.splitlines():
        if m := _TURN.match(line):
            clock, events = m.group(1), m.group(2)
        elif (m := _DID.match(line)) and clock:
            turns.append((clock, [e.strip() for e in events.split("; ") if e.strip()], m.group(1), m.group(2)))
    speakers = {m.group(1) for _c, evs, _n, _a in turns for e in evs if (m := _SAYS.match(e))}
    facts: list[dict[str, Any]] = []
    items: list[tuple[str, str]] = []
    routine: Counter[str] = Counter()
    for clock, evs, name, actions in turns:
        asked: list[str] = []
        for e in evs:
            if (m := _SAYS.match(e)) is not None:
                who, how, words = m.groups()
                if name.lower() in words.lower() or how.startswith("whispers"):
                    asked.append(who)
                    facts.append({"about": "player", "subject": who, "topic": "asked", "detail": words[:160]})
                    items.append((clock, f'{who}: "{words[:70]}"'))
                else:
                    routine["chat"] += 1
                if (p := _PLACE.search(words)) is not None:
                    where = ",".join(p.group(i) for i in (2, 3, 4))
                    facts.append({"about": "place", "subject": p.group(1).lower(), "topic": "at", "detail": where, "told_by": who})
            elif (g := _GIFT.search(e)) is not None:
                facts.append({"about": "player", "subject": g.group(3), "topic": "gave_me", "detail": g.group(2), "count": int(g.group(1))})
                items.append((clock, f"{g.group(3)} gave {name} {g.group(1)} {g.group(2)}"))
            elif (h := _HIT.search(e)) is not None and h.group(1) in speakers:
                facts.append({"about": "player", "subject": h.group(1), "topic": "hit_me"})
                items.append((clock, f"{h.group(1)} hit {name}"))
            elif (d := _DIED.search(e)) is not None:
                items.append((clock, f"{name} died" + (f" ({d.group(1)})" if d.group(1) else "")))
            else:
                routine["event"] += 1
        for tool, args, result in _calls(actions):
            said = str(args.get("text", ""))
            if tool in ("say", "whisper") and _PROMISE.search(said):
                named = [who for who in asked if re.search(rf"(?<!\w){re.escape(who)}(?!\w)", said, re.I)]
                to = [str(args["player"])] if tool == "whisper" and "player" in args else named or asked
                facts += [{"about": "player", "subject": who, "topic": "promised", "detail": said[:160]} for who in to]
                items.append((clock, f'{name} promised {", ".join(to) or "them"}: "{said[:70]}"'))
            elif (g := _GAVE.search(result)) is not None:
                facts.append({"about": "player", "subject": g.group(3), "topic": "i_gave", "detail": g.group(2), "count": int(g.group(1))})
                items.append((clock, f"{name} gave {g.group(3)} {g.group(1)} {g.group(2)}"))
            elif tool in ("attack", "flee", "eat", "follow", "stop", "go_to", "say"):
                routine[tool] += 1
    lines: list[str] = []
    per = max(1, -(-len(items) // _LINES))
    for i in range(0, len(items), per):
        chunk = items[i : i + per]
        when = chunk[0][0] if chunk[0][0] == chunk[-1][0] else f"{chunk[0][0]}-{chunk[-1][0]}"
        lines.append(f"{when} " + "; ".join(what for _, what in chunk)[:_LINE_CHARS])
    if routine:
        span = f"{turns[0][0]}-{turns[-1][0]}" if turns else "--:--"
        lines.append(f"{span} also: " + ", ".join(f"{n} {what}" for what, n in routine.most_common()))
    if not lines:
        lines.append("--:-- nothing happened")
    lines[0] = f"{SCRIPTED_MARK} {lines[0]}"
    unique = list({json.dumps(f, sort_keys=True): f for f in facts}.values())[:MAX_FACTS]
    return Reply(content=json.dumps({"lines": lines, "facts": unique}, ensure_ascii=False))


def scripted_summary_text(request: ChatRequest) -> str:
    """The scripted summary's text for a summary request: the in-process summary writer the
    tools give a sweep (emil.offline.summaries.SummaryModel)."""
    return scripted_summary(ScriptRequest(messages=request.messages, body=dict(request.extra_body))).content or ""

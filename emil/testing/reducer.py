"""A DOUBLE of a summarising model: a generic, extractive text reducer (rules, not a model).

The vLLM-dialect double and the offline benchmarks answer Emil's summary requests
(:func:`emil.memory.summary.summary_request`) with it. It knows nothing of any day's wording,
only the shape of Emil's own request: a text of lines, and the JSON answer
``{"lines": [...], "facts": [...]}``. What it does, like a terse note-taker:

- it splits the text into clauses (lines, then ``;``-separated parts), keeps each clause's
  leading clock time (``HH:MM``) if its line had one;
- it scores each clause by how rare its words are in the whole text (a word said once scores
  1, a word said in every clause almost nothing), so routine and floods sink and anything said
  once (a name, a number, an odd word) rises;
- it keeps the best clauses, in their order, within the length the request allows (half of
  ``max_completion_tokens``, at four characters a token: the rest is room for the JSON), and
  merges clauses of the same minute into one line;
- for each kept clause that quotes a speaker in Emil's observation format (``NAME says: "..."``
  or ``NAME whispers to you: "..."``), it writes a ``note`` fact about that speaker with their
  words.

Its first line says it is a double. A real model's summaries are judged with
``run_emil.py replay --endpoint`` on recorded situations (docs/memory.md).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from emil.llm.types import ChatRequest
from emil.testing.script import Reply, ScriptRequest, last_text

__all__ = ["REDUCER_LABEL", "REDUCER_MARK", "reduce_text", "reducer_summary", "reducer_summary_text"]

REDUCER_MARK = "(summary by a text reducer, a double: not a model)"
REDUCER_LABEL = "the double's text reducer (extractive rules, not a model)"
"""How reports name this summariser (emil.offline.summaries.SummaryModel.label)."""
_MAX_LINES = 12
_MAX_FACTS = 8
_CLOCK = re.compile(r"^\s*(\d\d:\d\d)(?::\d\d)?\b")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SPEECH = re.compile(r'(?:^|\s)(\w{1,16}) (?:says|whispers to you): "(.*)"?$')


def _clauses(text: str) -> list[tuple[str, str]]:
    """(clock, clause) for every clause of every line; clock "" when the line had none."""
    out: list[tuple[str, str]] = []
    clock = ""
    for line in text.splitlines():
        if (m := _CLOCK.match(line)) is not None:
            clock = m.group(1)
            line = line[m.end():]
        for part in line.split("; "):
            part = part.strip(" -")
            if len(_WORD.findall(part)) >= 2:
                out.append((clock, part))
    return out


def reduce_text(text: str, *, max_chars: int, max_lines: int = _MAX_LINES) -> list[tuple[str, str]]:
    """The clauses of ``text`` that say the most, in order, within ``max_chars`` (see module doc)."""
    clauses = list(dict.fromkeys(_clauses(text)))
    bags = [[w.lower() for w in _WORD.findall(c)] for _, c in clauses]
    df = Counter(w for bag in bags for w in set(bag))
    n = max(1, len(clauses))

    def score(bag: list[str]) -> float:
        return sum(math.log(n / df[w]) for w in set(bag)) / math.sqrt(len(bag) or 1)

    ranked = sorted(range(len(clauses)), key=lambda i: -score(bags[i]))
    kept: list[int] = []
    used = 0
    for i in ranked:
        cost = len(clauses[i][1]) + 8
        if used + cost > max_chars or len(kept) >= max_lines * 3:
            continue
        kept.append(i)
        used += cost
    return [clauses[i] for i in sorted(kept)]


def reducer_summary(request: ScriptRequest) -> Reply:
    """The JSON answer to a summary request (see the module doc)."""
    text = last_text(request, "user")
    budget = request.max_tokens if request.max_tokens else 512
    kept = reduce_text(text.split("\n", 1)[-1], max_chars=max(80, budget * 2))
    lines: list[str] = []
    for clock, clause in kept:
        if lines and clock and lines[-1].startswith(clock + " ") and len(lines[-1]) < 200:
            lines[-1] += f"; {clause}"
        else:
            lines.append(f"{clock} {clause}".strip())
    while len(lines) > _MAX_LINES:
        lines[-2] += "; " + lines.pop()
    if not lines:
        lines = ["nothing worth keeping"]
    lines[0] = f"{REDUCER_MARK} {lines[0]}"
    facts: list[dict[str, str]] = []
    for _clock, clause in kept:
        if (m := _SPEECH.search(clause)) is not None and len(facts) < _MAX_FACTS:
            facts.append({"about": "player", "subject": m.group(1), "topic": "note", "detail": m.group(2).rstrip('"')[:200]})
    return Reply(content=json.dumps({"lines": lines, "facts": facts}, ensure_ascii=False))


def reducer_summary_text(request: ChatRequest) -> str:
    """The reducer's answer to a summary request: the in-process summary writer the tools give a
    sweep (emil.offline.summaries.SummaryModel)."""
    script = ScriptRequest(messages=request.messages, max_tokens=request.max_completion_tokens, body=dict(request.extra_body))
    return reducer_summary(script).content or ""

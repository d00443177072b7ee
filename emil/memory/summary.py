"""A summary of Emil's oldest turns written by the served model: the request and its answer.

The request is short and bounded: the summary prompt (prompts/summary.md.j2) as the system
message, asking for lines of at most :func:`words_for` ``max_tokens`` words in all; the turns to
fold as plain text lines as the user message; no tools, thinking off, temperature 0, and
vLLM's ``structured_outputs`` holding the answer to :class:`FoldedTurnsSummary`'s JSON schema.
``max_completion_tokens`` is :func:`answer_tokens` (twice the cap plus room for the JSON), so
an answer that keeps to what was asked is never cut mid-JSON by the server.

The answer is checked before anything uses it: valid JSON of that shape (anything else is one
failed summary, recorded; the digest folds those turns), lines made safe to put in the prompt
(:func:`~emil.memory.note_text.as_data`), facts grounded in the turns (a fact about a player
nobody in the turns is called, or a place whose coordinates the turns never gave, is dropped as
invented), and the lines cut to ``max_tokens`` (:func:`cap_lines`): counted in real tokens of
the served model as the memory note will hold them, whole lines while they fit, then the next
line up to its last sentence boundary that fits. A summary never exceeds its cap.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import jinja2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emil.context.history import Message, Turn
from emil.exceptions import ConfigurationError
from emil.llm.types import ChatRequest
from emil.memory.note_text import as_data, clip
from emil.memory.notes import Fact
from emil.senses.observation import private_call, without_whispers
from emil.trust.caps import valid_loads

__all__ = [
    "MAX_FACTS",
    "MAX_LINES",
    "SUMMARY_PROMPT",
    "FoldedTurnsSummary",
    "Parsed",
    "answer_tokens",
    "cap_lines",
    "is_summary_request",
    "load_summary_prompt",
    "note_lines",
    "parse_summary",
    "summary_request",
    "turn_key",
    "turns_text",
    "words_for",
]

SUMMARY_PROMPT = "summary.md.j2"
MAX_LINES = 12
MAX_FACTS = 24
_SHIPPED = Path(__file__).resolve().parents[2] / "prompts"


class FoldedTurnsSummary(BaseModel):
    """What the model answers: lines for the memory note, facts for the notes store."""

    model_config = ConfigDict(extra="ignore")

    lines: list[str] = Field(max_length=MAX_LINES)
    """Short lines, oldest first, each starting with the time (HH:MM)."""
    facts: list[Fact] = Field(default_factory=list, max_length=MAX_FACTS)


SCHEMA = FoldedTurnsSummary.model_json_schema()
"""The answer's JSON schema, sent as ``structured_outputs.json`` (its title marks the request
as a summary request: the vLLM-dialect double answers those with its text reducer)."""


def is_summary_request(body: dict[str, object]) -> bool:
    """True for a chat-completions body built by :func:`summary_request`."""
    wanted = body.get("structured_outputs")
    return isinstance(wanted, dict) and isinstance(wanted.get("json"), dict) and wanted["json"].get("title") == SCHEMA["title"]


def words_for(max_tokens: int) -> int:
    """How many words the request asks for when the lines may take ``max_tokens`` tokens:
    English runs about 1.3 tokens a word, and each line adds a time and a bullet."""
    return max(10, int(max_tokens * 0.6))


def answer_tokens(max_tokens: int) -> int:
    """``max_completion_tokens`` of a summary request whose lines may take ``max_tokens``:
    twice that plus 64, room for the JSON's quoting and the facts."""
    return 2 * max_tokens + 64


def load_summary_prompt(prompts_dir: Path | None, *, name: str, max_lines: int = MAX_LINES,
                        max_tokens: int = 512) -> str:
    """The summary instructions from ``prompts_dir`` (the shipped prompts/ when it has no
    summary.md.j2), asking for lines of at most :func:`words_for` ``max_tokens`` words; a
    template error is a configuration error."""
    folder = prompts_dir if prompts_dir is not None and (prompts_dir / SUMMARY_PROMPT).is_file() else _SHIPPED
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), undefined=jinja2.StrictUndefined, autoescape=False)
    try:
        return env.get_template(SUMMARY_PROMPT).render(
            name=name, max_lines=max_lines, max_words=words_for(max_tokens),
        ).strip() + "\n"
    except jinja2.TemplateError as e:
        raise ConfigurationError(f"prompt template {folder / SUMMARY_PROMPT} has an error: {e}; fix the template") from e


def turn_key(turn: Turn) -> str:
    """What identifies a turn across the ladder's cheaper rewrites and across a replay: its
    opening's game time and text (the cheap rungs change statuses, reasoning and results, never
    the opening's events)."""
    opening = turn[0]
    digest = hashlib.blake2b((opening.content or "").encode(), digest_size=6).hexdigest()
    return f"{opening.event_time or 0:.3f}:{digest}"


def _events(opening: Message) -> str:
    # A summary's lines and facts are read by every player's turns: whispered words stay out.
    lines = [line.removeprefix("- ") for line in without_whispers(opening.content or "").splitlines() if line != "[events]"]
    return "; ".join(clip(line, 200) for line in lines if line)


def _actions(turn: Turn) -> str:
    results = {m.tool_call_id: m.content or "" for m in turn if m.role == "tool"}
    parts: list[str] = []
    for m in turn[1:]:
        if m.role != "assistant":
            continue
        for c in m.tool_calls:
            parts.append(private_call(c["name"], c["arguments"])
                         or f"{c['name']} {clip(c['arguments'], 120)} -> {clip(results.get(c['id'], 'no result'), 160)}")
        if m.content and not m.tool_calls:
            parts.append(f'noted "{clip(m.content, 80)}"')
    return "; ".join(parts) or "nothing"


def turns_text(turns: Sequence[Turn], *, name: str) -> str:
    """The turns as the summariser reads them: one line of events and one of actions each."""
    out = []
    for turn in turns:
        t = turn[0].event_time
        clock = "--:--:--" if t is None else time.strftime("%H:%M:%S", time.gmtime(t))
        out.append(f"{clock} events: {_events(turn[0])}\n  {name} did: {_actions(turn)}")
    return "\n".join(out)


def summary_request(
    turns: Sequence[Turn], *, prompt: str, name: str, max_tokens: int,
    neutralise: Callable[[str], str] | None = None,
) -> ChatRequest:
    """The one request that summarises ``turns`` (see the module doc)."""
    text = turns_text(turns, name=name)
    if neutralise is not None:
        text = neutralise(text)
    return ChatRequest(
        messages=[
            {"role": "system", "content": prompt},
            {"role": "user", "content": f"Turns to fold, oldest first:\n{text}"},
        ],
        tools=None,
        max_completion_tokens=answer_tokens(max_tokens),
        temperature=0.0,
        enable_thinking=False,
        extra_body={"structured_outputs": {"json": SCHEMA}},
    )


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def cap_lines(lines: Sequence[str], max_tokens: int, tokens_of: Callable[[str], int]) -> tuple[list[str], bool]:
    """``lines`` cut to ``max_tokens`` as the memory note holds them (:func:`note_lines`, one a
    line), counted by ``tokens_of``: whole lines while they fit, then the next line up to its
    last sentence boundary that fits (nothing of it if none does). Returns the lines and
    whether anything was cut."""

    def size(kept: Sequence[str]) -> int:
        return tokens_of("\n".join(note_lines(kept))) if kept else 0

    if size(lines) <= max_tokens:
        return list(lines), False
    kept: list[str] = []
    for line in lines:
        if size([*kept, line]) <= max_tokens:
            kept.append(line)
            continue
        pieces = _SENTENCE_END.split(line)
        for n in range(len(pieces) - 1, 0, -1):
            part = " ".join(pieces[:n])
            if size([*kept, part]) <= max_tokens:
                kept.append(part)
                break
        break
    return kept, True


def note_lines(lines: Sequence[str]) -> tuple[str, ...]:
    """A summary's lines as the memory note holds them (the digest's "- " bullets)."""
    return tuple(f"- {line.removeprefix('- ')}" for line in lines)


class Parsed(BaseModel):
    """A checked answer: what the rung may use, and what was thrown away."""

    lines: list[str]
    facts: list[Fact]
    dropped_facts: int = 0
    """Facts not grounded in the turns (invented)."""


_NUMBER = re.compile(r"-?\d+")


def _grounded(fact: Fact, source: str) -> bool:
    low = source.lower()
    if fact.about == "player" and fact.subject.lower() not in low:
        return False
    if fact.about == "place" and fact.topic == "at":
        numbers = _NUMBER.findall(fact.detail)
        return len(numbers) == 3 and all(re.search(rf"(?<![\d-]){re.escape(n)}(?!\d)", source) for n in numbers)
    return True


def parse_summary(text: str | None, *, source: str) -> Parsed | str:
    """The model's answer checked against the turns it summarised (``source``, the request's
    text), or why it cannot be used."""
    if not text:
        return "empty answer"
    try:
        summary = FoldedTurnsSummary.model_validate(valid_loads(text))  # \ud800 reads as U+FFFD
    except json.JSONDecodeError as e:
        return f"not JSON ({e.msg} at {e.pos})"
    except RecursionError:
        return "not a summary (JSON nested too deep)"
    except ValidationError as e:
        return f"not a summary ({e.error_count()} problems; first: {e.errors()[0]['msg']})"
    lines = [as_data(line, 240) for line in summary.lines if line.strip()]
    if not lines:
        return "no lines"
    facts = [f for f in summary.facts if _grounded(f, source)]
    return Parsed(lines=lines, facts=facts, dropped_facts=len(summary.facts) - len(facts))

"""A recording's text split into content categories, each piece once.

The categories are the ones whose chars/token differ enough to matter for a budget: the field
notes measured tool results at 2.64, tool-call arguments at 2.60, reasoning at 3.41 and tool
specs at 3.75 chars/token against an assumed 4.00. Each message is written once in a recording
(``message`` records are interned), so nothing here is counted twice; ``derived`` prompt parts
(trimmed variants, memory notes rebuilt by the ladder) are skipped because their text is a
rewrite of history already counted, except the memory note, which has its own category.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal, NamedTuple, get_args

from emil.recording import EventRecord, HeaderRecord, MessageRecord, Record

__all__ = ["CATEGORIES", "INSIDE_OTHERS", "Category", "Piece", "iter_pieces", "message_pieces", "tool_spec_text"]

Category = Literal[
    "tool_results",
    "tool_call_args",
    "reasoning",
    "tool_specs",
    "chat",
    "observations",
    "system_prompt",
    "assistant_text",
    "memory",
    "chat_lines",
]

CATEGORIES: tuple[Category, ...] = get_args(Category)
"""Report order (the Literal's, written once): the heavy, dense categories first."""

INSIDE_OTHERS: frozenset[Category] = frozenset({"chat_lines"})
"""Categories whose text is also part of another category's (players' chat lines are quoted
inside observations): reported for their own chars/token, left out of totals."""


class Piece(NamedTuple):
    """One piece of text of one category."""

    category: Category
    text: str


def tool_spec_text(spec: dict[str, Any]) -> str:
    """A tool spec as chat templates render it (``tojson``: UTF-8 kept, default separators)."""
    return json.dumps(spec, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _message_pieces(record: MessageRecord) -> Iterator[Piece]:
    msg = record.openai
    role = msg.get("role")
    kind = record.message_kind
    text = _content_text(msg.get("content"))
    if record.origin == "system" or role == "system":
        if text:
            yield Piece("system_prompt", text)
        return
    if record.origin == "memory" or kind == "memory":
        if text:
            yield Piece("memory", text)
        return
    if record.origin == "derived":
        return
    if role == "assistant":
        reasoning = msg.get("reasoning") or msg.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            yield Piece("reasoning", reasoning)
        for call in msg.get("tool_calls") or ():
            args = (call.get("function") or {}).get("arguments")
            if isinstance(args, str) and args:
                yield Piece("tool_call_args", args)
            elif isinstance(args, dict):
                yield Piece("tool_call_args", json.dumps(args, ensure_ascii=False))
        if text:
            yield Piece("assistant_text", text)
        return
    if role == "tool" or kind == "tool_result":
        if text:
            yield Piece("tool_results", text)
        return
    if text:
        yield Piece("chat" if kind == "chat" else "observations", text)


def iter_pieces(records: Iterable[Record]) -> Iterator[Piece]:
    """Every categorised piece of text in a recording, in file order.

    The system prompt and tool specs come from the header (once per session); a system message
    is used only when the header has no system prompt.
    """
    header_system = False
    for record in records:
        if isinstance(record, HeaderRecord):
            if record.system_prompt:
                header_system = True
                yield Piece("system_prompt", record.system_prompt)
            for spec in record.tools:
                yield Piece("tool_specs", tool_spec_text(spec))
        elif isinstance(record, EventRecord):
            # What players typed, as the bot reported it (the agent quotes it in observations).
            event = record.event
            if event.get("kind") == "chat" and isinstance(event.get("text"), str) and event["text"]:
                yield Piece("chat_lines", event["text"])
        elif isinstance(record, MessageRecord):
            for piece in _message_pieces(record):
                if piece.category == "system_prompt" and header_system:
                    continue
                yield piece


def message_pieces(
    messages: Iterable[Any], *, system_prompt: str = "", tools: Iterable[dict[str, Any]] = ()
) -> Iterator[Piece]:
    """Pieces of in-memory history messages (anything with ``to_openai()`` and ``kind``), e.g. a
    synthetic session, as if they had been recorded."""
    if system_prompt:
        yield Piece("system_prompt", system_prompt)
    for spec in tools:
        yield Piece("tool_specs", tool_spec_text(spec))
    for m in messages:
        record = MessageRecord(ref="m", message_kind=m.kind, openai=m.to_openai())
        yield from _message_pieces(record)

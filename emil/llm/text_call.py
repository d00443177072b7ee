"""A tool call written as text: what a model that does not use its template's call format sends.

Small models (Qwen2.5-Coder-0.5B-Instruct with ``tool_choice`` "auto": every answer, docs/llm.md)
often write the call they mean as bare JSON in the content, ``{"name": "follow", "arguments":
{"player": "bob"}}``, without the ``<tool_call>`` tags the server's parser looks for, so the
answer carries no tool calls. :func:`call_in_text` finds such a call (bare, in a code fence, or
in tags the parser did not take) so that it can be reported (the tool-call gate's "text_call")
and turned into a correction the model reads (emil.agent.turn); it is never run: the content is
not a channel for actions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["TextCall", "call_in_text", "correction"]

_START = re.compile(r'\{\s*"name"\s*:')


@dataclass(frozen=True)
class TextCall:
    """A call found in an answer's text: the tool it names and its arguments (None: not an
    object)."""

    name: str
    arguments: dict[str, Any] | None


def call_in_text(content: str | None) -> TextCall | None:
    """The first JSON object in ``content`` shaped like a call (a string ``name`` and an
    ``arguments`` or ``parameters`` member), or None."""
    if not content:
        return None
    decoder = json.JSONDecoder()
    for match in _START.finditer(content):
        try:
            value, _end = decoder.raw_decode(content, match.start())
        except ValueError:
            continue
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            continue
        if "arguments" not in value and "parameters" not in value:
            continue
        args = value.get("arguments", value.get("parameters"))
        if isinstance(args, str):  # the OpenAI wire form: arguments as a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                args = None
        return TextCall(value["name"], args if isinstance(args, dict) else None)
    return None


def correction(call: TextCall) -> str:
    """What the model reads after an answer that wrote ``call`` as text."""
    return (
        f"[note] Your last answer wrote a call to {call.name} as text; text is not shown to "
        "anyone and nothing was run. To act, call the tool itself (a tool call, not text); "
        "to talk, call say."
    )

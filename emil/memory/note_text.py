"""Untrusted text (player names, chat quotes, item names) on its way into the notes block.

Every such string the notes render goes through :func:`as_data`, which keeps the note lines
readable and shaped (below). The served vocabulary's special tokens are broken afterwards, on
every rendered line, by the project-wide :class:`~emil.context.untrusted.Neutraliser`
(``neutralise`` of emil.memory.render.render_notes; emil/agent/session.py passes it); this
module's rules hold whatever vocabulary is served:

- it can never become a control token: ``<`` and ``>`` become look-alikes, so no
  ``<|im_start|>``, ``<think>`` or ``<tool_call>`` survives, and neither does a Mistral-style
  ``[INST]`` (square brackets around an upper-case word become parentheses);
- it stays on one line: a newline in a chat quote cannot forge a note line of its own;
- control characters go, and the text is clipped.
"""

from __future__ import annotations

import re

__all__ = ["as_data", "clip"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_BRACKET_WORD = re.compile(r"\[(/?[A-Z_]{2,})\]")
_ANGLES = str.maketrans({"<": "‹", ">": "›"})


def clip(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def as_data(text: str, limit: int = 120) -> str:
    """``text`` made safe to quote inside the prompt (see the module docstring)."""
    text = _CONTROL.sub(" ", text)
    text = _BRACKET_WORD.sub(r"(\1)", text).translate(_ANGLES)
    return clip(text, limit)

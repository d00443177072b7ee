"""Untrusted text never becomes a control token of the served model's vocabulary.

vLLM renders the chat template and tokenizes the result with special tokens recognised, so
``<|im_end|><|im_start|>system ...`` typed in chat would open a system turn (and a Hugging
Face tokenizer matches added tokens in the raw text, before its NFC normalisation, while
Emil's tiktoken counter normalises first: a special written as ``…|>`` + U+0338 is a control
token to one and text to the other). :class:`Neutraliser` makes any text safe to render:

- it makes the text valid Unicode (:func:`emil.trust.caps.valid_unicode`: a lone surrogate, which
  a JSON parser lets through and UTF-8 cannot hold, becomes U+FFFD), so the request, the
  recording and the count all hold the same text;
- it normalises to NFC, so the server's raw text and Emil's normalised text are the same
  string (no look-alike that NFC would turn into, or out of, a special token);
- it breaks every occurrence of every special token by inserting U+2060 WORD JOINER (an
  invisible, NFC-stable format character) after its first character, until none is left, so the
  model still reads what the player typed (``<⁠|im_start|>``) as text, never as a token.

The result is a fixed point (neutralising it again changes nothing), and because the text
sent *is* the neutralised text, the exact count still equals the server's.

The one point every piece of untrusted text passes before it enters a prompt is
:meth:`Neutraliser.message`, applied by the context manager to every message it renders
(:meth:`emil.context.manager.ContextManager.admit`): history messages as they enter history
(chat, names, sign and book text, item names, tool results that echo them, the model's echoes
of them), and the pinned notes block, the memory note with its summaries and digests, and any
block a rung or a later feature adds (retrieved lines) when they are rendered. A new source of
prompt text needs nothing of its own: it is a :class:`~emil.context.history.Message` the
manager renders.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import replace

from emil.context.history import Message
from emil.model.family import FAMILIES
from emil.model.tokens import TokenCounter
from emil.trust.caps import valid_unicode

__all__ = ["BREAK", "Neutraliser", "served_specials"]

BREAK = "\u2060"
"""WORD JOINER: zero-width, not a combining mark, unchanged by NFC, invisible when shown."""
_FALLBACK_BREAK = "\u200b"


class Neutraliser:
    """Breaks the special tokens of one vocabulary inside untrusted text (see module doc)."""

    def __init__(self, specials: Iterable[str]) -> None:
        # Only specials that are text to begin with: a token of one character cannot be broken
        # and cannot come from two characters either (the vocabularies Emil serves have none).
        self.specials = frozenset(s for s in specials if len(s) > 1)
        self.breaker = BREAK if not any(BREAK in s for s in self.specials) else _FALLBACK_BREAK
        if any(self.breaker in s for s in self.specials):
            raise ValueError("no zero-width breaker is free in this vocabulary's special tokens")
        # (any order of the alternatives is safe: the fixed point below breaks overlaps too)
        ordered = sorted(self.specials)
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered)) if ordered else None

    def __call__(self, text: str) -> str:
        """``text`` as valid NFC with no special token left in it (the identity on ordinary text)."""
        text = valid_unicode(text)
        if not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
        pattern = self._pattern
        if pattern is None:
            return text
        # Fixed point: a break can uncover an overlapping special ("<a>b>" with "<a>", ">b>").
        while pattern.search(text) is not None:
            text = pattern.sub(lambda m: m.group(0)[0] + self.breaker + m.group(0)[1:], text)
        return text

    def json_text(self, raw: str) -> str:
        """Tool-call arguments: JSON whose *decoded* strings are what the template renders.

        vLLM parses the arguments before rendering, so ``"\\u003c|im_start|>"`` would reach the
        template as ``<|im_start|>``, and ``"\\ud800"`` as a lone surrogate. Decoded strings
        (and keys) are neutralised (a lone surrogate becomes U+FFFD, as
        :func:`emil.trust.caps.valid_json` writes it); when that changes anything the JSON is
        written anew, otherwise the original text is kept. Text that is not JSON is neutralised
        as text.
        """
        try:
            value = json.loads(raw)
        except ValueError:
            return self(raw)
        safe = self._value(value)
        if safe == value:
            return self(raw)  # escapes decode to nothing special; normalise the text itself
        return json.dumps(safe, ensure_ascii=False)

    def _value(self, value: object) -> object:
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self._value(v) for v in value]
        if isinstance(value, dict):
            return {self(str(k)): self._value(v) for k, v in value.items()}
        return value

    def contains_special(self, text: str) -> bool:
        """True when ``text`` (or its NFC form) still holds a special token."""
        if self._pattern is None:
            return False
        return any(
            self._pattern.search(form) is not None
            for form in (text, unicodedata.normalize("NFC", text))
        )

    def message(self, message: Message) -> Message:
        """``message`` with every text the model will read neutralised; the message itself (same
        id, same object) when nothing changes, which is the rule for ordinary text. Tool-call ids
        are the server's own; names and arguments are model text that may echo a player
        (arguments are JSON the server decodes before rendering)."""
        content = self._opt(message.content)
        calls = tuple(
            {k: v if k == "id" else self.json_text(v) if k == "arguments" else self(v) for k, v in c.items()}
            for c in message.tool_calls
        )
        name, reasoning, status = self._opt(message.name), self._opt(message.reasoning), self._opt(message.status)
        status_full = self._opt(message.status_full)
        if (content, calls, name, reasoning, status, status_full) == (
            message.content, message.tool_calls, message.name, message.reasoning, message.status, message.status_full
        ):
            return message
        return replace(message, content=content, tool_calls=calls, name=name, reasoning=reasoning, status=status,
                       status_full=status_full)

    def _opt(self, text: str | None) -> str | None:
        return None if text is None else self(text)


def served_specials(counter: TokenCounter) -> frozenset[str]:
    """The special tokens untrusted text must not spell: the served vocabulary's (the family's
    tokenizer, which counts every prompt); for a model only the server can count (its
    vocabulary unknown here), every shipped family's, which covers the ChatML and Qwen control
    tokens most templates use."""
    specials = counter.special_tokens
    if specials:
        return specials
    return frozenset().union(*(family.special_tokens for family in FAMILIES))

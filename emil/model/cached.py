"""A token counter for sweeps: every text counted once, long texts counted by their pieces.

A sweep renders the same message contents many times over (raw, and inside each block variant
the template frames them with: ``<|im_start|>user\\n...<|im_end|>``, a tool response, an
assistant turn with or without its think block) and the rolling memory note grows a line at a
time. For the Qwen3.5/3.6 vocabulary a text's count is the sum of its pieces' counts when it
is cut at special tokens and at line starts (proofs below), so each piece is tokenised once and
every framing of it afterwards is dictionary look-ups.
"""

from __future__ import annotations

import re

from emil.model.tokens import QwenTiktokenCounter, TokenCounter

__all__ = ["CachedCounter", "line_pieces"]

# After a newline, before a printable ASCII character (not a space).
_LINE_START = re.compile(r"(?<=\n)(?=[!-~])")


def line_pieces(text: str) -> list[str]:
    """``text`` cut after each newline that starts a line beginning with a printable ASCII char.

    For the Qwen3.5/3.6 tokenizer the count of ``text`` is the sum of its pieces' counts: every
    pre-tokenizer chunk holding a newline ends with its run of newlines (``\\s*[\\r\\n]+``,
    punctuation + ``[\\r\\n]*``; no other alternative takes a newline), so a chunk never spans
    such a cut; special tokens hold no newline; and NFC cannot compose across a newline followed
    by an ASCII char. A line that is empty or starts with ``\\r``, a space or non-ASCII stays
    glued to the line before (not needed for the proof, cheap insurance). Checked against whole
    counts in tests/unit/offline/test_line_pieces.py.
    """
    return _LINE_START.split(text)


class CachedCounter:
    """A token counter that remembers every text (and, for Qwen3.5/3.6, every piece) it counted.

    A sweep runs the same session through many managers; they render the same texts, so one
    shared cache makes every budget after the first nearly free of tokenisation.
    """

    def __init__(self, inner: TokenCounter) -> None:
        self.inner = inner
        self._cache: dict[str, int] = {}
        # Only the Qwen3.5/3.6 tiktoken vocabulary is known to split at line starts and special
        # tokens (tiktoken encodes the text between special tokens on its own; no special token
        # is a prefix of another, as each ends at its only ">").
        self._specials: re.Pattern[str] | None = None
        if isinstance(inner, QwenTiktokenCounter) and inner.splits_at_line_starts:
            alternatives = sorted(inner.special_tokens, key=len, reverse=True)
            self._specials = re.compile("(" + "|".join(map(re.escape, alternatives)) + ")")

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def special_tokens(self) -> frozenset[str]:
        return self.inner.special_tokens

    def count(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self._count(text)
        return n

    def _count(self, text: str) -> int:
        specials = self._specials
        if specials is None or ("\n" not in text and "<" not in text):
            return self.inner.count(text)
        parts = specials.split(text)  # text, special, text, ..., text
        # NFC (applied to the whole text) composes ">" with some combining marks (U+0338 makes
        # "≯"), which would unmake the special token before it: count such a text whole.
        if any(after and after[0] >= "\x80" for after in parts[2::2]):
            return self.inner.count(text)
        n = len(parts) // 2
        cache = self._cache
        for segment in parts[::2]:
            if not segment:
                continue
            for piece in line_pieces(segment) if "\n" in segment else (segment,):
                c = cache.get(piece)
                if c is None:
                    c = cache[piece] = self.inner.count(piece)
                n += c
        return n

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

"""The sweep's counter sums the counts of pieces cut at special tokens and line starts: exactly
the whole text's count, for Qwen3.5/3.6."""

from __future__ import annotations

import itertools
import random

from emil.model.cached import CachedCounter, line_pieces
from emil.model.resolve import get_token_counter
from emil.offline.synthetic import synthetic_turns

QWEN = get_token_counter("qwen3.6")

_ALPHABET = [
    "a", "Zed", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", ".", ")", "->", '"', "'s", "7", "42",
    "é", "e\u0301", "\u0301", "日本", "<|im_end|>", "<|im_start|>", "- ", "[", "}", "  \n", ".\n",
    "<think>", "</think>", "<tool_call>", "<tool_response>", "<|endoftext|>", ">", "<", "|",
    "\u0338", "\u0340", "user", "<tts_text_bos>", "_single>",
]


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(n)]


def _notes(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    words = ["mined", "oak_log", "said", '"hi"', "dig(x=3)", "-> ok", "zombie!", "at", "12:00"]
    out = []
    for _ in range(n):
        lines = ["[Memory of earlier turns]"]
        for _ in range(rng.randint(1, 30)):
            lines.append("- " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 9))))
        out.append("\n".join(lines))
    return out


def _game_texts() -> list[str]:
    """Real shapes: the synthetic session's tool results, observations and arguments, raw and
    framed as the blocks the template renders."""
    raw: list[str] = []
    for turn in itertools.islice(synthetic_turns(11), 60):
        for m in turn.messages:
            raw += [m.text, m.reasoning or "", *(c["arguments"] for c in m.tool_calls)]
    raw = [t for t in raw if t]
    framed = [f"<|im_start|>user\n{t}<|im_end|>\n" for t in raw]
    framed += [f"\n<tool_response>\n{t}\n</tool_response>" for t in raw]
    return raw + framed


def test_pieces_rebuild_the_text() -> None:
    for text in _texts(1, 500):
        assert "".join(line_pieces(text)) == text


def test_sum_of_piece_counts_equals_the_whole_count() -> None:
    cached = CachedCounter(QWEN)
    texts = _texts(2, 3000) + _notes(3, 300) + _game_texts()
    for text in texts:
        assert cached.count(text) == QWEN.count(text), repr(text)


def test_notes_are_cut_at_every_line() -> None:
    note = _notes(4, 1)[0]
    assert len(line_pieces(note)) == note.count("\n") + 1

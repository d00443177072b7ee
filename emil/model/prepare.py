"""Messages and tool specs as vLLM 0.32 hands them to a chat template.

Checked against a real vLLM server by tests/integration/real_vllm. Content takes the template's
content format (:func:`emil.model.template.content_format`: OpenAI-style part lists, or text
with non-empty text parts joined with newlines and a missing content as ""); tool-call
``arguments`` JSON strings become mappings (invalid or non-object JSON becomes ``{}``); an empty
``tool_calls`` list is dropped; an assistant's reasoning (``reasoning``, else the deprecated
``reasoning_content``, as a chat request renames it) is handed over under both names; tool specs
are normalised as vLLM's pydantic round trip leaves them (:func:`prepare_tools`). Rendering the
prepared messages is :mod:`emil.model.template`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["prepare_messages", "prepare_tools", "reasoning_of_request", "text_of"]


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """vLLM's rule: templates get a mapping; bad JSON or non-objects become ``{}``."""
    if not arguments:
        return {}
    if isinstance(arguments, dict):
        return arguments
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return {}
    return parsed if isinstance(parsed, dict) else {}


def _copy_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = dict(call)
    if isinstance(out.get("function"), dict):
        out["function"] = dict(out["function"])
    return out


_TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text",
               "refusal": "refusal", "thinking": "thinking"}  # fmt: skip
"""Content part types vLLM reads as text, and the key that holds the text."""


def _part_text(part: Any) -> str | None:
    """The text of a text part (None for media parts and text parts without text)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    key = _TEXT_PARTS.get(part.get("type", ""))
    text = part.get(key) if key is not None else None
    return text if isinstance(text, str) else None


def _content(content: Any, fmt: str, role: Any) -> Any:
    """Content as vLLM hands it to the template (``_parse_chat_message_content``).

    "string": the text parts joined with newlines, an empty text part dropped (vLLM keeps only
    parts that parse to a non-empty value). "openai": a list of ``{"type": "text", "text": ..}``
    parts (a string becomes one part; other parts pass through), except a tool message's text
    parts, which vLLM joins back into one string with newlines (empty parts kept).
    """
    parts: list[Any] = [] if content is None else [content] if isinstance(content, str) else list(content)
    if fmt == "string":
        return "\n".join(t for p in parts if (t := _part_text(p)))
    wrapped = [
        {"type": "text", "text": t} if (t := _part_text(p)) is not None else p for p in parts
    ]
    if role == "tool" and all(_part_text(p) is not None for p in parts):
        return "\n".join(p["text"] for p in wrapped)
    return wrapped


def reasoning_of_request(message: Mapping[str, Any]) -> Any:
    """An assistant message's reasoning as a vLLM chat request reads it: ``reasoning``, or the
    deprecated ``reasoning_content`` when ``reasoning`` is missing or null. (vLLM 0.32's
    ``/tokenize`` does not do this rename: there a ``reasoning_content`` is dropped, so Emil's
    /tokenize bodies carry ``reasoning`` only; see ``emil.model.tokens``.)"""
    reasoning = message.get("reasoning")
    return message.get("reasoning_content") if reasoning is None else reasoning


def text_of(content: Any, fmt: str) -> str:
    """The text a Qwen template makes of a message's content: for a template vLLM hands text
    (``fmt`` "string"), vLLM's joined text; for one that gets parts ("openai": Qwen3.5/3.6),
    the parts' texts one after another, as their ``render_content`` macro writes them."""
    if fmt == "string":
        text: str = _content(content, "string", None)
        return text
    parts: list[Any] = [] if content is None else [content] if isinstance(content, str) else list(content)
    return "".join(t for p in parts if (t := _part_text(p)) is not None)


def prepare_messages(messages: list[dict[str, Any]], fmt: str = "string") -> list[dict[str, Any]]:
    """Copy OpenAI-format messages into what the server hands the template (``fmt``: the
    template's :func:`content_format`)."""
    prepared: list[dict[str, Any]] = []
    for original in messages:
        # Only what is edited below is copied (the top level, and an assistant's tool calls):
        # the sandboxed template cannot edit the rest, and a deep copy of every message was the
        # largest cost of counting a fresh assistant message.
        message = dict(original)
        content = message.get("content")
        if not isinstance(content, str) or fmt != "string":
            message["content"] = _content(content, fmt, message.get("role"))
        if message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                if not calls:
                    message.pop("tool_calls", None)
                calls = [_copy_call(call) for call in calls]
                if calls:
                    message["tool_calls"] = calls
                for call in calls:
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict):
                        function["arguments"] = _parse_arguments(function.get("arguments"))
            # A chat request renames ``reasoning_content`` to ``reasoning`` unless ``reasoning``
            # is set (vLLM 0.32's ChatCompletionRequest), and the renderer hands the template
            # ``reasoning`` under both names.
            reasoning = reasoning_of_request(message)
            message.pop("reasoning_content", None)
            message.pop("reasoning", None)
            if reasoning is not None:
                message["reasoning"] = reasoning
                message["reasoning_content"] = reasoning
        prepared.append(message)
    return prepared


def prepare_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool specs as vLLM hands them to the template: ``ChatCompletionToolsParam.model_dump()``.

    vLLM parses each tool into a pydantic model and dumps it back, so the template sees the
    declared fields first, in declaration order (``type``, then ``function`` with ``name``,
    ``description``, ``parameters``; a missing one as null), then any extra keys. For tools
    written in that canonical shape this changes nothing.
    """
    if tools is None:
        return None
    prepared: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            prepared.append(tool)
            continue
        fn: dict[str, Any] = {
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        fn.update({k: v for k, v in function.items() if k not in fn})
        spec: dict[str, Any] = {"type": tool.get("type", "function"), "function": fn}
        spec.update({k: v for k, v in tool.items() if k not in spec})
        prepared.append(spec)
    return prepared

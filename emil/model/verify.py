"""A resolved model family checked against the server's own count of a probe prompt.

A served name can belong to a family while the server renders another template (a
re-packaging with a "fixed" template, another revision): :func:`verify_family` renders a short
probe conversation with the family's template, counts it, and compares with the server's
``/tokenize`` of the same messages (:class:`emil.llm.tokenize.ServerTokenizeCounter`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from emil.exceptions import ConfigurationError, EndpointConfigError, EndpointUnavailable
from emil.model.family import ModelFamily
from emil.model.resolve import ResolvedFamily

__all__ = ["PromptCountingServer", "verify_family"]

_log = logging.getLogger("emil.startup")


class PromptCountingServer(Protocol):
    """The server's count of a whole chat prompt (``POST /tokenize``, template included)."""

    async def count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        enable_thinking: bool = False,
        add_generation_prompt: bool = True,
        preserve_thinking: bool | None = None,
    ) -> int: ...


_PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "go_to",
            "description": "Walk to a place.",
            "parameters": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer"},
                    "sprint": {"type": "boolean"},
                    "note": {"type": "string", "description": "why"},
                },
                "required": ["x"],
            },
        },
    }
]


def _probe_messages() -> list[dict[str, Any]]:
    """A short conversation that exercises what templates differ in: system and tools, a call
    with string, boolean and number arguments, reasoning, a tool result, a second query."""
    arguments = json.dumps({"x": 12, "sprint": True, "note": "über den Fluss"}, ensure_ascii=False)
    return [
        {"role": "system", "content": "You are a probe."},
        {"role": "user", "content": "[events]\n- alex says: come here"},
        {
            "role": "assistant",
            "content": "On my way.",
            "reasoning": "alex wants me near.",
            "tool_calls": [{"id": "p1", "type": "function",
                            "function": {"name": "go_to", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "p1", "content": "arrived at (12, 64, -3)"},
        {"role": "user", "content": "[events]\n- alex says: thanks"},
    ]


async def verify_family(
    resolved: ResolvedFamily,
    counter: PromptCountingServer,
    *,
    enable_thinking: bool,
    preserve_thinking: bool,
    server: Callable[[], ModelFamily],
) -> ResolvedFamily:
    """Check a family against the server's own count of a probe prompt (``/tokenize``).

    A served name can belong to a family while the server renders another template (a
    re-packaging with a "fixed" template, another revision). Then a family chosen by the
    operator is a configuration error, and one guessed from the served name gives way to the
    server's /tokenize, with a warning. A server without /tokenize leaves the family as it is.
    """
    family = resolved.family
    if family.template is None:
        return resolved
    kwargs = family.template_kwargs(enable_thinking=enable_thinking, preserve_thinking=preserve_thinking)
    preserve = kwargs.get("preserve_thinking")
    messages = _probe_messages()
    text = family.template().render(
        messages, _PROBE_TOOLS, enable_thinking=enable_thinking,
        **({"preserve_thinking": True} if preserve else {}),
    )
    local = family.tokenizer().count(text)
    try:
        remote = await counter.count_prompt(
            messages, _PROBE_TOOLS, enable_thinking=enable_thinking, preserve_thinking=preserve
        )
    except (EndpointConfigError, EndpointUnavailable) as exc:
        _log.info("model family %s not checked against the server (/tokenize: %s)", family.name, exc)
        return resolved
    if local == remote:
        return ResolvedFamily(family, f"{resolved.source}; the server's /tokenize agrees")
    why = (
        f"model family {family.name} ({resolved.source}) counts a probe prompt as {local} "
        f"tokens but the server counts {remote}: the served chat template is not that family's"
    )
    if resolved.source.startswith("setting"):
        raise ConfigurationError(
            f"{why}; set model_family = \"server\" to count with the server's /tokenize, or point "
            "tokenizer at the served model's directory"
        )
    _log.warning("%s; counting with the server's /tokenize instead", why)
    return ResolvedFamily(server(), f"{why}; counted by the server's /tokenize")

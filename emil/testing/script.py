"""The vocabulary of scripted replies: what a policy sees and what it answers.

A *policy* is a plain function ``(ScriptRequest) -> Reply``. It is SCRIPTED, not a model: the
vLLM-dialect double (:mod:`emil.testing.vllm_double`) serves its replies over HTTP and
:class:`emil.testing.brains.ScriptedLLM` serves them in-process through the same ``complete()``
seam as the live client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Policy", "Reply", "ScriptRequest", "ScriptedCall", "last_text"]


@dataclass(frozen=True)
class ScriptRequest:
    """A chat request as a policy sees it."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    max_tokens: int | None = None
    enable_thinking: bool = False
    prompt_tokens: int = 0
    """The prompt size the server counted."""
    model: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    """The raw request body (extra fields such as ``ignore_eos``)."""

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request."""
        return [t.get("function", {}).get("name", "") for t in self.tools or []]


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call to emit. ``arguments`` as a str is sent verbatim (e.g. invalid JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)

    @property
    def raw_arguments(self) -> str:
        """The arguments as the wire carries them."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ScriptedCall, ...] = ()
    delay_s: float = 0.0
    """Extra time before the first token (on top of the server's simulated speed)."""
    completion_tokens: int | None = None
    """Override the output length (default: estimated from the text, 4 chars per token)."""
    finish_reason: str | None = None
    """Override (default: "tool_calls" with tool calls, else "stop"; "length" when cut)."""


Policy = Callable[[ScriptRequest], Reply]


def last_text(request: ScriptRequest, role: str | None = None) -> str:
    """The text of the newest message (of ``role`` if given), or ""."""
    for message in reversed(request.messages):
        if role is not None and message.get("role") != role:
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return ""
    return ""

"""Everything a step's request carries besides its messages, one value per session.

:class:`RequestShape` is built once by :meth:`RequestShape.of` from a typed slice of the settings
(:class:`RequestSettings`) and the served model's family (whether its template reads
``preserve_thinking``), and shapes every request of the turn engine (:mod:`emil.agent.turn`)
live, in replay and in the synthetic day alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from emil.llm.types import ChatRequest

__all__ = ["RequestSettings", "RequestShape"]


@dataclass(frozen=True)
class RequestShape:
    """Everything a step's request carries besides its messages, built once per session by
    :meth:`of` from the settings and the served model's family, live and in replay alike."""

    tools: list[dict[str, Any]] | None
    max_completion_tokens: int
    temperature: float | None = None
    stream: bool = False
    enable_thinking: bool = False
    preserve_thinking: bool = False
    """``chat_template_kwargs.preserve_thinking``: only ever true when the family's template
    reads it (:meth:`emil.model.family.ModelFamily.sends_preserve_thinking`)."""
    tool_choice: str | None = None
    """``tool_choice`` of requests that offer tools: None leaves the server's default ("auto"),
    "required" (the setting) makes every answer a call."""

    @classmethod
    def of(cls, settings: RequestSettings, *, preserve_thinking: bool,
           tools: list[dict[str, Any]] | None) -> RequestShape:
        """The shape for these settings (``preserve_thinking``: as the family sends it)."""
        return cls(
            tools=tools or None, max_completion_tokens=settings.output_reserve,
            temperature=settings.temperature, stream=settings.stream,
            enable_thinking=settings.enable_thinking, preserve_thinking=preserve_thinking,
            tool_choice="required" if settings.tool_choice == "required" else None,
        )

    def request(self, messages: list[dict[str, Any]], predicted_tokens: int | None) -> ChatRequest:
        """The request for one assembled prompt."""
        return ChatRequest(
            messages=messages, tools=self.tools, max_completion_tokens=self.max_completion_tokens,
            temperature=self.temperature, stream=self.stream, enable_thinking=self.enable_thinking,
            preserve_thinking=self.preserve_thinking, predicted_prompt_tokens=predicted_tokens,
            tool_choice="required" if self.tool_choice == "required" and self.tools else None,
        )


class RequestSettings(Protocol):
    """The settings a request's shape reads (a typed slice of :class:`emil.config.Settings`)."""

    @property
    def output_reserve(self) -> int: ...
    @property
    def temperature(self) -> float | None: ...
    @property
    def stream(self) -> bool: ...
    @property
    def enable_thinking(self) -> bool: ...
    @property
    def tool_choice(self) -> str: ...

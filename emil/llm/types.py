"""The one model seam: ``await llm.complete(request) -> Completion``.

Live (AsyncOpenAI against vLLM), replay (recorded completions) and scripted (tests, demo) are
three implementations of :class:`LLM`. Requests and completions are plain pydantic models so
they record to JSONL and load back unchanged.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LLM", "ChatRequest", "Completion", "Timings", "ToolCall", "Usage", "root_url_of"]

ToolChoice = Literal["auto", "required", "none"] | dict[str, Any]


class ChatRequest(BaseModel):
    """One chat-completions request, in OpenAI message format."""

    model_config = ConfigDict(frozen=True)

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice | None = None
    """None lets the server default ("auto" when tools are given)."""
    max_completion_tokens: int = 6144
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    enable_thinking: bool = False
    """Sent as ``chat_template_kwargs: {"enable_thinking": ...}``."""
    preserve_thinking: bool | None = None
    """Sent as ``chat_template_kwargs: {"preserve_thinking": ...}`` when set (None = not sent,
    the server's template default). Defaulted so requests recorded before it existed load."""
    stream: bool = False
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Passed through verbatim (ignore_eos, min_tokens, structured_outputs, ...)."""
    predicted_prompt_tokens: int | None = None
    """What Emil's own counter says this prompt costs; compared with usage.prompt_tokens."""


class ToolCall(BaseModel):
    """A tool call as the model wrote it. Malformed calls are data, never exceptions."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None = None
    """Parsed JSON object, or None when ``raw_arguments`` is not a JSON object."""
    error: str | None = None
    """Why the call is unusable (bad JSON, unknown tool, failed validation), for the model."""
    tool: Any = Field(default=None, exclude=True, repr=False)
    """What the one validation made of the arguments (the client's ``tool_validator``: the
    world's tool instance), so the world runs the call without validating it again; None: not
    validated yet. Never recorded."""


class Usage(BaseModel):
    """Token counts as the server reported them (the truth the budget calibrates against)."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class Timings(BaseModel):
    """Wall-clock timings of one completion, in seconds."""

    model_config = ConfigDict(frozen=True)

    total_s: float
    first_token_s: float | None = None
    """Time to first token; only known when streamed."""


class Completion(BaseModel):
    """The model's answer to one :class:`ChatRequest`."""

    model_config = ConfigDict(frozen=True)

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    timings: Timings | None = None
    model: str | None = None
    dropped_tool_calls: int = 0
    """Tool calls past the cap of one answer (``tool_calls_per_answer``): never run, never in
    the history; the loop tells the model how many."""


@runtime_checkable
class LLM(Protocol):
    """Anything that can answer a chat request: live client, replay, scripted brain."""

    async def complete(self, request: ChatRequest) -> Completion:
        """Send one request and return the model's completion."""
        ...


def root_url_of(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p``: vLLM serves /tokenize, /metrics, /health at the root."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url

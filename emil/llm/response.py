"""What a chat-completions answer must look like: the server's 200 validated before use.

A 200 is untrusted input like any other (vLLM itself validates request bodies with pydantic
before use). Invalid JSON, an HTML page from a proxy, empty ``choices``, a choice without a
message, fields of the wrong type, an SSE stream that ends before a choice finishes: each is
a :class:`~emil.exceptions.ServerFault` carrying the start of the body, never an IndexError or
AttributeError in the caller. Only the fields Emil reads are checked; extra ones are ignored.
A lone surrogate anywhere in an answer (``"\\ud800"``: valid JSON to Python, refused by
pydantic's parser) is not a fault: the text reads with U+FFFD in its place
(:mod:`emil.trust.caps`), streamed or not, and tool-call names and arguments the same way
(:func:`emil.llm.client.parse_tool_call`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from emil.exceptions import ServerFault
from emil.llm.classify import excerpt
from emil.llm.types import Completion, Timings, ToolCall, Usage
from emil.trust.caps import valid_loads, valid_unicode

__all__ = ["StreamAssembler", "parse_completion", "parse_models"]

ToolCallParser = Callable[[str, str, str | None], ToolCall]
"""(call id, tool name, raw arguments) -> ToolCall (the client's parsing and validation)."""


class _Wire(BaseModel):
    # strict: a number where text belongs (or text where a count belongs) is the server's fault.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _Function(_Wire):
    name: str = ""
    arguments: str | None = None


class _Custom(_Wire):
    name: str = ""
    input: str | None = None


class _ToolCall(_Wire):
    id: str | None = None
    function: _Function | None = None
    custom: _Custom | None = None
    """vLLM sends only "function" calls; a "custom" one (free-form input) reads the same way."""

    def name_and_arguments(self) -> tuple[str, str | None]:
        if self.function is not None:
            return self.function.name, self.function.arguments
        if self.custom is not None:
            return self.custom.name, self.custom.input
        return "", None


class _Message(_Wire):
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(_Wire):
    message: _Message
    finish_reason: str | None = None


class _PromptDetails(_Wire):
    cached_tokens: int | None = None


class _CompletionDetails(_Wire):
    reasoning_tokens: int | None = None


class _Usage(_Wire):
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None

    def to_usage(self) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cached_tokens=self.prompt_tokens_details.cached_tokens if self.prompt_tokens_details else None,
            reasoning_tokens=(
                self.completion_tokens_details.reasoning_tokens if self.completion_tokens_details else None
            ),
        )


class _ChatCompletion(_Wire):
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None
    model: str | None = None


class _DeltaFunction(_Wire):
    name: str | None = None
    arguments: str | None = None


class _DeltaToolCall(_Wire):
    index: int
    id: str | None = None
    function: _DeltaFunction | None = None


class _Delta(_Wire):
    content: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_DeltaToolCall] | None = None


class _ChunkChoice(_Wire):
    delta: _Delta
    finish_reason: str | None = None


class _Chunk(_Wire):
    choices: list[_ChunkChoice] = Field(default_factory=list)
    usage: _Usage | None = None
    model: str | None = None


class _Model(_Wire):
    id: str
    root: str | None = None
    max_model_len: int | None = None


class _ModelList(_Wire):
    data: list[_Model]


def _fault(what: str, error: ValidationError, body: str | bytes) -> ServerFault:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    shown = excerpt(body)
    return ServerFault(
        f"the LLM server answered 200 with {what} ({where}: {first['msg']}); body: {shown}",
        body=shown,
    )


def parse_completion(body: bytes, *, tool_call: ToolCallParser, total_s: float, max_tool_calls: int | None = None) -> Completion:
    """A non-streamed answer as a :class:`Completion`, or :class:`ServerFault`. Tool calls past
    ``max_tool_calls`` are dropped (counted in ``dropped_tool_calls``), never parsed."""
    try:
        wire = _ChatCompletion.model_validate_json(body)
    except ValidationError as e:
        lenient = _lenient(body, e)
        if lenient is None:
            raise _fault("something that is not a chat completion", e, body) from None
        wire = lenient
    choice = wire.choices[0]
    message = choice.message
    wire_calls = message.tool_calls or []
    kept = wire_calls if max_tool_calls is None else wire_calls[:max_tool_calls]
    calls = [tool_call(tc.id or f"call_{i}", *tc.name_and_arguments()) for i, tc in enumerate(kept)]
    return Completion(
        content=message.content,
        reasoning=message.reasoning if message.reasoning is not None else message.reasoning_content,
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        usage=wire.usage.to_usage() if wire.usage else None,
        timings=Timings(total_s=total_s),
        model=wire.model,
        dropped_tool_calls=len(wire_calls) - len(kept),
    )


def _lenient(body: bytes, error: ValidationError) -> _ChatCompletion | None:
    """The answer again when pydantic's parser refused only what Python's reads: a lone
    surrogate escaped in the JSON (``"\\ud800"``), made U+FFFD (:func:`~emil.trust.caps.valid_loads`) so
    nothing downstream holds text UTF-8 cannot encode. None: it is not a completion after all."""
    if error.errors()[0]["type"] != "json_invalid":
        return None
    try:
        return _ChatCompletion.model_validate(valid_loads(body))
    except (ValueError, RecursionError):  # not JSON to Python either (ValidationError is one)
        return None


def parse_models(body: bytes) -> list[tuple[str, str | None, int | None]]:
    """``GET /v1/models`` as (id, root, max_model_len) tuples, or :class:`ServerFault`."""
    try:
        wire = _ModelList.model_validate_json(body)
    except ValidationError as e:
        raise _fault("something that is not a model list", e, body) from None
    return [(m.id, m.root, m.max_model_len) for m in wire.data]


@dataclass
class _Slot:
    id: str | None = None
    name: str = ""
    args: list[str] = field(default_factory=list)


@dataclass
class StreamAssembler:
    """Accumulates validated SSE chunks into one :class:`Completion`.

    :meth:`add` takes each chunk as the JSON the server sent and returns True when it carried
    the first token (content, reasoning or a tool call). :meth:`finish` raises
    :class:`ServerFault` when the stream ended before any choice finished (a truncated stream).
    """

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Slot] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None
    chunks: int = 0
    max_tool_calls: int | None = None
    """Tool calls past this many are dropped as they stream in (only counted)."""
    dropped: set[int] = field(default_factory=set)
    _seen: list[str] = field(default_factory=list)

    def add(self, raw: object) -> bool:
        """Validate and absorb one chunk; True when it carried generated text or a call."""
        self.chunks += 1
        if len(self._seen) < 3:
            self._seen.append(str(raw))
        try:
            chunk = _Chunk.model_validate(raw)
        except ValidationError as e:
            raise _fault("a stream chunk that is not a completion chunk", e, str(raw)) from None
        self.model = self.model or chunk.model
        if chunk.usage is not None:
            self.usage = chunk.usage.to_usage()
        got = False
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                self.content.append(delta.content)
                got = True
            thought = delta.reasoning if delta.reasoning is not None else delta.reasoning_content
            if thought:
                self.reasoning.append(thought)
                got = True
            for tc in delta.tool_calls or []:
                if tc.index not in self.calls and self.max_tool_calls is not None and len(self.calls) >= self.max_tool_calls:
                    self.dropped.add(tc.index)
                    got = True
                    continue
                slot = self.calls.setdefault(tc.index, _Slot())
                if tc.id:
                    slot.id = tc.id
                if tc.function is not None:
                    if tc.function.name:
                        slot.name += tc.function.name
                    if tc.function.arguments:
                        slot.args.append(tc.function.arguments)
                got = True
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
        return got

    def finish(self, *, tool_call: ToolCallParser, timings: Timings) -> Completion:
        """The whole completion; :class:`ServerFault` when the stream never finished."""
        if self.finish_reason is None:
            shown = excerpt(" | ".join(self._seen))
            raise ServerFault(
                f"the LLM server's stream ended after {self.chunks} chunks without finishing "
                f"(no finish_reason: a truncated stream); first chunks: {shown}",
                body=shown,
            )
        # Joined before they are made valid: a surrogate pair split over two chunks is one character.
        return Completion(
            content=valid_unicode("".join(self.content)) if self.content else None,
            reasoning=valid_unicode("".join(self.reasoning)) if self.reasoning else None,
            tool_calls=[
                tool_call(slot.id or f"call_{i}", slot.name, "".join(slot.args))
                for i, slot in sorted(self.calls.items())
            ],
            finish_reason=self.finish_reason,
            usage=self.usage,
            timings=timings,
            model=self.model,
            dropped_tool_calls=len(self.dropped),
        )

"""Fast exact prompt counts: cached per-message block counts, summed.

ChatML templates are additive across messages: every message renders to a block delimited by
special tokens, and a tokenizer never merges text across a special token, so the prompt's count
is the sum of its blocks. Messages are immutable, so each block is counted once and cached by
the message's fingerprint.

Blocks are measured with the template itself, by difference over tiny probe conversations, so
the counts stay exact for whatever the template renders. Where a block depends on its position
the position is part of the key:

- assistant messages render their ``<think>`` block only after the last real user query
  (unless ``preserve_thinking``): two variants, "kept" and "dropped";
- consecutive tool results share one user turn: each result is counted as a middle block and
  each run of results adds the constant cost of opening and closing that turn;
- the system message is counted together with the tools block the template puts in it;
- the generation prompt is a constant for the thinking setting.

On first use (and whenever :meth:`verify` is called) the sum is compared with a whole render;
if they ever differ the counter logs a warning and renders whole prompts from then on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from emil.context.history import Message
from emil.context.template import ChatTemplate, TemplateError, prepare_messages
from emil.context.tokens import TokenCounter

__all__ = ["IncrementalCounter", "MessageLike"]

_log = logging.getLogger(__name__)

MessageLike = Message | dict[str, Any]

_PROBE_USER: dict[str, Any] = {"role": "user", "content": "probe"}
_PROBE_TOOL: dict[str, Any] = {"role": "tool", "tool_call_id": "probe", "content": "probe"}


def _fingerprint(message: MessageLike) -> str:
    if isinstance(message, Message):
        return message.fingerprint
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def _wire(message: MessageLike) -> dict[str, Any]:
    return message.to_openai() if isinstance(message, Message) else message


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _is_query(wire: dict[str, Any]) -> bool:
    """A user message that is not a bare tool-response wrapper (the template's rule)."""
    if wire.get("role") != "user":
        return False
    text = _content_text(wire.get("content")).strip()
    return not (text.startswith("<tool_response>") and text.endswith("</tool_response>"))


class IncrementalCounter:
    """Exact prompt token counts in microseconds per turn, by cached per-message blocks."""

    def __init__(
        self,
        counter: TokenCounter,
        template: ChatTemplate | None = None,
        *,
        enable_thinking: bool = False,
        add_generation_prompt: bool = True,
        preserve_thinking: bool = False,
    ) -> None:
        self.counter = counter
        self.template = template or ChatTemplate.default()
        self.enable_thinking = enable_thinking
        self.add_generation_prompt = add_generation_prompt
        self.preserve_thinking = preserve_thinking
        self.mode = "incremental"
        """"incremental", or "whole" once additivity failed verification for this template."""
        self._verified = False
        self._blocks: dict[tuple[str, str], int] = {}
        self._heads: dict[tuple[str, str], int] = {}
        self._constants: dict[str, int] = {}
        self.stats = {"hits": 0, "misses": 0, "whole_renders": 0}

    # -- whole render (the reference, and the fallback) ----------------------------------------

    def _kwargs(self) -> dict[str, Any]:
        return {"preserve_thinking": True} if self.preserve_thinking else {}

    def render(
        self,
        messages: Sequence[MessageLike],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool | None = None,
    ) -> str:
        """The whole prompt text, as the server renders it."""
        agp = self.add_generation_prompt if add_generation_prompt is None else add_generation_prompt
        return self.template.render(
            [_wire(m) for m in messages],
            tools,
            add_generation_prompt=agp,
            enable_thinking=self.enable_thinking,
            **self._kwargs(),
        )

    def count_whole(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Naive exact count: render everything and tokenize everything."""
        self.stats["whole_renders"] += 1
        return self.counter.count(self.render(messages, tools))

    # -- probes ---------------------------------------------------------------------------------

    def _probe(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        text = self.template.render_prepared(
            prepare_messages(messages),
            tools,
            add_generation_prompt=False,
            enable_thinking=self.enable_thinking,
            **self._kwargs(),
        )
        return self.counter.count(text)

    def _constant(self, name: str) -> int:
        value = self._constants.get(name)
        if value is not None:
            return value
        u, t = _PROBE_USER, _PROBE_TOOL
        if name == "base":
            value = self._probe([u])
        elif name == "tt":
            value = self._probe([u, t, t])
        elif name == "run":
            core_t = self._probe([u, t, t, t]) - self._constant("tt")
            value = self._probe([u, t]) - self._constant("base") - core_t
        elif name == "gen":
            text = self.template.render(
                [u],
                None,
                add_generation_prompt=True,
                enable_thinking=self.enable_thinking,
                **self._kwargs(),
            )
            value = self.counter.count(text) - self._constant("base")
        else:  # pragma: no cover - internal names only
            raise KeyError(name)
        self._constants[name] = value
        return value

    def _block(self, message: MessageLike, variant: str) -> int:
        key = (_fingerprint(message), variant)
        cached = self._blocks.get(key)
        if cached is not None:
            self.stats["hits"] += 1
            return cached
        self.stats["misses"] += 1
        wire = _wire(message)
        u, t = _PROBE_USER, _PROBE_TOOL
        if variant == "kept" or variant == "user":
            value = self._probe([u, wire]) - self._constant("base")
        elif variant == "dropped":
            value = self._probe([wire, u]) - self._constant("base")
        elif variant == "tool":
            value = self._probe([u, t, wire, t]) - self._constant("tt")
        else:  # pragma: no cover - internal names only
            raise KeyError(variant)
        self._blocks[key] = value
        return value

    def _head(self, system: MessageLike | None, tools: list[dict[str, Any]] | None) -> int:
        """System message and tools block together (the template merges them)."""
        tools_key = json.dumps(tools, sort_keys=True, ensure_ascii=False) if tools else ""
        key = ("" if system is None else _fingerprint(system), tools_key)
        cached = self._heads.get(key)
        if cached is not None:
            return cached
        if system is None and not tools:
            value = 0
        else:
            head = [] if system is None else [_wire(system)]
            value = self._probe([*head, _PROBE_USER], tools) - self._constant("base")
        self._heads[key] = value
        return value

    # -- the fast path --------------------------------------------------------------------------

    def block_counts(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> list[int]:
        """Tokens attributed to each message (tool-turn framing goes to the run's first result;
        the tools block to the system message, or to the first message without one)."""
        wires = [_wire(m) for m in messages]
        if not wires:
            raise TemplateError("no messages to count")
        last_query = -1
        for index in range(len(wires) - 1, -1, -1):
            if _is_query(wires[index]):
                last_query = index
                break
        if last_query < 0:
            # Let the template produce its own refusal (or its own count if it has none).
            self.render(messages, tools)
            raise TemplateError("no user query in messages; the count is not defined")
        counts: list[int] = []
        start = 0
        if wires[0].get("role") == "system":
            counts.append(self._head(messages[0], tools))
            start = 1
        head_without_system = self._head(None, tools) if start == 0 else 0
        run = self._constant("run")
        for index in range(start, len(wires)):
            role = wires[index].get("role")
            message = messages[index]
            if role == "assistant":
                kept = self.preserve_thinking or index > last_query
                value = self._block(message, "kept" if kept else "dropped")
            elif role == "tool":
                value = self._block(message, "tool")
                if index == 0 or wires[index - 1].get("role") != "tool":
                    value += run
            else:
                value = self._block(message, "user")
            counts.append(value)
        counts[0] += head_without_system
        return counts

    def count(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Exact prompt tokens (generation prompt included if configured)."""
        if self.mode == "whole":
            return self.count_whole(messages, tools)
        if not self._verified:
            self._verified = True
            if not self.verify(messages, tools):
                return self.count_whole(messages, tools)
        total = sum(self.block_counts(messages, tools))
        return total + (self._constant("gen") if self.add_generation_prompt else 0)

    def verify(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> bool:
        """Compare the block sum with a whole render; switch to whole renders if they differ."""
        whole = self.count_whole(messages, tools)
        summed = sum(self.block_counts(messages, tools))
        summed += self._constant("gen") if self.add_generation_prompt else 0
        if summed != whole:
            _log.warning(
                "chat template %s is not additive over these messages (sum %d != whole %d); "
                "counting by whole renders from now on",
                self.template.origin,
                summed,
                whole,
            )
            self.mode = "whole"
            return False
        return True

"""Shared pieces for the LLM integration tests against the vLLM-dialect double (real HTTP)."""

from __future__ import annotations

import json
import math
from typing import Any

from emil.llm.types import ChatRequest

CHARS_PER_TOKEN = 2.6  # what Qwen3.6 does on Emil's tool results (field notes)


def server_counter(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, thinking: bool
) -> int:
    """The double's prompt counter in these tests: deterministic, 2.6 chars per token.

    (The default counter is emil.context.count_prompt_tokens; a fixed ratio makes the expected
    numbers of each test easy to read.)
    """
    text = json.dumps(messages) + (json.dumps(tools) if tools else "")
    return math.ceil(len(text) / CHARS_PER_TOKEN) + 4 * len(messages)


def heuristic(messages: list[dict[str, Any]]) -> int:
    """Emil's old 4-chars-per-token estimate: the miscalibrated predictor of the field notes."""
    return math.ceil(len(json.dumps(messages)) / 4)


class Assembler:
    """A stand-in for the context manager: newest messages that fit ``limit`` predicted tokens."""

    def __init__(self, turns: int, *, budget: int, output: int, exact: bool = False,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.history = [
            {"role": "user" if i % 2 == 0 else "assistant",
             "content": f"turn {i}: " + "the zombie hit me near the birch forest. " * 8}
            for i in range(turns)
        ]
        self.budget, self.output, self.exact = budget, output, exact
        self.extra_body = extra_body or {}
        self.limits: list[int | None] = []

    def predict(self, messages: list[dict[str, Any]]) -> int:
        return server_counter(messages, None, False) if self.exact else heuristic(messages)

    def __call__(self, limit: int | None) -> ChatRequest:
        self.limits.append(limit)
        cap = self.budget if limit is None else min(self.budget, limit)
        kept: list[dict[str, Any]] = []
        for message in reversed(self.history):
            if self.predict([message, *kept]) > cap:
                break
            kept.insert(0, message)
        return ChatRequest(messages=kept, max_completion_tokens=self.output,
                           predicted_prompt_tokens=self.predict(kept),
                           extra_body=self.extra_body)

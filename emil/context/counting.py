"""Exact prompt counts: the model's chat template rendered over messages + tools, tokenized."""

from __future__ import annotations

import functools
from typing import Any

from emil.context.template import ChatTemplate
from emil.context.tokens import TokenCounter, get_token_counter

__all__ = ["count_prompt_tokens"]


@functools.lru_cache(maxsize=16)
def _compiled(source: str) -> ChatTemplate:
    return ChatTemplate.from_source(source)


def count_prompt_tokens(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    tokenizer: str | TokenCounter = "qwen3.6",
    chat_template: str | None = None,
    enable_thinking: bool = False,
    add_generation_prompt: bool = True,
) -> int:
    """Tokens of the prompt vLLM builds from these OpenAI-format messages and tools.

    ``chat_template`` is Jinja source text (None = Emil's shipped Qwen3.5/3.6 template);
    ``tokenizer`` a model name, tokenizer.json path, model directory or a counter. Raises
    UnknownTokenizerError for an unknown tokenizer and TemplateError when the template refuses
    the messages (e.g. no user query).
    """
    counter = get_token_counter(tokenizer) if isinstance(tokenizer, str) else tokenizer
    template = ChatTemplate.default() if chat_template is None else _compiled(chat_template)
    text = template.render(
        messages,
        tools,
        add_generation_prompt=add_generation_prompt,
        enable_thinking=enable_thinking,
    )
    return counter.count(text)

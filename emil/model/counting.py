"""Exact prompt counts: the model's chat template rendered over messages + tools, tokenized."""

from __future__ import annotations

import functools
from typing import Any

from emil.model.family import family_for_model
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate, TemplateError
from emil.model.tokens import TokenCounter

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
    preserve_thinking: bool = False,
) -> int:
    """Tokens of the prompt vLLM builds from these OpenAI-format messages and tools.

    ``chat_template`` is Jinja source text (None = the template of ``tokenizer``'s model family,
    e.g. Qwen3's for ``"Qwen/Qwen3-8B"``; TemplateError when the name belongs to no family);
    ``tokenizer`` a model name, tokenizer.json path, model directory or a counter. Raises
    UnknownTokenizerError for an unknown tokenizer and TemplateError when the template refuses
    the messages (e.g. no user query). ``preserve_thinking`` is the template kwarg that keeps
    earlier turns' reasoning (Qwen3.5/3.6 strip it before the last user query otherwise); it is
    only passed to the template when true, as the server sees it.
    """
    counter = get_token_counter(tokenizer) if isinstance(tokenizer, str) else tokenizer
    if chat_template is not None:
        template = _compiled(chat_template)
    else:
        family = family_for_model(tokenizer) if isinstance(tokenizer, str) else None
        if family is None or family.template is None:
            raise TemplateError(
                f"no chat template for {getattr(tokenizer, 'name', tokenizer)!r}: it belongs to no "
                "shipped model family; pass chat_template (the model's own template)"
            )
        template = family.template()
    text = template.render(
        messages,
        tools,
        add_generation_prompt=add_generation_prompt,
        enable_thinking=enable_thinking,
        **({"preserve_thinking": True} if preserve_thinking else {}),
    )
    return counter.count(text)

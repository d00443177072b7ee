"""What Emil knows about the served model: its family, tokenizer and chat template.

A ``ModelFamily`` (``family``) bundles the tokenizer (``tokens``: exact local counters, the
server's /tokenize for a model of no family), the chat template (``template``: rendered as
transformers and vLLM render it; Emil's own templates in ``templates/``, their per-message
twins in ``qwen_blocks``), the template kwargs and the user-query rule. ``count_prompt_tokens``
(``counting``) is one exact count. It is resolved once at start (emil.agent.model_family);
emil.context budgets and trims with it. See docs/context.md "Model families".
"""

from emil.model.counting import count_prompt_tokens
from emil.model.family import ModelFamily, family_by_name, family_for_model
from emil.model.template import ChatTemplate, TemplateError
from emil.model.tokens import ServerTokenizeCounter, TokenCounter, get_token_counter

__all__ = [
    "ChatTemplate",
    "ModelFamily",
    "ServerTokenizeCounter",
    "TemplateError",
    "TokenCounter",
    "count_prompt_tokens",
    "family_by_name",
    "family_for_model",
    "get_token_counter",
]

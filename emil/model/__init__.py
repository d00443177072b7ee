"""What Emil knows about the served model; the one package that names model families.

- ``family``   :class:`ModelFamily`: tokenizer, chat template, the template kwargs it reads,
  the user-query rule, where ``<think>`` shows, special tokens; the shipped families and
  :data:`DEFAULT_FAMILY`
- ``tokens``   exact local counters (Qwen vocabularies, any tokenizer.json; the 4-chars
  heuristic for comparisons only); the server's ``/tokenize`` is beside the client in
  :mod:`emil.llm.tokenize`
- ``cached``   a counter that counts each text (and line piece) once, for sweeps
- ``template`` chat templates rendered as transformers and vLLM render them (Emil's own in
  ``templates/``, their per-message twins in ``qwen_blocks``); ``prepare`` the messages and
  tool specs as vLLM 0.32 hands them to a template
- ``resolve``  names, settings and recording headers -> a family or a counter
- ``verify``   a resolved family checked against the server's own count
- ``counting`` one exact count of a prompt

A family is resolved once at start (``resolve``); emil.context budgets and trims with it. No
module outside this package tests a model name. See docs/context.md "Model families".
"""

from emil.model.counting import count_prompt_tokens
from emil.model.family import ModelFamily, family_by_name, family_for_model
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate, TemplateError
from emil.model.tokens import TokenCounter

__all__ = [
    "ChatTemplate",
    "ModelFamily",
    "TemplateError",
    "TokenCounter",
    "count_prompt_tokens",
    "family_by_name",
    "family_for_model",
    "get_token_counter",
]

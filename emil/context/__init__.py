"""The token-exact context window: history, budget, the trim ladder, the manager.

``ContextManager`` fits a ``History`` into a ``Budget`` with the trim ladder, counting with the
served model's family (emil.model: tokenizer, chat template; ``count_prompt_tokens``, one exact
count, is re-exported here with the model names the context API takes). The parts live in one
module each: ``incremental`` (the per-message block cache), ``history``, ``budget``, ``ladder``
(the rung contract and driver), ``rungs`` (the built-in rungs and their registry),
``untrusted`` (the special-token neutraliser) and ``manager``. See docs/context.md.
"""

from emil.context.budget import Budget, Calibration, CalibrationReport
from emil.context.history import History, Message
from emil.context.incremental import IncrementalCounter
from emil.context.ladder import LadderConfig, Rung, TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.context.rungs import register_rung
from emil.model.counting import count_prompt_tokens
from emil.model.family import ModelFamily, family_for_model
from emil.model.template import ChatTemplate, TemplateError
from emil.model.tokens import ServerTokenizeCounter, TokenCounter, get_token_counter

__all__ = [
    "Assembly",
    "Budget",
    "Calibration",
    "CalibrationReport",
    "ChatTemplate",
    "ContextManager",
    "History",
    "IncrementalCounter",
    "LadderConfig",
    "Message",
    "ModelFamily",
    "Rung",
    "ServerTokenizeCounter",
    "TemplateError",
    "TokenCounter",
    "TrimRecord",
    "count_prompt_tokens",
    "family_for_model",
    "get_token_counter",
    "register_rung",
]

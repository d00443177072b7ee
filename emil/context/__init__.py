"""The token-exact context window: counting, history, trim ladder and budget.

``count_prompt_tokens`` is the entry point for one exact count; ``ContextManager`` fits a
``History`` into a ``Budget`` with the trim ladder; a ``ModelFamily`` (``family``) is what Emil
knows about the served model. The parts live in one module each: ``family`` (model families),
``tokens`` (counters, the server's /tokenize included), ``template`` (chat templates),
``incremental`` (cached counting), ``history``, ``budget``, ``ladder`` (the rung contract and
driver), ``rungs`` (the built-in rungs and their registry) and ``manager``. See docs/context.md.
"""

from emil.context.budget import Budget, Calibration, CalibrationReport
from emil.context.counting import count_prompt_tokens
from emil.context.family import ModelFamily, family_for_model
from emil.context.history import History, Message
from emil.context.incremental import IncrementalCounter
from emil.context.ladder import LadderConfig, Rung, TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.context.rungs import register_rung
from emil.context.template import ChatTemplate, TemplateError
from emil.context.tokens import ServerTokenizeCounter, TokenCounter, get_token_counter

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

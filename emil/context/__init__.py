"""The token-exact context window: history, budget, the trim ladder, the manager.

``ContextManager`` fits a ``History`` into a ``Budget`` with the trim ladder, counting with the
served model's family (emil.model: tokenizer, chat template; the context package never tests
a model name). The parts live in one module each: ``incremental`` (the per-message block cache), ``history``, ``budget``, ``ladder``
(the rung contract and driver), ``rungs`` (the built-in rungs and their registry),
``untrusted`` (the special-token neutraliser) and ``manager``. See docs/context.md.
"""

from emil.context.budget import Budget, Calibration, CalibrationReport
from emil.context.history import History, Message
from emil.context.incremental import IncrementalCounter
from emil.context.ladder import LadderConfig, Rung, TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.context.rungs import register_rung

__all__ = [
    "Assembly",
    "Budget",
    "Calibration",
    "CalibrationReport",
    "ContextManager",
    "History",
    "IncrementalCounter",
    "LadderConfig",
    "Message",
    "Rung",
    "TrimRecord",
    "register_rung",
]

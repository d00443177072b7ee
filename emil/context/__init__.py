"""The token-exact context window: counting, history, trim ladder and budget.

``count_prompt_tokens`` is the public entry point for one exact count; ``tokens``, ``template``,
``history``, ``budget``, ``ladder`` and ``manager`` hold the parts (see docs/context.md).
"""

from emil.context.counting import count_prompt_tokens

__all__ = ["count_prompt_tokens"]

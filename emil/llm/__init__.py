"""The model side: one seam (``complete``), the live client, and the failure policy.

- ``types``          the seam: ``ChatRequest``, ``Completion``, ``ToolCall``, the ``LLM`` protocol
- ``client``         the live client (AsyncOpenAI against vLLM); ``response`` validates its answers
- ``tokenize``       the server's own count (``POST /tokenize``)
- ``classify``       what a failure means; ``overflow`` vLLM's overflow wordings, parsed
- ``recovery``       what to do next (a sans-IO flow and its driver); ``recovery_steps`` its
  vocabulary. Waiting out an outage is :mod:`emil.backoff`'s.
"""

from emil.llm.overflow import Overflow, detect_clamp, parse_overflow

__all__ = ["Overflow", "detect_clamp", "parse_overflow"]

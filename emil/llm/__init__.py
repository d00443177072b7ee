"""The model side: one seam (``complete``), vLLM's overflow wordings, and the failure policy.

``emil.llm.client`` holds the live client and ``emil.llm.response`` the validation of its answers;
``emil.llm.classify`` says what a failure means, ``emil.llm.recovery`` what to do next (the
sans-IO flow and its driver); waiting out an outage is ``emil.backoff``'s.
"""

from emil.llm.overflow import Overflow, detect_clamp, parse_overflow

__all__ = ["Overflow", "detect_clamp", "parse_overflow"]

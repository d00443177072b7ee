"""The model side: one seam (``complete``), vLLM's overflow wordings, and the failure policy.

``emil.llm.client`` holds the live client, ``emil.llm.retry`` the sans-IO recovery policy.
"""

from emil.llm.overflow import Overflow, detect_clamp, parse_overflow

__all__ = ["Overflow", "detect_clamp", "parse_overflow"]

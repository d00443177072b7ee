"""Synthetic sessions (emil.context.synthetic) as traces, so a whole day of play can be swept."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import takewhile

from emil.config import Settings
from emil.context.synthetic import SYSTEM_PROMPT, emil_tool_specs, synthetic_turns
from emil.offline.content import Piece, message_pieces
from emil.offline.trace import SessionTrace

__all__ = ["synthetic_pieces", "synthetic_trace"]

_START = 1_780_000_000.0


_PRESERVE_THINKING: bool = Settings.model_fields["preserve_thinking"].default


def synthetic_trace(
    hours: float,
    *,
    seed: int = 7,
    reasoning: bool = True,
    preserve_thinking: bool = _PRESERVE_THINKING,
    model_family: str = "qwen3.6",
) -> SessionTrace:
    """``hours`` of seeded Emil-like play (about 170 turns an hour), with Emil's tool specs.

    Assistant messages carry reasoning (a thinking model), and the session runs with Emil's
    default ``preserve_thinking`` unless told otherwise, counted as ``model_family``.
    """
    if hours <= 0:
        raise ValueError(f"--synthetic-hours must be positive, got {hours}")
    end = _START + hours * 3600.0
    turns = takewhile(lambda t: t.t <= end, synthetic_turns(seed, start_time=_START, reasoning=reasoning))
    return SessionTrace.from_turns(
        (t.messages for t in turns),
        name=f"synthetic {hours:g} h (seed {seed})",
        system_prompt=SYSTEM_PROMPT,
        tools=emil_tool_specs(),
        preserve_thinking=preserve_thinking,
        model_family=model_family,
    )


def synthetic_pieces(hours: float, *, seed: int = 7) -> Iterator[Piece]:
    """The synthetic session's text by content category (for chars_per_token)."""
    trace = synthetic_trace(hours, seed=seed)
    messages = (s.message for s in trace.steps if s.message is not None)
    return message_pieces(messages, system_prompt=trace.system_prompt, tools=trace.tools)

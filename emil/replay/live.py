"""A live model's answer set beside the recorded one: tool-call validity, tokens, latency.

A live call is valid when Emil's one validation of a tool call says so
(:func:`emil.world.actions.validate_tool_call`: the tool classes, as live play checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emil.llm.types import Completion
from emil.world.actions import validate_tool_call

__all__ = ["LiveStep", "compare_live"]

def _calls(c: Completion | None) -> list[str]:
    return [] if c is None else [tc.name for tc in c.tool_calls]


@dataclass(frozen=True)
class LiveStep:
    """One step answered by the recording and by a live model."""

    turn: int
    step: int
    recorded_calls: tuple[str, ...]
    live_calls: tuple[str, ...]
    live_invalid: tuple[str, ...]
    """Problems of the live model's tool calls (empty = every call valid)."""
    recorded_prompt_tokens: int | None
    live_prompt_tokens: int | None
    recorded_completion_tokens: int | None
    live_completion_tokens: int | None
    recorded_latency_s: float | None
    live_latency_s: float
    live_text: str | None
    error: str | None = None
    predicted_prompt_tokens: int | None = None
    """Today's exact count of the prompt sent to the live model (vs ``live_prompt_tokens``)."""

    @property
    def same_calls(self) -> bool:
        return self.recorded_calls == self.live_calls

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "step": self.step,
            "recorded_calls": list(self.recorded_calls),
            "live_calls": list(self.live_calls),
            "live_invalid": list(self.live_invalid),
            "same_calls": self.same_calls,
            "recorded_prompt_tokens": self.recorded_prompt_tokens,
            "live_prompt_tokens": self.live_prompt_tokens,
            "recorded_completion_tokens": self.recorded_completion_tokens,
            "live_completion_tokens": self.live_completion_tokens,
            "recorded_latency_s": self.recorded_latency_s,
            "live_latency_s": round(self.live_latency_s, 4),
            "live_text": self.live_text,
            "error": self.error,
        }


def compare_live(
    turn: int,
    step: int,
    recorded: Completion,
    live: Completion | None,
    *,
    elapsed_s: float,
    error: str | None = None,
    predicted: int | None = None,
) -> LiveStep:
    """Set a live answer beside the recorded one (``predicted``: today's count of the prompt)."""
    problems: list[str] = []
    if live is not None:
        for call in live.tool_calls:
            why = validate_tool_call(call).error
            if why is not None:
                problems.append(f"{call.name}: {why}")
    ru, lu = recorded.usage, live.usage if live is not None else None
    return LiveStep(
        turn=turn,
        step=step,
        recorded_calls=tuple(_calls(recorded)),
        live_calls=tuple(_calls(live)),
        live_invalid=tuple(problems),
        recorded_prompt_tokens=ru.prompt_tokens if ru else None,
        live_prompt_tokens=lu.prompt_tokens if lu else None,
        recorded_completion_tokens=ru.completion_tokens if ru else None,
        live_completion_tokens=lu.completion_tokens if lu else None,
        recorded_latency_s=recorded.timings.total_s if recorded.timings else None,
        live_latency_s=(live.timings.total_s if live is not None and live.timings else elapsed_s),
        live_text=live.content if live is not None else None,
        predicted_prompt_tokens=predicted,
        error=error,
    )

"""A live model's answer set beside the recorded one: tool-call validity, tokens, latency."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emil.llm.types import Completion, ToolCall

__all__ = ["LiveStep", "compare_live", "tool_call_problem"]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    if not kinds:
        return True
    for k in kinds:
        types = _JSON_TYPES.get(k)
        if types is None:
            return True
        # JSON booleans are not numbers, although Python's bool is an int.
        if isinstance(value, bool) and k in ("integer", "number"):
            continue
        if isinstance(value, types):
            return True
    return False


def tool_call_problem(call: ToolCall, tools: Sequence[dict[str, Any]]) -> str | None:
    """Why a call is invalid against the tool specs (unknown tool, not a JSON object, missing
    required or unknown arguments, wrong JSON type, value outside an enum), or None."""
    if call.error:
        return call.error
    spec = next(
        (t.get("function", t) for t in tools if t.get("function", t).get("name") == call.name), None
    )
    if spec is None:
        return f"unknown tool {call.name!r}"
    args = call.arguments
    if args is None:
        try:
            parsed = json.loads(call.raw_arguments or "{}")
        except json.JSONDecodeError as e:
            return f"arguments are not JSON ({e.msg})"
        if not isinstance(parsed, dict):
            return "arguments are not a JSON object"
        args = parsed
    params = spec.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    missing = [k for k in params.get("required") or () if k not in args]
    if missing:
        return f"missing required argument(s) {', '.join(missing)}"
    if params.get("additionalProperties") is False:
        extra = [k for k in args if k not in props]
        if extra:
            return f"unknown argument(s) {', '.join(extra)}"
    for key, value in args.items():
        schema = props.get(key)
        if not isinstance(schema, dict):
            continue
        if not _type_ok(value, schema):
            return f"argument {key!r} should be {schema.get('type')}, got {type(value).__name__}"
        if "enum" in schema and value not in schema["enum"]:
            return f"argument {key!r}={value!r} is not one of {schema['enum']}"
    return None


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
    tools: Sequence[dict[str, Any]],
    *,
    elapsed_s: float,
    error: str | None = None,
    predicted: int | None = None,
) -> LiveStep:
    """Set a live answer beside the recorded one (``predicted``: today's count of the prompt)."""
    problems: list[str] = []
    if live is not None:
        for call in live.tool_calls:
            why = tool_call_problem(call, tools)
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

"""Crafted recordings and tokenizers whose answers are known by construction (test helpers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emil.recording import (
    CompletionRecord,
    EventRecord,
    HeaderRecord,
    MessageRecord,
    ObservationRecord,
    RecordedToolCall,
    Recorder,
    RequestRecord,
    ToolResultRecord,
)


def word_tokenizer(path: Path) -> Path:
    """A tokenizer.json where every whitespace-separated word is exactly one token."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "ab": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(path))
    return path


def write_records(path: Path, records: list[Any]) -> Path:
    with Recorder(path) as rec:
        for r in records:
            rec.write(r)
    return path


def msg(ref: int, role: str, kind: str, content: str | None, **extra: Any) -> MessageRecord:
    event_time = extra.pop("event_time", None)
    turn = extra.pop("turn", None)
    return MessageRecord(
        ref=str(ref), id=ref, origin="history", message_kind=kind, event_time=event_time,
        openai={"role": role, "content": content, **extra}, turn=turn,
    )


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def simple_turn(
    turn: int, first_id: int, *, t: float, observation: str, args: str, result: str,
    reasoning: str | None = None, answer: str = "ok",
) -> list[Any]:
    """One recorded turn: observation, a tool call, its result, a final answer, with requests."""
    obs_id, call_msg_id, res_id, ans_id = first_id, first_id + 1, first_id + 2, first_id + 3
    call_id = f"c{turn}"
    assistant: dict[str, Any] = {"tool_calls": [tool_call(call_id, "say", args)]}
    if reasoning:
        assistant["reasoning"] = reasoning
    return [
        EventRecord(t=t, event={"kind": "chat", "t": t, "sender": "alex", "text": observation}, priority="normal"),
        msg(obs_id, "user", "observation", observation, event_time=t, turn=turn),
        ObservationRecord(t=t, turn=turn, ref=str(obs_id), reason="chat from alex", events=1),
        RequestRecord(t=t, turn=turn, step=1, refs=[]),
        CompletionRecord(
            t=t + 1, turn=turn, step=1, reasoning=reasoning,
            tool_calls=[RecordedToolCall(id=call_id, name="say", raw_arguments=args)],
            prompt_tokens=100, completion_tokens=10, total_s=0.5, assistant_ref=str(call_msg_id),
        ),
        msg(call_msg_id, "assistant", "assistant", None, turn=turn, **assistant),
        ToolResultRecord(t=t + 2, turn=turn, step=1, call_id=call_id, name="say", ok=True, text=result, ref=str(res_id)),
        msg(res_id, "tool", "tool_result", result, tool_call_id=call_id, turn=turn),
        RequestRecord(t=t + 2, turn=turn, step=2, refs=[]),
        CompletionRecord(t=t + 3, turn=turn, step=2, content=answer, prompt_tokens=120, completion_tokens=2, total_s=0.2, assistant_ref=str(ans_id)),
        msg(ans_id, "assistant", "assistant", answer, turn=turn),
    ]


def header(**fields: Any) -> HeaderRecord:
    fields.setdefault("system_prompt", "You are Emil.")
    fields.setdefault("tools", [{"a": "b"}])
    return HeaderRecord(**fields)


LOOK_AND_SAY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "look_around",
            "description": "Blocks and entities within a radius.",
            "parameters": {
                "type": "object",
                "properties": {"radius": {"type": "integer"}},
                "required": ["radius"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "say",
            "description": "Say something in chat.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    },
]

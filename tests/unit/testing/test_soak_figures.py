"""The soak's figures read from a recording: shapes of answers, failures, deadlines, counts."""

from __future__ import annotations

from emil.config import Settings
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    RecordedToolCall,
    RequestRecord,
    RetryRecord,
    ToolResultRecord,
    TurnRecord,
)
from emil.testing.soak import soak_figures

S = Settings(request_timeout_s=60, action_timeout_s=240)


def test_answers_failures_deadlines_and_counts() -> None:
    records = [
        RequestRecord(turn=1, step=1, attempt=0, predicted_tokens=500),
        CompletionRecord(turn=1, step=1, attempt=0, content="xyz", finish_reason="length",
                         prompt_tokens=500, total_s=2.0, first_token_s=0.5),
        TurnRecord(turn=1, steps=1, duration_s=2.5),
        RequestRecord(turn=2, step=1, attempt=0, predicted_tokens=600),
        CompletionRecord(turn=2, step=1, attempt=0, prompt_tokens=603, finish_reason="tool_calls",
                         tool_calls=[RecordedToolCall(id="a", name="say", raw_arguments="{",
                                                      error="arguments are not valid JSON")]),
        ToolResultRecord(turn=2, step=1, name="say", ok=False, text="error: arguments are not valid JSON"),
        RequestRecord(turn=2, step=2, attempt=0, predicted_tokens=640),
        CompletionRecord(turn=2, step=2, attempt=0, prompt_tokens=640, finish_reason="tool_calls",
                         tool_calls=[RecordedToolCall(id="b", name="follow", raw_arguments="{}",
                                                      arguments={"player": "alex"})]),
        ToolResultRecord(turn=2, step=2, name="follow", ok=False, text="not run: interrupted (hit by cody)"),
        TurnRecord(turn=2, steps=2, interrupted=True, duration_s=9.0),
        RequestRecord(turn=3, step=1, attempt=0, predicted_tokens=700),
        CompletionRecord(turn=3, step=1, attempt=0, content="  ", finish_reason="stop", prompt_tokens=700),
        RetryRecord(turn=4, service="llm endpoint", delay_s=30.0),
        ErrorRecord(turn=4, where="llm", error_type="ServerFault", message="html"),
        TurnRecord(turn=4, steps=1, failed="ServerFault: the server answered html", duration_s=95.0),
        TurnRecord(turn=5, steps=1, duration_s=70.0),  # one step may take request_timeout_s: 65 s with slack
    ]
    f = soak_figures(records, S)
    assert f.turns == 4 and f.interrupted_turns == 1  # turn 3 never closed: not counted
    assert f.failed_turns == {"ServerFault": 1}
    assert f.answers == {"content only": 1, "malformed tool call": 1, "tool calls": 1, "empty": 1}
    assert f.tool_results == {"say failed": 1, "follow not run": 1}
    assert (f.counted, f.exact, f.worst_difference) == (4, 3, 3)
    # turn 4 took 95 s: one step's 60 s plus the 30 s it waited (recorded) and 5 s of slack: inside
    assert f.over_deadline == ["turn 5: 70.0 s > 65 s"]
    assert f.errors == {"llm: ServerFault": 1} and f.retries == 1
    text = "\n".join(f.lines())
    assert "turns: 4 (2 completed, 1 interrupted, 1 failed: ServerFault 1)" in text
    assert "prompt tokens predicted = server's: 3 of 4 requests (largest difference 3)" in text
    assert "turns past their deadline: 1 (first: turn 5: 70.0 s > 65 s)" in text

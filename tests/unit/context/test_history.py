"""Messages are immutable wire records; History groups them into turns and knows its horizon."""

from __future__ import annotations

import dataclasses

import pytest

from emil.context.history import History, Message


def test_message_wire_format() -> None:
    call = {"id": "c1", "name": "dig", "arguments": '{"x": 1}'}
    assistant = Message.assistant(None, tool_calls=[call], reasoning="because")
    assert assistant.to_openai() == {
        "role": "assistant",
        "content": None,
        "reasoning": "because",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "dig", "arguments": '{"x": 1}'}}
        ],
    }
    assert assistant.tool_calls == (call,)
    result = Message.tool_result("c1", "ok")
    assert result.to_openai() == {"role": "tool", "content": "ok", "tool_call_id": "c1"}
    assert result.kind == "tool_result"


def test_status_rides_after_the_content() -> None:
    obs = Message.observation("Steve: hi", status='{"hp": 20}', event_time=5.0)
    assert obs.to_openai()["content"] == 'Steve: hi\n\n{"hp": 20}'
    assert obs.kind == "observation"
    assert Message.chat("x").kind == "chat"


def test_kind_defaults_follow_the_role() -> None:
    assert Message("assistant", "x").kind == "assistant"
    assert Message("tool", "x", tool_call_id="a").kind == "tool_result"
    assert Message("system", "x").kind == "system"
    assert Message("user", "x").kind == "observation"


def test_messages_are_frozen_and_compare_by_content() -> None:
    a = Message.chat("same", event_time=1.0)
    b = Message.chat("same", event_time=1.0)
    assert a.id != b.id
    assert a == b
    assert hash(a) == hash(b)
    assert a != Message.chat("other", event_time=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.content = "changed"  # type: ignore[misc]
    changed = a.with_changes(content="new")
    assert changed.content == "new" and a.content == "same" and changed.id != a.id


def test_history_is_immutable_and_grouped_into_turns() -> None:
    empty = History()
    one = empty.start_turn(Message.observation("a", event_time=100.0))
    two = one.append(Message.assistant("b")).start_turn(Message.chat("c", event_time=160.0))
    assert empty.turns == ()
    assert len(one.turns) == 1
    assert [len(t) for t in two.turns] == [2, 1]
    assert [m.content for m in two.messages()] == ["a", "b", "c"]
    assert len(two) == 3
    assert History().append(Message.chat("x")).turns[0][0].content == "x"


def test_horizon_is_the_age_of_the_oldest_timed_event() -> None:
    history = (
        History()
        .start_turn(Message.observation("a", event_time=100.0))
        .append(Message.assistant("b"))
    )
    history = history.start_turn(Message.observation("c", event_time=250.0))
    assert history.horizon(300.0) == 200.0
    assert History().start_turn(Message.chat("untimed")).horizon(300.0) is None

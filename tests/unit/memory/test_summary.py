"""The summary request and the checks on its answer (emil.memory.summary), and the SCRIPTED
summariser the double answers with (emil.testing.summaries)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from emil.context.history import Message
from emil.exceptions import ConfigurationError
from emil.memory.notes import Fact
from emil.memory.summary import (
    SCHEMA,
    FoldedTurnsSummary,
    Parsed,
    is_summary_request,
    load_summary_prompt,
    parse_summary,
    summary_request,
    turn_key,
    turns_text,
)
from emil.offline.synthetic import synthetic_turns
from emil.testing.script import ScriptRequest
from emil.testing.summaries import SCRIPTED_MARK, scripted_summary

TURNS = [t.messages for t in itertools.islice(synthetic_turns(0), 40)]


def _request(turns: list[tuple[Message, ...]] = TURNS):  # type: ignore[no-untyped-def]
    return summary_request(turns, prompt=load_summary_prompt(None, name="Emil"), name="Emil", max_tokens=400)


def test_the_request_is_short_bounded_and_asks_for_the_schema() -> None:
    r = _request()
    assert r.tools is None and not r.enable_thinking and r.temperature == 0.0 and r.max_completion_tokens == 400
    assert r.extra_body == {"structured_outputs": {"json": SCHEMA}}
    assert is_summary_request({"structured_outputs": {"json": SCHEMA}}) and not is_summary_request({})
    system, user = r.messages
    assert "Invent nothing" in system["content"] and "Emil" in system["content"]  # from prompts/summary.md.j2
    # One events line and one actions line per turn, statuses left out (they change every turn).
    assert user["content"].count(" events: ") == len(TURNS) and "[status]" not in user["content"]


def test_the_prompt_comes_from_prompts_dir_when_it_has_one(tmp_path: Path) -> None:
    (tmp_path / "summary.md.j2").write_text("Sum up for {{ name }}, at most {{ max_lines }} lines.")
    assert load_summary_prompt(tmp_path, name="Bob") == "Sum up for Bob, at most 12 lines.\n"
    assert "Invent nothing" in load_summary_prompt(tmp_path / "elsewhere", name="Bob")  # none there: shipped
    (tmp_path / "summary.md.j2").write_text("{{ broken")
    with pytest.raises(ConfigurationError, match=r"summary\.md\.j2 has an error"):
        load_summary_prompt(tmp_path, name="Bob")


def test_a_turn_key_survives_the_cheap_rungs_rewrites() -> None:
    turn = TURNS[3]
    rewritten = (turn[0].with_changes(status=None), *(m.with_changes(reasoning=None) for m in turn[1:]))
    assert turn_key(rewritten) == turn_key(turn)
    assert turn_key(TURNS[4]) != turn_key(turn)


def test_an_answer_is_checked_before_use() -> None:
    source = turns_text(TURNS, name="Emil")
    good = {"lines": ["08:01 alex asked for dirt <|im_end|>", ""], "facts": [
        {"about": "player", "subject": "alex", "topic": "asked", "detail": "dirt"},
        {"about": "player", "subject": "zed", "topic": "gave_me", "detail": "diamond"},  # nobody called zed
        {"about": "place", "subject": "chest", "topic": "at", "detail": "1,2,3"},  # coordinates never given
    ]}
    parsed = parse_summary(json.dumps(good), source=source)
    assert isinstance(parsed, Parsed)
    assert parsed.lines == ["08:01 alex asked for dirt ‹|im_end|›"]  # no control token survives
    assert parsed.facts == [Fact(about="player", subject="alex", topic="asked", detail="dirt")] and parsed.dropped_facts == 2
    assert parse_summary("not json", source=source) == "not JSON (Expecting value at 0)"
    assert str(parse_summary('{"facts": []}', source=source)).startswith("not a summary")
    assert parse_summary('{"lines": []}', source=source) == "no lines"
    assert parse_summary(None, source=source) == "empty answer"


def test_the_scripted_summariser_keeps_gifts_asks_places_and_promises_and_says_it_is_scripted() -> None:
    opening = Message.observation(
        '[events]\n- (!) alex says: "Emil, my chest is at 12 64 -7"\n- you picked up 3 bread (tossed by alex)\n'
        '- (!) cody says: "Emil, can you make me a sword?"',
        event_time=1_779_948_600.0,
    )
    call = {"id": "c1", "name": "say", "arguments": json.dumps({"text": "I'll make you a sword later, cody."})}
    turn = (opening, Message.assistant(None, tool_calls=[call]), Message.tool_result("c1", "said: 'I'll make you a sword later, cody.'"))
    request = summary_request([turn], prompt="p", name="Emil", max_tokens=400)
    reply = scripted_summary(ScriptRequest(messages=request.messages, body=request.extra_body))
    answer = FoldedTurnsSummary.model_validate_json(reply.content or "")
    assert answer.lines[0].startswith(SCRIPTED_MARK)
    text = "\n".join(answer.lines)
    assert "alex gave Emil 3 bread" in text and "sword" in text
    facts = {(f.subject, f.topic, f.detail) for f in answer.facts}
    assert {("alex", "gave_me", "bread"), ("chest", "at", "12,64,-7"), ("cody", "asked", "Emil, can you make me a sword?")} <= facts
    # Promised to the requester the words name (both alex and cody spoke to Emil in that turn).
    assert ("cody", "promised", "I'll make you a sword later, cody.") in facts
    assert ("alex", "promised", "I'll make you a sword later, cody.") not in facts
    parsed = parse_summary(reply.content, source=str(request.messages[1]["content"]))
    assert isinstance(parsed, Parsed) and parsed.dropped_facts == 0

"""The summary request and the checks on its answer (emil.memory.summary), and the SCRIPTED
text reducer the double answers with (emil.testing.reducer)."""

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
    answer_tokens,
    is_summary_request,
    load_summary_prompt,
    parse_summary,
    summary_request,
    turn_key,
    turns_text,
    words_for,
)
from emil.offline.synthetic import synthetic_turns
from emil.testing.reducer import REDUCER_MARK, reduce_text, reducer_summary
from emil.testing.script import ScriptRequest

TURNS = [t.messages for t in itertools.islice(synthetic_turns(0), 40)]


def _request(turns: list[tuple[Message, ...]] = TURNS):  # type: ignore[no-untyped-def]
    return summary_request(turns, prompt=load_summary_prompt(None, name="Emil", max_tokens=400), name="Emil", max_tokens=400)


def test_the_request_is_short_bounded_and_asks_for_the_schema() -> None:
    r = _request()
    assert r.tools is None and not r.enable_thinking and r.temperature == 0.0 and r.max_completion_tokens == answer_tokens(400)
    assert r.extra_body == {"structured_outputs": {"json": SCHEMA}}
    assert is_summary_request({"structured_outputs": {"json": SCHEMA}}) and not is_summary_request({})
    system, user = r.messages
    assert "Invent nothing" in system["content"] and "Emil" in system["content"]  # from prompts/summary.md.j2
    assert f"at most {words_for(400)} words" in system["content"]  # it asks for what fits the cap
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


def test_the_reducer_keeps_what_is_said_once_drops_the_routine_and_says_it_is_a_double() -> None:
    chatter = [f'- dana says: "{w} {i}"' for i, w in enumerate(("lol", "hahaha", "lol", "wheee") * 15)]
    opening = Message.observation(
        "[events]\n" + "\n".join([*chatter, '- (!) gus says: "Emil, the vault combination is seven nine two"',
                                   "- it is now night", "- it is now night"]),
        event_time=1_779_948_600.0,
    )
    turn = (opening, Message.assistant("OK."))
    request = summary_request([turn], prompt="p", name="Emil", max_tokens=40)
    reply = reducer_summary(ScriptRequest(messages=request.messages, max_tokens=request.max_completion_tokens))
    answer = FoldedTurnsSummary.model_validate_json(reply.content or "")
    assert answer.lines[0].startswith(REDUCER_MARK)
    text = "\n".join(answer.lines)
    assert "vault combination is seven nine two" in text
    assert text.count("dana says") < len(chatter) / 3  # the routine mostly left out
    assert Fact(about="player", subject="gus", topic="note", detail="Emil, the vault combination is seven nine two") in answer.facts
    parsed = parse_summary(reply.content, source=str(request.messages[1]["content"]))
    assert isinstance(parsed, Parsed) and parsed.dropped_facts == 0


def test_the_reducer_stays_within_what_it_is_given() -> None:
    text = "\n".join(f"08:{i:02d}:00 events: line {i} with the word w{i} and w{i + 1}" for i in range(60))
    for chars in (80, 400, 2000):
        kept = reduce_text(text, max_chars=chars)
        assert kept and sum(len(c) + 8 for _, c in kept) <= chars
        assert [c for _, c in kept] == sorted((c for _, c in kept), key=lambda c: int(c.split()[2]))  # in order

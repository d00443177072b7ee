"""The scripted oracle answers its run's lines with their calls, one per step, and nothing else."""

from __future__ import annotations

from emil.testing.oracle import Oracle
from emil.testing.script import ScriptRequest


def _req(tag: str, *messages: dict[str, str]) -> ScriptRequest:
    return ScriptRequest(messages=[{"role": "system", "content": f"[bench run {tag}]\nYou are Emil"}, *messages])


def test_a_line_gets_its_calls_in_order_then_a_note() -> None:
    oracle = Oracle()
    oracle.start("abc", [("give me 2 apples", [("give", {"player": "alex", "item": "apple", "count": 2}), ("say", {"text": "here"})])])
    user = {"role": "user", "content": '[events]\n- alex says: "Emil, give me 2 apples please"'}
    first = oracle(_req("abc", user))
    assert [c.name for c in first.tool_calls] == ["give"]
    second = oracle(_req("abc", user, {"role": "tool", "content": "tossed"}))
    assert [c.name for c in second.tool_calls] == ["say"]
    third = oracle(_req("abc", user, {"role": "tool", "content": "said"}))
    assert not third.tool_calls and third.content
    assert oracle.answered == ["give me 2 apples"] and not oracle.lines
    again = oracle(_req("abc", user))  # a line is answered once
    assert not again.tool_calls


def test_another_runs_requests_and_other_lines_get_no_call() -> None:
    oracle = Oracle()
    oracle.start("abc", [("follow me", [("follow", {"player": "alex"})])])
    user = {"role": "user", "content": '- alex says: "follow me"'}
    assert not oracle(_req("zzz", user)).tool_calls
    assert not oracle(_req("abc", {"role": "user", "content": '- alex says: "nice weather"'})).tool_calls
    assert oracle(_req("abc", user)).tool_calls


def test_repeats_fire_after_the_first_line() -> None:
    oracle = Oracle()
    oracle.start("t", [("kill it", [("attack", {"target": "zombie"})])], [("zombie", [("attack", {"target": "zombie"})])])
    hit = {"role": "user", "content": "(!) hit by zombie"}
    assert not oracle(_req("t", hit)).tool_calls  # nothing asked yet
    assert oracle(_req("t", {"role": "user", "content": '- alex says: "kill it"'})).tool_calls
    assert oracle(_req("t", hit)).tool_calls[0].name == "attack"

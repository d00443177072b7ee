"""Trim ladder rungs are pure and ordered cheapest loss first; pairs leave together."""

from __future__ import annotations

import json

from emil.context.history import History, Message
from emil.context.ladder import LadderConfig, TrimRecord, run_ladder
from emil.context.rungs import (
    build_rungs,
    digest_turn,
    elide_results,
    note_dropped,
    split_groups,
)


def _turn(
    i: int, *, big: bool = False, status: bool = True, reasoning: bool = True, chatty: bool = False
) -> tuple[Message, ...]:
    call = {"id": f"c{i}", "name": "look_around", "arguments": json.dumps({"radius": 16})}
    payload = {"ok": True, "blocks": [{"name": "stone", "pos": [i, 64, -i]}] * (60 if big else 1)}
    return (
        Message.observation(
            f"event {i}" + " and more" * (40 if chatty else 0),
            event_time=1000.0 + 10 * i,
            status='{"hp": 20}' if status else None,
        ),
        Message.assistant(
            None,
            tool_calls=[call],
            reasoning="thinking hard" if reasoning else None,
            event_time=1000.0 + 10 * i,
        ),
        Message.tool_result(f"c{i}", json.dumps(payload), event_time=1000.0 + 10 * i),
    )


def _chars(state: History) -> int:
    """A stand-in size: characters of everything rendered (the manager uses exact tokens)."""
    memory = len(state.memory.text) if state.memory else 0
    return memory + sum(
        len(m.text) + len(m.reasoning or "") + sum(len(c["arguments"]) for c in m.tool_calls)
        for t in state.turns
        for m in t
    )


CONFIG = LadderConfig(elide_over_tokens=200, memory_max_tokens=600)


def _run(
    history: History, target: int, *, config: LadderConfig = CONFIG, ceiling: int | None = None
) -> tuple[History, list[TrimRecord], int]:
    return run_ladder(
        history, build_rungs(config), _chars, target=target, ceiling=ceiling, config=config,
        now=2000.0, tokens_of=len,
    )


def test_rewrites_are_pure() -> None:
    turn = _turn(1, big=True)
    before = [m.to_openai() for m in turn]
    assert elide_results(turn, 200, len) is not None
    assert [m.to_openai() for m in turn] == before
    assert elide_results(_turn(3), 200, len) is None


def test_elided_stub_says_what_was_elided() -> None:
    elided = elide_results(_turn(7, big=True), 200, len)
    assert elided is not None
    stub = elided[2]
    assert stub.tool_call_id == "c7"
    assert stub.content is not None
    assert stub.content.startswith("[elided: ")
    assert "look_around" in stub.content and "radius" in stub.content
    assert "keys: ok, blocks" in stub.content and "ok=True" in stub.content


def test_groups_keep_calls_with_their_results() -> None:
    turn = (*_turn(1), Message.assistant("done"))
    groups = split_groups(turn)
    assert [len(g) for g in groups] == [1, 2, 1]
    assert groups[1][0].tool_calls[0]["id"] == groups[1][1].tool_call_id


def test_digest_is_deterministic_and_informative() -> None:
    line = digest_turn(_turn(4))
    assert line == digest_turn(_turn(4))
    assert line.startswith("- 00:17:20 event 4")
    assert "look_around" in line


def test_ladder_takes_cheapest_rungs_first_and_stops_at_target() -> None:
    history = History(tuple(_turn(i, big=i % 2 == 0) for i in range(10)))
    start = _chars(history)
    target = start - 50
    trimmed, records, size = _run(history, target)
    assert size <= target
    assert [r.rung for r in records] == ["drop_reasoning"]
    assert len(trimmed.turns) == 10
    # the newest turn is untouched by the cheap rungs
    assert trimmed.turns[-1] == history.turns[-1]


def test_ladder_folds_then_evicts_then_cuts_the_newest_turn() -> None:
    history = History(tuple(_turn(i, big=True) for i in range(6)))
    newest = history.turns[-1]
    trimmed, records, size = _run(history, 400)
    rungs = [r.rung for r in records]
    assert rungs[:3] == ["drop_reasoning", "collapse_status", "elide_results"]
    assert "fold" in rungs or "evict" in rungs
    assert len(trimmed.turns) == 1
    assert trimmed.turns[0][0] == newest[0]  # the opening of the current turn is pinned
    for record in records:
        assert record.tokens_freed == record.tokens_before - record.tokens_after > 0
        assert record.messages_touched > 0
    assert records[-1].tokens_after == size


def test_fold_builds_a_rolling_memory_note() -> None:
    history = History(tuple(_turn(i, reasoning=False, status=False, chatty=True) for i in range(8)))
    config = LadderConfig(elide_over_tokens=10_000, memory_max_tokens=300)
    trimmed, records, _ = _run(history, _chars(history) - 600, config=config)
    assert [r.rung for r in records] == ["fold"]
    assert trimmed.memory is not None and trimmed.memory.kind == "memory"
    assert trimmed.memory.content is not None
    assert trimmed.memory.content.startswith("[memory]")
    # two turns folded; the note rolls, so with a 300-char cap only the newer line is left
    assert "event 1 and more" in trimmed.memory.content
    assert "event 0" not in trimmed.memory.content
    assert trimmed.turns[0][0].content.startswith("event 2")  # type: ignore[union-attr]
    assert records[0].horizon_after_s == 2000.0 - trimmed.turns[0][0].event_time  # type: ignore[operator]


def test_pairs_stay_together_after_any_trim() -> None:
    history = History(tuple(_turn(i, big=True) for i in range(6)))
    for target in (100, 400, 1500, 5000):
        trimmed, _, _ = _run(history, target)
        messages = trimmed.messages()
        call_ids = {c["id"] for m in messages for c in m.tool_calls}
        result_ids = {m.tool_call_id for m in messages if m.role == "tool"}
        assert call_ids == result_ids


def test_no_trim_when_already_under_target() -> None:
    history = History((_turn(1),))
    trimmed, records, _ = _run(history, 10**6)
    assert trimmed == history and records == []


def test_newest_turn_is_cut_only_above_the_hard_budget() -> None:
    # The turn in progress already acted (a call and its result). Evicting every older turn
    # leaves the prompt above the low-water target but within the hard budget: cutting the
    # group now would make the model forget the action and take it again.
    history = History(tuple(_turn(i, big=True) for i in range(6)))
    newest = history.turns[-1]
    alone = _chars(History((newest,)))
    trimmed, records, size = _run(history, alone - 50, ceiling=alone + 10)
    assert trimmed.turns == (newest,)
    assert "cut_newest" not in [r.rung for r in records]
    assert size == alone
    # Without a ceiling the low-water target is the hard one and the newest turn is cut.
    cut, records, _ = _run(history, alone - 50)
    assert "cut_newest" in [r.rung for r in records]
    assert cut.turns[-1] != newest


def test_a_group_cut_from_the_newest_turn_is_noted_in_its_opening() -> None:
    opening = Message.observation("alex says: fetch wood", event_time=1000.0)
    groups: list[Message] = []
    for i in range(4):
        call = {"id": f"g{i}", "name": "dig", "arguments": json.dumps({"x": i})}
        groups += [
            Message.assistant(None, tool_calls=[call], event_time=1000.0),
            Message.tool_result(f"g{i}", json.dumps({"ok": True, "dug": "oak_log", "pad": "x" * 300})),
        ]
    history = History(((opening, *groups),))
    whole = _chars(history)
    target = whole // 4  # eliding the results alone is not enough: groups must go
    cut, records, size = _run(history, target)
    assert "cut_newest" in [r.rung for r in records] and size <= target
    (turn,) = cut.turns
    note = turn[0].content or ""
    assert note.startswith("alex says: fetch wood\n\n[cut for space; already done earlier in this turn: ")
    kept_calls = {c["id"] for m in turn for c in m.tool_calls}
    for i in range(4):
        # every call is either still there (with its result) or named in the note
        assert (f"g{i}" in kept_calls) != (f'dig({{"x": {i}}})' in note)
    assert "g0" not in kept_calls  # oldest group first
    first = note_dropped(opening, groups[:2])
    line = 'dig({"x": 0}) -> {"ok": true, "dug": "oak_log", "pad": "xxxxxxxxxx…'
    assert first.content == f"alex says: fetch wood\n\n[cut for space; already done earlier in this turn: {line}]"
    # a second cut adds to the same note
    assert (note_dropped(first, groups[2:4]).content or "").endswith(f"{line}; {line.replace('0', '1')}]")
    assert note_dropped(opening, ()) is opening


def test_rungs_never_change_the_history_they_trim() -> None:
    history = History(tuple(_turn(i, big=True) for i in range(6)))
    before = [m.to_openai() for m in history.messages()]
    trimmed, records, _ = _run(history, 100)
    assert records and trimmed != history
    assert [m.to_openai() for m in history.messages()] == before


def test_the_stub_word_for_word_with_and_without_its_call() -> None:
    """What the model reads in place of a bulky result (pinned: it is prompt text)."""
    result = Message.tool_result("c9", json.dumps(list(range(300))), event_time=1.0)
    elided = elide_results((result,), 200, len)  # the call is not in the turn: unknown tool
    assert elided is not None
    content = result.content or ""
    assert elided[0].content == (
        f"[elided: {len(content)}-token result of unknown tool(); a list of 300 items; "
        f"began: {content[:79]}…]"
    )
    error = Message.tool_result("c1", json.dumps({"ok": False, "error": "no path", "pad": "x" * 400}), event_time=1.0)
    call = Message.assistant(None, tool_calls=[{"id": "c1", "name": "go_to", "arguments": '{"x": 1}'}])
    stub = elide_results((call, error), 200, len)
    assert stub is not None and stub[0] is call
    assert (stub[1].content or "").startswith(
        f'[elided: {len(error.content or "")}-token result of go_to({{"x": 1}}); keys: ok, error, pad; '
        "ok=False; error=no path; began: "
    )
    plain = Message.tool_result("c2", "y" * 300, event_time=1.0)
    assert (elide_results((plain,), 200, len) or (plain,))[0].content == (
        f"[elided: 300-token result of unknown tool(); began: {'y' * 79}…]"
    )


def test_a_result_at_the_threshold_stays_and_a_stub_is_never_elided_again() -> None:
    at = Message.tool_result("c1", "z" * 200, event_time=1.0)
    assert elide_results((at,), 200, len) is None
    over = elide_results((Message.tool_result("c1", "z" * 201, event_time=1.0),), 200, len)
    assert over is not None
    assert elide_results(over, 10, len) is None  # already a stub, whatever its size


def test_trim_records_count_the_messages_each_rung_touched() -> None:
    """messages_touched, as recorded: an elided result is one message; a folded or evicted turn
    is every message it had."""
    history = History()
    for i in range(6):
        for j, message in enumerate(_turn(i, big=i == 0)):
            history = history.start_turn(message) if j == 0 else history.append(message)
    _, records, _ = _run(history, target=_chars(history) - 1)
    assert [(r.rung, r.messages_touched) for r in records] == [("drop_reasoning", 1)]  # the oldest turn's
    config = LadderConfig(rungs=("elide_results", "evict", "cut_newest"), elide_over_tokens=200)
    _, records, _ = _run(history, target=_chars(history) - 1, config=config)
    assert [(r.rung, r.messages_touched) for r in records] == [("elide_results", 1)]
    _, records, _ = _run(history, target=500, config=config)  # under what eliding alone leaves
    evicted = [r for r in records if r.rung == "evict"]
    assert evicted and all(r.messages_touched > 0 and r.messages_touched % 3 == 0 for r in evicted), records

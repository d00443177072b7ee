"""Caps on one answer (sizes, depth, Unicode, rates) and the NPC turn budget."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from emil.trust.caps import (
    SlidingWindow,
    SpamMeter,
    TokenBucket,
    argument_problem,
    json_depth,
    valid_json,
    valid_loads,
    valid_unicode,
)
from emil.trust.npc import (
    LOOP_STREAK,
    QUIET_RESET_S,
    REPLY_WINDOW_S,
    RUN_RESET_S,
    TurnBudget,
    burst_of,
)


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _nested(depth: int) -> object:
    value: object = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@given(st.integers(0, 60))
def test_json_depth_matches_the_structure(depth: int) -> None:
    assert json_depth(json.dumps(_nested(depth))) == depth


def test_json_depth_skips_strings_and_never_recurses() -> None:
    assert json_depth('{"a": "[[[{{{", "b": "\\"[["}') == 1
    assert json_depth("[" * 200_000) == 200_000  # a linear scan: no RecursionError


def test_argument_problem() -> None:
    assert argument_problem('{"text": "hi"}', max_chars=100, max_depth=4) is None
    too_long = argument_problem("x" * 101, max_chars=100, max_depth=4)
    assert too_long is not None and "101 characters" in too_long and "tool_argument_chars" in too_long
    too_deep = argument_problem("[" * 50 + "]" * 50, max_chars=1000, max_depth=4)
    assert too_deep is not None and "nested 50 levels" in too_deep


@given(st.text())
def test_valid_unicode_is_identity_on_valid_text(text: str) -> None:
    assert valid_unicode(text) == text


@given(st.lists(st.one_of(st.text(max_size=3), st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00"]))).map("".join))
def test_valid_unicode_always_encodes(text: str) -> None:
    out = valid_unicode(text)
    out.encode("utf-8")
    assert len(out) <= len(text)


def test_valid_json_rewrites_only_what_escapes_a_lone_surrogate() -> None:
    """Arguments are kept as the model wrote them (spacing, escapes, key order) unless a decoded
    string holds a lone surrogate; then they are written anew with U+FFFD in its place."""
    for kept in ['{ "t" :"hi"}', '{"t": "\\ud83d\\ude00 \\u00e9"}', '{"t": "\\\\ud800"}', '{"t": "\\ud800"',
                 "not json \\ud800", "", '{"b": 1, "a": NaN}']:
        assert valid_json(kept) == kept
    assert valid_json('{"t":  "a\\ud800b", "\\udc00": ["\\uDFFF", {"d": "\\ud83d"}]}') == (
        '{"t": "a\ufffdb", "\ufffd": ["\ufffd", {"d": "\ufffd"}]}'
    )
    assert valid_json('{"t": "a\ud800"}') == '{"t": "a\ufffd"}'  # a raw one: the text itself


def test_valid_loads_reads_text_and_bytes_by_the_rule() -> None:
    assert valid_loads(b'{"k\\ud800": ["\\udc00", "\\ud83d\\ude00"]}') == {"k\ufffd": ["\ufffd", "\U0001f600"]}
    assert valid_loads('["\ud800", "\\ud800"]') == ["\ufffd", "\ufffd"]
    assert valid_loads('{"t": "\\\\ud800"}') == {"t": "\\ud800"}  # an escaped backslash: six characters


def test_sliding_window() -> None:
    clock = Clock()
    w = SlidingWindow(limit=3, window_s=60, clock=clock)
    assert w.take(2) and w.room() == 1 and not w.take(2) and w.take()
    assert not w.take() and w.wait_s() == 60
    clock.now += 30
    assert w.wait_s() == 30
    clock.now += 30
    assert w.room() == 3


def test_token_bucket() -> None:
    clock = Clock()
    b = TokenBucket(rate_per_min=6, burst=2, clock=clock)
    assert b.take() and b.take() and not b.take()
    assert b.wait_s() == 10
    clock.now += 10
    assert b.take() and not b.take()
    clock.now += 1000
    assert b.take() and b.take() and not b.take()  # never more than the burst saved up
    assert burst_of(20) == 5 and burst_of(2) == 2 and burst_of(0.5) == 1


def test_listed_npcs_get_a_budget_of_exchanges() -> None:
    clock = Clock()
    budget = TurnBudget(npcs=frozenset({"Otto"}), npc_turns_per_minute=60, npc_exchanges=3, clock=clock)
    assert budget.is_npc("Otto") and not budget.is_npc("alex")
    for _ in range(3):
        assert budget.npc_may_start("Otto")
        budget.started(npc_speakers=["Otto"], player_spoke=False)
        clock.now += 2
    assert not budget.npc_may_start("Otto")
    wait = budget.npc_wait_s(["Otto"])
    assert wait is not None and 0 < wait <= RUN_RESET_S
    budget.started(npc_speakers=[], player_spoke=True)  # a real player speaks: the run ends
    assert budget.npc_may_start("Otto")
    budget.started(npc_speakers=["Otto"], player_spoke=False)
    budget.started(npc_speakers=["Otto"], player_spoke=False)
    budget.started(npc_speakers=["Otto"], player_spoke=False)
    assert not budget.npc_may_start("Otto")
    clock.now += RUN_RESET_S
    assert budget.npc_may_start("Otto")  # the run starts over after a quiet while


def test_the_per_speaker_rate() -> None:
    clock = Clock()
    budget = TurnBudget(npcs=frozenset({"Otto", "Ida"}), npc_turns_per_minute=2, npc_exchanges=100, clock=clock)
    budget.started(npc_speakers=["Otto"], player_spoke=False)
    assert not budget.npc_may_start("Otto") and budget.npc_may_start("Ida")
    assert budget.npc_wait_s(["Otto"]) == 30
    clock.now += 30
    assert budget.npc_may_start("Otto")


def test_loop_detection_marks_an_instant_answerer_and_forgets_them() -> None:
    clock = Clock()
    budget = TurnBudget(clock=clock, detect_loops=True)
    for i in range(LOOP_STREAK):
        assert not budget.is_npc("Otto"), i
        budget.emil_spoke()
        clock.now += REPLY_WINDOW_S / 2
        budget.heard("Otto")
        budget.heard("Otto")  # a second line to the same remark changes nothing
        clock.now += 1
    assert budget.is_npc("Otto")
    clock.now += QUIET_RESET_S
    assert not budget.is_npc("Otto")


def test_a_human_who_pauses_is_never_marked() -> None:
    clock = Clock()
    budget = TurnBudget(clock=clock, detect_loops=True)
    for i in range(50):
        budget.emil_spoke()
        clock.now += REPLY_WINDOW_S / 2 if i % (LOOP_STREAK - 1) else REPLY_WINDOW_S + 1
        budget.heard("alex")
    assert not budget.is_npc("alex")


def test_the_turn_rate_cap() -> None:
    clock = Clock()
    budget = TurnBudget(turns_per_minute=12, clock=clock)
    for _ in range(burst_of(12)):
        assert budget.turn_wait_s() == 0
        budget.started(npc_speakers=[], player_spoke=True)
    assert budget.turn_wait_s() == 5.0


def test_loop_detection_is_off_unless_asked() -> None:
    clock = Clock()
    budget = TurnBudget(clock=clock)
    for _ in range(3 * LOOP_STREAK):
        budget.emil_spoke()
        clock.now += 0.5
        budget.heard("probe_bot")
    assert not budget.is_npc("probe_bot")


def test_json_depth_counts_closing_brackets_one_level_each() -> None:
    """A close goes back one level, not to the top, not two: the second branch is deeper."""
    assert json_depth("[[[], [[]]]]") == 4
    assert json_depth('["a\\\\", [1]]') == 2  # an escaped backslash ends the escape: the quote closes
    assert json_depth("X[[]]") == 2  # raw text, not JSON yet: letters neither open nor close


def test_argument_caps_are_inclusive() -> None:
    """``tool_argument_chars`` and ``tool_argument_depth`` are the most allowed, not one past."""
    assert argument_problem("x" * 100, max_chars=100, max_depth=4) is None
    assert argument_problem("[[[[]]]]", max_chars=100, max_depth=4) is None


def test_valid_json_text_keeps_keys_that_are_not_text() -> None:
    """A recording's dumped record or a bridge's arguments may hold non-string keys."""
    from emil.trust.caps import valid_json_text

    assert valid_json_text({1: "\ud800", "k\udc00": [None, 2.5]}) == {1: "\ufffd", "k\ufffd": [None, 2.5]}


def test_valid_loads_walks_only_what_may_hold_a_surrogate(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Clean JSON (text or bytes) is returned as parsed, without walking it; a raw surrogate in
    text with no escape is still replaced."""
    import emil.trust.caps as caps

    assert valid_loads('"\ud800"') == "\ufffd"
    walked: list[object] = []
    real = caps.valid_json_text

    def counting(value: object) -> object:
        walked.append(value)
        return real(value)

    monkeypatch.setattr(caps, "valid_json_text", counting)
    assert valid_loads('{"a": ["b", 1]}') == {"a": ["b", 1]}
    assert valid_loads(b'{"a": ["b", 1]}') == {"a": ["b", 1]}
    assert walked == []
    assert valid_loads('{"a": "\\ud800"}') == {"a": "\ufffd"} and walked
    walked.clear()
    assert valid_loads(b'{"a": "\\ud800"}') == {"a": "\ufffd"} and walked


def test_rate_limits_at_their_edges() -> None:
    clock = Clock()
    w = SlidingWindow(limit=1, window_s=60, clock=clock)
    assert w.wait_s() == 0.0  # room now: no wait
    assert w.take() and w.room() == 0
    clock.now += 59.5
    assert w.wait_s() == 0.5  # under a second left is not rounded up
    b = TokenBucket(rate_per_min=60, burst=2, clock=clock)
    assert b.wait_s() == 0.0  # two saved up
    assert b.take() and b.take()
    clock.now += 0.5
    assert b.wait_s() == 0.5  # half a token there: half a second to go
    clock.now += 1.0
    assert b.wait_s() == 0.0  # one and a half tokens: one is there now


def test_spam_meter_is_vanillas_counter() -> None:
    """Each line adds 20, the level falls 20 a second and never below 0; Emil waits until one
    more line keeps it at or under 160."""
    clock = Clock()
    m = SpamMeter(clock=clock)
    assert m.wait_s() == 0.0
    m.sent(8)
    assert m.wait_s() == 1.0  # 160 now: one more line would be 180
    clock.now += 0.5
    assert m.wait_s() == 0.5
    clock.now += 100  # quiet for long: the level is 0, not below
    m.sent(7)
    assert m.wait_s() == 0.0
    m.sent()
    assert m.wait_s() == 1.0

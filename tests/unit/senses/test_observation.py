"""Floods become an observation within its token cap (emil.senses.observation)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emil.model.resolve import get_token_counter
from emil.senses.observation import compose_events, format_events
from emil.senses.perception import Perception, Triaged
from emil.world.events import (
    ActionFinished,
    Chat,
    Damage,
    Death,
    GameEvent,
    Health,
    HostileNearby,
    ItemCollected,
    PlayerJoined,
)

COUNT = get_token_counter("qwen3.6").count


def _triage(events: list[GameEvent]) -> list[Triaged]:
    p = Perception()
    out = []
    for i, e in enumerate(events):
        out.append(p.add(e, now=float(i)))
    return [t for t in out if t.priority != "ambient"]


def test_within_the_cap_it_is_the_plain_rendering() -> None:
    events = _triage([Chat(sender="alex", text="hi Emil"), PlayerJoined(username="bob")])
    composed = compose_events(events, cap_tokens=1000, count=COUNT)
    assert composed.text == format_events(events) and composed.shown == composed.events == 2
    assert compose_events(events, cap_tokens=None, count=COUNT).text == format_events(events)


def test_exactly_at_the_cap_nothing_is_coalesced() -> None:
    events = _triage([Chat(sender="alex", text=f"line {i}") for i in range(20)])
    size = COUNT(format_events(events))
    assert compose_events(events, cap_tokens=size, count=COUNT).shown == 20
    assert compose_events(events, cap_tokens=size - 1, count=COUNT).shown < 20


def test_other_events_are_counted_first_and_chat_kept() -> None:
    events = _triage(
        [ItemCollected(item="dirt", count=1) for _ in range(40)]
        + [PlayerJoined(username=f"p{i}") for i in range(10)]
        + [Chat(sender="alex", text="Emil, are you there?")]
    )
    composed = compose_events(events, cap_tokens=120, count=COUNT)
    assert "50 other events not shown: 40 item_collected, 10 player_joined" in composed.text
    assert 'alex says: "Emil, are you there?"' in composed.text
    assert COUNT(composed.text) <= 120


def test_repeated_hits_fold_into_one_line_and_sightings_to_the_latest() -> None:
    events = _triage(
        [Damage(amount=2, health=20 - 2 * i, attacker="alex") for i in range(1, 8)]
        + [HostileNearby(name="zombie", distance=d) for d in (7, 5, 3)]
        + [ActionFinished(action="go_to", ok=True) for _ in range(30)]
    )
    composed = compose_events(events, cap_tokens=100, count=COUNT)
    assert "(!) you were hit 7 times by alex: -14 health in all, now 6/20" in composed.text
    assert composed.text.count("zombie") == 1 and "3 blocks away" in composed.text


def test_each_player_keeps_the_latest_lines_and_the_rest_is_counted() -> None:
    events = _triage([Chat(sender=who, text=f"{who} line {i}") for i in range(30) for who in ("alex", "bob")])
    composed = compose_events(events, cap_tokens=150, count=COUNT)
    assert "alex line 29" in composed.text and "bob line 29" in composed.text
    assert "alex line 0" not in composed.text
    assert "earlier lines, not shown" in composed.text and COUNT(composed.text) <= 150


def test_many_players_keep_only_the_most_recent_speakers() -> None:
    events = _triage([Chat(sender=f"player{i}", text=f"hello number {i}") for i in range(300)])
    composed = compose_events(events, cap_tokens=200, count=COUNT)
    assert COUNT(composed.text) <= 200
    assert "player299" in composed.text and "more players said" in composed.text
    assert not composed.cut


def test_a_tiny_cap_cuts_and_says_so() -> None:
    events = _triage([Chat(sender="alex", text="x" * 200)])
    composed = compose_events(events, cap_tokens=12, count=COUNT)
    assert composed.cut and COUNT(composed.text) <= 12 and composed.text.endswith("[... cut to fit]")


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.tuples(st.sampled_from(["alex", "bob", "cy", "Emil2"]), st.text(max_size=80)), max_size=200),
    others=st.integers(0, 50),
    cap=st.integers(30, 2000),
)
def test_the_cap_always_holds(lines: list[tuple[str, str]], others: int, cap: int) -> None:
    events = _triage([Chat(sender=who, text=text) for who, text in lines]
                     + [ItemCollected(item="stick", count=1)] * others)
    composed = compose_events(events, cap_tokens=cap, count=COUNT)
    assert COUNT(composed.text) <= cap
    assert composed.events == len(events) and composed.shown <= len(events)


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_the_summary_lines_word_for_word() -> None:
    events = _triage(
        [Damage(amount=1, health=19)]
        + [Damage(amount=2, health=17 - 2 * i) for i in range(2)]
        + [ItemCollected(item="dirt", count=1)]
        + [Chat(sender="alex", text=f"a{i}") for i in range(3)]
        + [Chat(sender=f"p{i}", text="hi") for i in range(7)]
    )
    composed = compose_events(events, cap_tokens=1, count=len)  # every step runs; the last one cuts
    assert composed.cut
    full = compose_events(events, cap_tokens=10_000, count=len)
    assert full.shown == len(events) == 14
    # a cap that needs every step but the cut: the most recent speakers keep one line each
    step = compose_events(events, cap_tokens=250, count=len)
    assert step.shown == 4 and not step.cut
    assert _lines(step.text) == [
        "[events]",
        "- (1 other event not shown: 1 item_collected)",
        "- (!) you were hit 3 times by something: -5 health in all, now 15/20",
        "- (4 more players said 6 lines, not shown: p2, p1, p0, alex)",
        '- p3 says: "hi"',
        '- p4 says: "hi"',
        '- p5 says: "hi"',
        '- p6 says: "hi"',
    ]


def test_the_silent_players_listed_are_at_most_five() -> None:
    events = _triage([Chat(sender=f"p{i}", text="hello") for i in range(8)])
    text = compose_events(events, cap_tokens=100, count=len).text
    assert "- (7 more players said 7 lines, not shown: p6, p5, p4, p3, p2, ...)" in text
    text = compose_events(events, cap_tokens=150, count=len).text
    assert "- (4 more players said 4 lines, not shown: p3, p2, p1, p0)" in text


def test_one_earlier_line_and_one_hit_read_in_the_singular() -> None:
    events = _triage([Chat(sender="alex", text="first" * 10), Chat(sender="alex", text="second"),
                      Damage(amount=2, health=18, attacker="zombie")])
    text = compose_events(events, cap_tokens=130, count=len).text
    assert "- (alex said 1 earlier line, not shown)" in text
    assert "- (!) you were hit by zombie: -2 health, now 18/20" in text


def test_sightings_fold_only_when_urgent_and_normal_ones_are_counted() -> None:
    events = _triage([HostileNearby(name="zombie", distance=20), HostileNearby(name="zombie", distance=3),
                      HostileNearby(name="zombie", distance=2)] + [ItemCollected(item="a", count=1)] * 30)
    text = compose_events(events, cap_tokens=150, count=len).text
    assert "(!) hostile zombie 2 blocks away" in text and "3 blocks away" not in text
    assert "- (31 other events not shown: 30 item_collected, 1 hostile_nearby)" in text


def test_the_cut_keeps_as_much_as_fits_exactly() -> None:
    events = _triage([Chat(sender="alex", text="x" * 300)])
    for cap in (40, 41, 57):
        composed = compose_events(events, cap_tokens=cap, count=len)
        assert len(composed.text) == cap and composed.text.endswith("\n[... cut to fit]")
    assert compose_events(events, cap_tokens=5, count=len).text == ""  # not even the mark fits


def test_at_exactly_the_cap_other_events_are_not_folded() -> None:
    events = _triage([ItemCollected(item="dirt", count=1), Chat(sender="alex", text="hi")])
    full = format_events(events)
    assert compose_events(events, cap_tokens=len(full), count=len).text == full
    assert compose_events(events, cap_tokens=len(full) - 1, count=len).text != full


def test_urgent_events_that_are_not_hits_or_sightings_are_kept_whole() -> None:
    events = _triage([Death(reason="lava"), Health(health=20, food=20), Health(health=3, food=20)]
                     + [ItemCollected(item="dirt", count=1)] * 40)
    text = compose_events(events, cap_tokens=160, count=len).text
    assert "(!) you died (lava)" in text and "(!) health 3/20, food 20/20" in text


def test_hits_from_several_attackers_fold_per_attacker() -> None:
    events = _triage([Damage(amount=1, health=19, attacker="cow"), Damage(amount=1, health=18, attacker="alex"),
                      Damage(amount=1, health=17, attacker="alex")] + [ItemCollected(item="a", count=1)] * 40)
    text = compose_events(events, cap_tokens=200, count=len).text
    assert "(!) you were hit by cow: -1 health, now 19/20" in text
    assert "(!) you were hit 2 times by alex: -2 health in all, now 17/20" in text


@pytest.mark.parametrize(("speakers", "silent", "dots"), [(10, 5, False), (12, 6, True)])
def test_five_silent_names_then_dots(speakers: int, silent: int, dots: bool) -> None:
    events = _triage([Chat(sender=f"p{i}", text="hello") for i in range(speakers)])
    full_one_each = len(format_events(events))
    composed = compose_events(events, cap_tokens=full_one_each - 1, count=len)
    assert composed.events == speakers and composed.shown == speakers - silent
    assert f"({silent} more players said {silent} lines, not shown: " in composed.text
    assert composed.text.count(", ...)") == (1 if dots else 0)
    assert all(composed.text.count(f"p{i} says") <= 1 for i in range(speakers))


def test_a_cap_that_fits_only_the_mark() -> None:
    events = _triage([Chat(sender="alex", text="x" * 300)])
    assert compose_events(events, cap_tokens=17, count=len).text == "\n[... cut to fit]"
    assert compose_events(events, cap_tokens=18, count=len).text == "[\n[... cut to fit]"


def test_no_events_read_as_none() -> None:
    composed = compose_events([], cap_tokens=5, count=len)
    assert composed.text == "[events] none" or composed.cut
    assert compose_events([], cap_tokens=None, count=len).text == "[events] none"

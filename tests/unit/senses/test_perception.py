"""Perception: event priorities, chat debounce, and the observation text."""

from __future__ import annotations

import pytest

from emil.config import Settings
from emil.senses.observation import format_observation, format_status
from emil.senses.perception import Perception, asks_to_stop
from emil.world.events import (
    ActionFinished,
    Chat,
    Damage,
    Death,
    Disconnected,
    ErrorEvent,
    GameEvent,
    Health,
    HostileNearby,
    ItemCollected,
    Kicked,
    PlayerJoined,
    PlayerLeft,
    Reflex,
    Respawn,
    TimeOfDay,
    UnknownEvent,
    Weather,
)


@pytest.mark.parametrize(
    ("event", "priority"),
    [
        (Damage(amount=2, health=18, attacker="alex"), "urgent"),
        (Death(reason="fell"), "urgent"),
        (HostileNearby(name="zombie", distance=4), "urgent"),
        (HostileNearby(name="zombie", distance=20), "normal"),
        (Health(health=5, food=20), "urgent"),
        (Health(health=15, food=20), "ambient"),
        (Chat(sender="alex", text="hey emil, come here"), "urgent"),
        (Chat(sender="alex", text="psst", whisper=True), "urgent"),
        (Chat(sender="alex", text="anyone seen emily?"), "normal"),
        (Chat(sender="alex", text="nice weather"), "normal"),
        (Chat(sender="Emil", text="I am Emil"), "ambient"),
        (PlayerJoined(username="sam"), "normal"),
        (ItemCollected(item="bread", count=2), "normal"),
        (ActionFinished(action="go_to", ok=True), "normal"),
        (TimeOfDay(phase="night"), "ambient"),
        (Weather(raining=True), "ambient"),
        (Disconnected(reason="server closed"), "ambient"),
    ],
)
def test_classification(event: GameEvent, priority: str) -> None:
    assert Perception().classify(event)[0] == priority


def test_low_health_is_urgent_only_when_crossing_the_mark() -> None:
    p = Perception(Settings(low_health=6))
    assert p.add(Health(health=5, food=20)).priority == "urgent"
    assert p.add(Health(health=4, food=20)).priority == "ambient"
    assert p.add(Health(health=10, food=20)).priority == "ambient"
    assert p.add(Health(health=6, food=20)).priority == "urgent"


def test_ambient_events_never_start_a_turn_but_update_status() -> None:
    p = Perception()
    p.add(TimeOfDay(phase="night"), now=0)
    p.add(Weather(raining=True), now=0)
    assert p.wait_s(now=10) is None
    text = format_observation(p.take(), {"position": {"x": 1.4, "y": 64, "z": -3.6}}, ambient=p.ambient)
    assert "time night" in text and "raining" in text and "pos 1,64,-4" in text
    assert "[events] none" in text


def test_chat_burst_is_debounced_into_one_turn() -> None:
    p = Perception(Settings(chat_debounce_s=0.5))
    p.add(Chat(sender="alex", text="hi"), now=10.0)
    assert p.wait_s(now=10.1) == pytest.approx(0.4)
    p.add(Chat(sender="alex", text="how are you"), now=10.3)
    assert p.wait_s(now=10.5) == pytest.approx(0.3)
    assert p.wait_s(now=10.9) == 0.0
    taken = p.take()
    assert [t.event.text for t in taken if isinstance(t.event, Chat)] == ["hi", "how are you"]
    assert p.wait_s(now=11) is None


def test_urgent_and_non_chat_events_do_not_wait() -> None:
    p = Perception(Settings(chat_debounce_s=5))
    p.add(Chat(sender="alex", text="hi"), now=0)
    p.add(Chat(sender="alex", text="Emil!"), now=0)
    assert p.urgent and p.wait_s(now=0) == 0.0
    q = Perception(Settings(chat_debounce_s=5))
    q.add(Chat(sender="alex", text="hi"), now=0)
    q.add(ItemCollected(item="bread"), now=0)
    assert q.wait_s(now=0) == 0.0


def test_death_clears_queued_action_news() -> None:
    p = Perception()
    p.add(ActionFinished(action="follow", ok=False, error="aborted"), now=0)
    p.add(Death(), now=0)
    p.clear_actions()
    assert [t.event.kind for t in p.pending] == ["death"]


def test_observation_lists_events_with_urgent_marks() -> None:
    p = Perception()
    p.add(Chat(sender="alex", text="hello Emil"), now=0)
    p.add(Damage(amount=3, health=17, attacker="alex"), now=0)
    p.add(ItemCollected(item="oak_log", count=3), now=0)
    text = format_observation(
        p.take(),
        {"health": 17.0, "food": 20, "inventory": [{"name": "oak_log", "count": 3}], "players": [{"username": "alex", "distance": 2.2}]},
    )
    assert text.splitlines() == [
        "[events]",
        '- (!) alex says: "hello Emil"',
        "- (!) you were hit by alex: -3 health, now 17/20",
        "- you picked up 3 oak_log",
        "",
        "[status] health 17/20 food 20/20 | inventory: oak_log x3 | players near: alex 2m",
    ]


def test_status_shows_unknown_snapshot_fields_compactly() -> None:
    assert format_status({"mood": "curious"}) == "mood: curious"
    assert format_status(None) == "unknown"


def test_status_reads_the_bot_snapshot_shape() -> None:
    snap = {
        "connected": True, "username": "Emil", "position": {"x": 0.5, "y": -60.0, "z": 2.5},
        "health": 20.0, "food": 20.0, "time_of_day": 13000, "dimension": "overworld",
        "raining": False, "held": None, "standing_on": "grass_block", "inventory": {"bread": 2},
        "players": [{"name": "alex", "distance": 3.1, "position": {"x": 1, "y": -60, "z": 5}}],
        "mobs": [], "blocks": [{"name": "oak_log", "count": 4, "distance": 7.2, "nearest": {"x": 3, "y": -60, "z": 9}}],
        "job": None, "following": "alex", "reflexes": {"self_defense": True},
    }
    assert format_status(snap) == (
        "pos 0,-60,2 | health 20/20 food 20/20 | time dusk | inventory: bread x2 | players near: alex 3m"
        " | mobs near: none | blocks near: oak_log x4 7m | following alex"
    )


def test_a_hostile_at_exactly_the_urgent_distance_is_urgent() -> None:
    p = Perception(Settings(hostile_urgent_distance=8))
    assert p.classify(HostileNearby(name="zombie", distance=8))[0] == "urgent"
    assert p.classify(HostileNearby(name="zombie", distance=8.01))[0] == "normal"
    assert p.classify(HostileNearby(name="zombie", distance=8))[1] == "zombie within 8 blocks"


def test_health_from_exactly_the_low_mark_is_no_new_crossing() -> None:
    p = Perception(Settings(low_health=6))
    assert p.add(Health(health=6, food=20)).priority == "urgent"  # first report at the mark
    assert p.add(Health(health=5, food=20)).priority == "ambient"  # was at the mark already
    p2 = Perception(Settings(low_health=6))
    p2.add(Health(health=6.5, food=20))
    assert p2.add(Health(health=6, food=20)).priority == "urgent"  # just above -> at: crossing
    assert p2.add(Health(health=6, food=20)).priority == "ambient"


def test_damage_remembers_health_for_the_crossing() -> None:
    p = Perception(Settings(low_health=6))
    p.add(Damage(amount=15, health=5, attacker="zombie"))
    assert p.add(Health(health=4, food=20)).priority == "ambient"  # the hit already took it low
    p.add(Respawn())
    assert p.add(Health(health=3, food=20)).priority == "urgent"  # a new life, a new crossing


@pytest.mark.parametrize(("text", "stop"), [
    ("Emil, stop!", True), ("STOP", True), ("wait a second", True), ("hold on emil", True),
    ("never mind", True), ("nevermind", True), ("cancel that", True), ("Emil freeze", True),
    ("unstoppable", False), ("a bus stop", True), ("waiting room", False), ("hello Emil", False),
])
def test_asks_to_stop(text: str, stop: bool) -> None:
    assert asks_to_stop(text) is stop


@pytest.mark.parametrize(("ticks", "phase"), [
    (0, "day"), (11999, "day"), (12000, "dusk"), (13799, "dusk"), (13800, "night"), (22199, "night"),
    (22200, "dawn"), (23999, "dawn"), (24000, "day"), (36000, "dusk"),
])
def test_time_of_day_phases_at_their_edges(ticks: int, phase: str) -> None:
    assert format_status({"time_of_day": ticks}) == f"time {phase}"


def test_lists_in_the_status_word_for_word() -> None:
    snap = {
        "inventory": {"oak_log": 3, "map": {"id": 7, "name": "さくら's map"}, "x" * 5: "y" * 60},
        "players": [{"name": "alex", "distance": 0}, {"username": "bob", "distance": 3.4, "count": 1},
                    {"type": "cow", "count": 2, "distance": -1}, {}, "steve"],
        "mobs": [{"name": f"m{i}"} for i in range(10)],
        "blocks": [],
    }
    assert format_status(snap) == (
        'inventory: oak_log x3, map {"id":7,"name":"さくら\'s map"}, xxxxx ' + "y" * 39 + "… | "
        "players near: alex 0m, bob 3m, cow x2, ?, steve | "
        "mobs near: m0, m1, m2, m3, m4, m5, m6, m7, +2 more | blocks near: none"
    )
    eight = {"mobs": [{"name": f"m{i}"} for i in range(8)]}
    assert format_status(eight) == "mobs near: m0, m1, m2, m3, m4, m5, m6, m7"
    assert format_status({"mobs": "lots"}) == "unknown"  # neither a mapping nor a list: left out


def test_long_event_text_is_cut_at_its_limit() -> None:
    from emil.senses.observation import describe_event
    from emil.world.events import ActionFinished

    ok = describe_event(ActionFinished(action="collect", ok=True, result="r" * 160))
    assert ok == "action collect finished ok: " + "r" * 160
    cut = describe_event(ActionFinished(action="collect", ok=True, result="r" * 161))
    assert cut == "action collect finished ok: " + "r" * 159 + "…"
    data = describe_event(ActionFinished(action="nearby", ok=True, result={"a": [1, 2], "é": None}))
    assert data == 'action nearby finished ok: {"a":[1,2],"é":null}'


def test_a_note_comes_first_in_the_observation() -> None:
    assert format_observation([], {"health": 20}, note="away") == "[note] away\n\n[status] health 20/20"
    assert format_observation([], None) == "[events] none\n\n[status] unknown"


@pytest.mark.parametrize(("event", "line"), [
    (Chat(sender="alex", text="hi"), 'alex says: "hi"'),
    (Chat(sender="alex", text="psst", whisper=True), 'alex whispers to you: "psst"'),
    (Damage(amount=2, health=18, attacker="zombie"), "you were hit by zombie: -2 health, now 18/20"),
    (Damage(amount=2.5, health=17.5), "you were hit: -2.5 health, now 17.5/20"),
    (Health(health=12, food=7), "health 12/20, food 7/20"),
    (Death(reason="lava"), "you died (lava)"),
    (Death(), "you died"),
    (Respawn(), "you respawned"),
    (HostileNearby(name="creeper", distance=4.6), "hostile creeper 5 blocks away"),
    (PlayerJoined(username="sam"), "sam joined the game"),
    (PlayerLeft(username="sam"), "sam left the game"),
    (ItemCollected(item="bread", count=3), "you picked up 3 bread"),
    (ActionFinished(action="dig", ok=False, error="too far"), "action dig finished failed: too far"),
    (ActionFinished(action="dig", ok=True, result=""), "action dig finished ok"),
    (ActionFinished(action="dig", ok=True), "action dig finished ok"),
    (Reflex(reflex="flee", detail="health 4"), "reflex flee: health 4"),
    (Reflex(reflex="eat"), "reflex eat"),
    (TimeOfDay(phase="night"), "it is now night"),
    (Weather(raining=True), "it started raining"),
    (Weather(raining=False), "the rain stopped"),
    (Kicked(reason="spam"), "you were kicked: spam"),
    (Disconnected(reason="reset"), "connection lost: reset"),
    (ErrorEvent(message="oops"), "bot error: oops"),
    (UnknownEvent(original_kind="teleport", data={"to": 1}), 'teleport: {"to":1}'),
])
def test_every_event_reads_word_for_word(event: GameEvent, line: str) -> None:
    from emil.senses.observation import describe_event

    assert describe_event(event) == line


@pytest.mark.parametrize(("event", "why"), [
    (Damage(amount=1, health=19), "hit by something"),
    (HostileNearby(name="zombie", distance=20), "zombie nearby"),
    (Chat(sender="alex", text="nice"), "chat from alex"),
    (Chat(sender="Emil", text="me"), "own chat"),
    (Chat(sender="alex", text="x", whisper=True), "whisper from alex"),
    (TimeOfDay(phase="day"), ""),
    (Disconnected(reason="x"), "disconnected"),
    (PlayerJoined(username="sam"), "player_joined"),
])
def test_the_reasons_word_for_word(event: GameEvent, why: str) -> None:
    assert Perception().classify(event)[1] == why


def test_the_ambient_facts_kept_for_the_status() -> None:
    p = Perception()
    p.add(TimeOfDay(phase="dusk"), now=0)
    p.add(Weather(raining=True), now=0)
    p.add(Health(health=15, food=9), now=0)
    assert p.ambient == {"time": "dusk", "raining": True, "health": 15, "food": 9}
    p.add(Damage(amount=3, health=12), now=0)
    p.add(PlayerJoined(username="sam"), now=0)
    assert p.ambient == {"time": "dusk", "raining": True, "health": 12, "food": 9}
    assert format_status(None, p.ambient) == "health 12/20 food 9/20 | time dusk | raining"


def test_taking_the_events_forgets_the_chat_debounce() -> None:
    p = Perception(Settings(chat_debounce_s=5))
    p.add(Chat(sender="alex", text="a"), now=0)
    assert p.wait_s(now=1) == 4
    p.take()
    p.add(PlayerJoined(username="sam"), now=2)
    assert p.wait_s(now=2) == 0.0
    assert isinstance(p.add(Chat(sender="alex", text="b")).at, float)  # a clock of its own when none given


def test_the_end_of_an_awaited_action_is_an_echo_once_per_dispatch() -> None:
    p = Perception(Settings(turns_per_minute=600), budgeted=True)
    done = ActionFinished(action="go_to", ok=True)
    assert not p.echo(done)  # nobody awaited it: a real event
    p.dispatched("go_to")
    p.dispatched("go_to")
    assert p.echo(done) and p.echo(done)
    assert not p.echo(done)  # two dispatches absorb two ends, no more
    assert not p.echo(Chat(sender="alex", text="go_to"))


def test_an_echo_of_speech_that_went_out_is_emil_speaking() -> None:
    p = Perception(Settings(turns_per_minute=600), budgeted=True)
    assert p.budget is not None
    spoke: list[bool] = []
    p.budget.emil_spoke = lambda: spoke.append(True)  # type: ignore[method-assign]
    p.dispatched("say")
    p.dispatched("say")
    assert p.echo(ActionFinished(action="say", ok=False)) and spoke == []  # it never went out
    assert p.echo(ActionFinished(action="say", ok=True)) and spoke == [True]

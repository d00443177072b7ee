"""Perception with the turn budget: NPC chat never interrupts, starts few turns, and loops end."""

from __future__ import annotations

from emil.config import Settings
from emil.senses.perception import Perception
from emil.trust.npc import HELD_LIMIT, LOOP_STREAK, RUN_RESET_S
from emil.world.events import Chat, Damage, PlayerJoined


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def perception(clock: Clock, **kw: object) -> Perception:
    settings = Settings(chat_debounce_s=0.0, turns_per_minute=kw.pop("turns", 600), npc_players=("Otto",),
                        npc_loop_detection=True, **kw)  # type: ignore[arg-type]
    return Perception(settings, budgeted=True, clock=clock)


def test_npc_chat_naming_emil_is_not_urgent() -> None:
    p = perception(Clock())
    assert p.add(Chat(sender="Otto", text="Hello, Emil!"), 0).priority == "normal"
    assert p.add(Chat(sender="alex", text="Hello, Emil!"), 0).priority == "urgent"


def test_two_npcs_stop_after_a_few_exchanges_until_a_player_speaks() -> None:
    clock = Clock()
    p = perception(clock, npc_turns_per_minute=60, npc_exchanges=3)
    turns = 0
    for _ in range(50):  # Otto answers every line at once, forever
        p.add(Chat(sender="Otto", text="Hello, Emil!"), clock.now)
        if p.wait_s(clock.now) == 0:
            p.take()
            turns += 1
            p.emil_spoke()
        clock.now += 1
    assert turns == 3 and len(p.pending) > 0  # the rest is held for the next turn
    assert len(p.pending) <= HELD_LIMIT
    p.add(Chat(sender="alex", text="hi all"), clock.now)
    assert p.wait_s(clock.now) == 0
    taken = p.take()
    assert [t.event.sender for t in taken if isinstance(t.event, Chat)][-1] == "alex"  # held lines ride along
    assert any(t.event.sender == "Otto" for t in taken if isinstance(t.event, Chat))
    p.add(Chat(sender="Otto", text="and you?"), clock.now)
    assert p.wait_s(clock.now) == 0  # a player spoke: the run starts over


def test_the_run_starts_over_after_a_quiet_while() -> None:
    clock = Clock()
    p = perception(clock, npc_turns_per_minute=60, npc_exchanges=1)
    p.add(Chat(sender="Otto", text="hi"), clock.now)
    p.take()
    p.add(Chat(sender="Otto", text="hi again"), clock.now)
    wait = p.wait_s(clock.now)
    assert wait is not None and 0 < wait <= RUN_RESET_S
    clock.now += RUN_RESET_S
    assert p.wait_s(clock.now) == 0


def test_a_speaker_answering_at_once_every_time_becomes_an_npc() -> None:
    clock = Clock()
    p = perception(clock)
    for _ in range(LOOP_STREAK - 1):
        p.emil_spoke()
        clock.now += 1
        assert p.add(Chat(sender="Ida", text="Emil, hi"), clock.now).priority == "urgent"
        p.take()
    p.emil_spoke()
    clock.now += 1
    assert p.add(Chat(sender="Ida", text="Emil, hi"), clock.now).priority == "normal"


def test_loop_detection_also_catches_people_in_a_busy_chat_so_it_is_off_by_default() -> None:
    """Why ``npc_loop_detection`` stays off by default (docs/trust.md): two people greeting Emil
    in turn, a line every 4 s, each line answered 1.5 s later, are both "instant answerers" (the
    other's next line comes 2.5 s after Emil's); once taken for NPCs their chat is no longer
    urgent and starts at most ``npc_turns_per_minute`` turns. Off, nobody is taken for one."""
    for detect, caught in ((True, {"alice", "bob"}), (False, set())):
        clock = Clock()
        p = Perception(Settings(chat_debounce_s=0.0, turns_per_minute=600, npc_loop_detection=detect),
                       budgeted=True, clock=clock)
        for i in range(2 * LOOP_STREAK + 2):
            p.add(Chat(sender=("alice", "bob")[i % 2], text="hi Emil"), clock.now)
            p.take()
            clock.now += 1.5
            p.emil_spoke()
            clock.now += 2.5
        assert {n for n in ("alice", "bob") if p.is_npc(n)} == caught
    assert Settings().npc_loop_detection is False


def test_the_turn_rate_cap_holds_whatever_starts_turns() -> None:
    clock = Clock()
    p = perception(clock, turns=6)  # a burst of 5, then one every 10 s
    started = 0
    for i in range(600):  # a hit every 0.1 s for a minute
        p.add(Damage(amount=1, health=15, attacker=f"z{i}"), clock.now)
        if p.wait_s(clock.now) == 0:
            p.take()
            started += 1
        clock.now += 0.1
    assert 5 + 5 <= started <= 5 + 6


def test_without_a_budget_nothing_changes() -> None:
    p = Perception(Settings(chat_debounce_s=0.0))
    assert p.budget is None and not p.is_npc("Otto")
    p.add(PlayerJoined(username="x"), 0)
    assert p.wait_s(0) == 0

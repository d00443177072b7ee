"""From game events, snapshots and tool outcomes to notes (the learner and the world wrapper)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

from emil.llm.types import ToolCall
from emil.memory import Learner, MemoryStore, RememberingWorld
from emil.world.events import Chat, Damage, Death, ItemCollected, PlayerJoined, Respawn
from emil.world.port import TurnContext
from emil.world.tool import TOOLS, Gives, Outcome, Speaks, Tool
from tests.unit.agent.doubles import WorldDouble


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(tmp_path)
    yield s
    s.close()


def _facts(store: MemoryStore) -> set[tuple[str, str, str, str, int]]:
    return {(n.about, n.subject, n.topic, n.detail, n.count) for n in store.notes()}


def test_players_requests_gifts_and_hits(store: MemoryStore) -> None:
    learn = Learner(store, bot_name="Emil", clock=lambda: 10.0)
    learn.observe(PlayerJoined(username="steve", t=1.0))
    learn.observe(Chat(sender="alex", text="Emil, follow me", t=2.0))
    learn.observe(Chat(sender="alex", text="nice weather", t=3.0))  # not to Emil: overheard, no request
    learn.observe(Chat(sender="Emil", text="I said this myself", t=3.5))
    learn.observe(ItemCollected(item="bread", count=3, from_player="alex", t=4.0))
    learn.observe(ItemCollected(item="dirt", count=1, t=4.5))  # dug it: not a gift
    learn.observe(Damage(amount=1, health=19, attacker="alex", attacker_player=True, t=5.0))
    learn.observe(Damage(amount=2, health=17, attacker="zombie", t=6.0))  # a mob, not a player
    assert _facts(store) == {
        ("player", "steve", "seen", "", 1),
        ("player", "alex", "seen", "", 2),
        ("player", "alex", "asked", "Emil, follow me", 1),
        ("player", "alex", "said", "nice weather", 1),
        ("player", "alex", "gave_me", "bread", 3),
        ("player", "alex", "hit_me", "", 1),
    }


def test_places_from_chat_snapshots_and_deaths(store: MemoryStore) -> None:
    learn = Learner(store, clock=lambda: 10.0)
    learn.observe(Chat(sender="alex", text="Emil my chest is at 12 64 -7", t=1.0))
    learn.observe(Chat(sender="bob", text="this is my farm, here", t=2.0))
    learn.observe(Death(reason="killed by zombie", position={"x": 3.5, "y": 60.0, "z": -7.2}, t=3.0))
    learn.observe(Respawn(position={"x": 0.5, "y": 64.0, "z": 0.5}, t=4.0))
    learn.observe_snapshot({
        "position": {"x": 1, "y": 64, "z": 1},
        "players": [{"name": "bob", "distance": 2, "position": {"x": 20.4, "y": 64, "z": -3.6}}],
        "blocks": [{"name": "chest", "nearest": {"x": 5, "y": 64, "z": 5}}, {"name": "stone", "nearest": {"x": 0, "y": 63, "z": 0}}],
    })
    places = {(n.subject, n.detail, n.told_by) for n in store.notes() if n.about == "place"}
    assert places == {
        ("chest", "12,64,-7", "alex"), ("farm", "20,64,-4", "bob"), ("death", "3,60,-8", None),
        ("respawn", "0,64,0", None), ("chest", "5,64,5", None),
    }
    # A snapshot every turn does not write the same sightings again and again.
    before = [(n.id, n.count) for n in store.notes()]
    learn.observe_snapshot({"players": [{"name": "bob"}], "blocks": [{"name": "chest", "nearest": {"x": 5, "y": 64, "z": 5}}]})
    assert [(n.id, n.count) for n in store.notes()] == before


def test_a_death_without_a_position_uses_the_last_snapshot(store: MemoryStore) -> None:
    learn = Learner(store, clock=lambda: 10.0)
    learn.observe_snapshot({"position": {"x": -4.2, "y": 70, "z": 9}})
    learn.observe(Death(t=2.0))
    assert ("place", "death", "at", "-5,70,9", 1) in _facts(store)


def test_a_promise_naming_nobody_is_filed_under_the_player_it_answers(store: MemoryStore) -> None:
    learn = Learner(store, clock=lambda: 10.0)
    learn.observe(Chat(t=1.0, sender="alex", text="Emil, could you bring me some cobblestone?"))
    learn.observe(Chat(t=2.0, sender="cody", text="lol nice hat"))
    learn.observe(Chat(t=3.0, sender="bella", text="Emil, can you fetch wheat for the farm?"))
    learn.tool_done("say", {"text": "Sure, I'll fetch you wheat for the farm soon."}, True, frozenset({"alex", "bella", "cody"}))
    learn.tool_done("say", {"text": "I will get cobblestone after that."}, True, frozenset({"alex", "bella", "cody"}))
    learn.tool_done("say", {"text": "I'll be right back."}, True, frozenset({"alex", "bella", "cody"}))  # answers both asks
    promised = {(n.subject, n.detail) for n in store.notes() if n.topic == "promised"}
    assert promised == {
        ("bella", "Sure, I'll fetch you wheat for the farm soon."),
        ("alex", "I will get cobblestone after that."),
        ("alex", "I'll be right back."), ("bella", "I'll be right back."),  # cody did not speak to Emil
    }


def test_one_answer_to_several_players_files_each_promise_under_its_player(store: MemoryStore) -> None:
    learn = Learner(store, clock=lambda: 10.0)
    asked = frozenset({"alex", "cody", "eli", "hana"})
    learn.tool_done("say", {"text": "Sure, cody, I'll get you 10 dirt. Sure, eli, I'll get you 4 coal."}, True, asked)
    learn.tool_done("say", {"text": "OK hana, staying here. Following you, eli. Alex! I will bring wood soon."}, True, asked)
    promised = {(n.subject, n.detail) for n in store.notes() if n.topic == "promised"}
    assert promised == {
        ("cody", "Sure, cody, I'll get you 10 dirt."), ("eli", "Sure, eli, I'll get you 4 coal."),
        ("alex", "I will bring wood soon."),  # the sentence before it names whom it answers
    }  # "OK hana, staying here." promises nothing: nothing under hana


def test_gifts_and_promises_emil_makes(store: MemoryStore) -> None:
    learn = Learner(store, clock=lambda: 10.0)
    learn.tool_done("give", {"player": "alex", "item": "oak_log", "count": 4}, True, frozenset({"alex"}))
    learn.tool_done("give", {"player": "alex", "item": "stone", "count": 4}, False, frozenset({"alex"}))  # failed: nothing given
    learn.tool_done("say", {"text": "Sure, I'll bring you wood tomorrow"}, True, frozenset({"alex"}))
    learn.tool_done("whisper", {"player": "bob", "text": "I promise to keep the secret"}, True)  # private: archive only
    learn.tool_done("say", {"text": "hello"}, True, frozenset({"alex"}))
    assert _facts(store) == {
        ("player", "alex", "i_gave", "oak_log", 4),
        ("player", "alex", "promised", "Sure, I'll bring you wood tomorrow", 1),
    }


@pytest.fixture
def new_tools() -> Iterator[list[str]]:
    """Names of tool classes a test defines; taken out of the registry afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        TOOLS.pop(name, None)


def test_a_tool_that_declares_gives_or_speaks_is_learned_from(store: MemoryStore, new_tools: list[str]) -> None:
    """No tool names in the learner: a new tool is learned from by what its class declares."""

    class HandOver(Tool):
        """Hand one thing to a player (a tool of this test)."""

        tool_name: ClassVar[str] = "test_hand_over"
        gives: ClassVar[Gives | None] = Gives(to="whom", item="thing", count=None)
        whom: str
        thing: str

    class Shout(Tool):
        """Shout to everyone (a tool of this test)."""

        tool_name: ClassVar[str] = "test_shout"
        speaks: ClassVar[Speaks | None] = Speaks(text="words")
        words: str

    class Sign(Tool):
        """Write a sign: words, but not speech (a tool of this test)."""

        tool_name: ClassVar[str] = "test_sign"
        text: str

    new_tools += [HandOver.tool_name, Shout.tool_name, Sign.tool_name]
    learn = Learner(store, clock=lambda: 10.0)
    learn.tool_done("test_hand_over", {"whom": "cara", "thing": "bread"}, True)
    learn.tool_done("test_shout", {"words": "I will build you a house, dan"}, True, frozenset({"dan", "eve"}))
    learn.tool_done("test_sign", {"text": "I promise nothing"}, True, frozenset({"eve"}))  # declares no speech
    learn.tool_done("no_such_tool", {"player": "eve", "item": "gold", "text": "I will"}, True, frozenset({"eve"}))
    assert _facts(store) == {
        ("player", "cara", "i_gave", "bread", 1),
        ("player", "dan", "promised", "I will build you a house, dan", 1),
    }


def test_the_shipped_tools_declare_what_they_give_and_say() -> None:
    assert TOOLS["give"].gives == Gives(to="player", item="item", count="count")
    assert TOOLS["say"].speaks == Speaks(text="text", to=None)
    assert TOOLS["whisper"].speaks == Speaks(text="text", to="player")
    assert [n for n, t in TOOLS.items() if t.gives or t.speaks] == ["say", "whisper", "give"]


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(id="c1", name=name, raw_arguments="{}", arguments=dict(args))


async def test_the_world_wrapper_learns_what_passes_through(store: MemoryStore) -> None:
    inner = WorldDouble()
    world = RememberingWorld(inner, Learner(store, clock=lambda: 10.0))
    await inner.send.send(Chat(sender="alex", text="Emil, come here", t=1.0))
    inner.send.close()
    seen = [e async for e in world.events()]
    assert len(seen) == 1 and ("player", "alex", "asked", "Emil, come here", 1) in _facts(store)
    assert (await world.snapshot())["health"] == 20.0
    out = await world.run_tool(_call("follow", player="alex"), TurnContext.of("alex", limit_s=5))
    assert out.ok
    goals = {n.subject: n.note for n in store.notes() if n.about == "goal"}
    assert goals == {'follow {"player":"alex"} for alex': "done"}
    inner.close()


async def test_an_aborted_job_is_remembered_as_interrupted(store: MemoryStore) -> None:
    inner = WorldDouble()
    world = RememberingWorld(inner, Learner(store, clock=lambda: 10.0))
    with anyio.move_on_after(0.2):
        await world.run_tool(_call("go_to", x=1, y=2, z=3), TurnContext(limit_s=5))  # runs until cancelled
    assert {n.note for n in store.notes() if n.about == "goal"} == {"interrupted"}
    inner.close()


async def test_a_note_that_cannot_be_written_does_not_cost_the_turn(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    inner = WorldDouble()
    world = RememberingWorld(inner, Learner(store, clock=lambda: 10.0))
    store.close()  # every write now fails with sqlite3.ProgrammingError
    out = await world.run_tool(_call("say", text="I'll be there"), TurnContext.of("alex", limit_s=5))
    assert out == Outcome(True, "say ok")
    await world.run_tool(_call("say", text="I'll be back"), TurnContext.of("alex", limit_s=5))
    said = [r.message for r in caplog.records if r.name == "emil.memory"]
    assert len(said) == 1 and "cannot write to" in said[0] and "playing on" in said[0]  # one warning for the outage
    inner.close()

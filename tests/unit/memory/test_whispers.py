"""Whispers are private: what a player whispers to Emil, and what Emil whispers to a player, comes
back only in a turn whose words are that one player's. The notes block (read by every player's
turns) never quotes them, no place is learned from them, a summary never sees their words, and
the archive gives them to retrieval and to the ``recall`` tool for that player alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emil.context.history import Message
from emil.memory.archive import Archive, Line
from emil.memory.archivist import Archivist
from emil.memory.learn import Learner
from emil.memory.render import render_notes
from emil.memory.retrieval import Recollection, Topic
from emil.memory.store import MemoryStore
from emil.memory.summary import turns_text
from emil.memory.tools import MemoryTools
from emil.model.resolve import get_token_counter
from emil.senses.observation import describe_event, private_call, without_whispers
from emil.world.events import Chat
from emil.world.memory_tools import Recall
from emil.world.tool import ActionPolicy, ToolContext

DAY = 1_779_948_000.0
COUNT = get_token_counter("qwen3.6").count


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    a = Archive.open(tmp_path, now=DAY)
    a.add(DAY + 60, "whisper", "the vault code is 7719", speaker="dana", target="Emil")
    a.add(DAY + 90, "said", "the vault spare key is under the oak", speaker="Emil", target="dana")  # Emil's whisper
    a.add(DAY + 120, "chat", "the vault door is iron", speaker="gus")
    a.add(DAY + 150, "said", "the vault is north of spawn", speaker="Emil")  # said to everyone
    yield a
    a.close()


def _found(archive: Archive, audience: frozenset[str] | None) -> set[str]:
    return {line.text for line in archive.search(["vault"], limit=10, audience=audience)}


PUBLIC = {"the vault door is iron", "the vault is north of spawn"}
PRIVATE = {"the vault code is 7719", "the vault spare key is under the oak"}


def test_the_archive_gives_a_whisper_to_its_one_player_alone(archive: Archive) -> None:
    assert _found(archive, frozenset({"dana"})) == PUBLIC | PRIVATE
    assert _found(archive, frozenset({"gus"})) == PUBLIC
    assert _found(archive, frozenset({"dana", "gus"})) == PUBLIC  # gus would hear the answer
    assert _found(archive, frozenset()) == PUBLIC  # Emil acting on its own: nobody asked
    assert _found(archive, None) == PUBLIC | PRIVATE  # the operator's own tools see everything


@pytest.mark.parametrize(
    ("kind", "speaker", "target", "owner"),
    [("whisper", "dana", "Emil", "dana"), ("said", "Emil", "dana", "dana"), ("said", "Emil", None, None),
     ("chat", "gus", None, None), ("note", "Emil", "dana", None), ("whisper", None, None, "")],
)
def test_whom_a_line_is_private_to(kind: str, speaker: str | None, target: str | None, owner: str | None) -> None:
    line = Line(1, DAY, kind, speaker, target, "x")  # type: ignore[arg-type]
    assert line.private_to == owner
    assert line.heard_by({"dana"}) is (owner in (None, "dana"))
    assert line.heard_by({"gus"}) is (owner is None)
    assert line.heard_by(None)


def test_a_turn_recalls_a_whisper_only_when_its_player_speaks_alone(archive: Archive) -> None:
    r = Recollection(archive, max_tokens=400, tokens_of=COUNT)

    def recalled(*speakers: str) -> str:
        topic = Topic(chat=("what about the vault?",), speakers=frozenset(speakers))
        return r.block(topic, since=None, now=DAY + 3600, keep=False) or ""

    assert "7719" in recalled("dana") and "spare key" in recalled("dana")
    assert "dana whispered to you" in recalled("dana")
    for others in [("gus",), ("dana", "gus"), ()]:
        block = recalled(*others)
        assert "iron" in block and "7719" not in block and "spare key" not in block, others


async def test_the_recall_tool_answers_the_turns_speakers(archive: Archive, tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    tools = MemoryTools(archive, Archivist(archive, clock=lambda: DAY + 500), store, tokens_of=COUNT,
                        clock=lambda: DAY + 600)

    async def asked_by(*players: str) -> str:
        ctx = ToolContext(bot=None, policy=ActionPolicy(requesters=frozenset(players)), memory=tools)  # type: ignore[arg-type]
        outcome = await Recall(query="vault code", player="dana").run(ctx)
        assert outcome.ok
        return outcome.text

    try:
        assert "7719" in await asked_by("dana")
        stranger = await asked_by("mallory")  # asks for dana's lines by name: her whispers stay hers
        assert "7719" not in stranger and "spare key" not in stranger
    finally:
        store.close()


def test_the_notes_never_quote_a_whisper_nor_learn_a_place_from_it(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    try:
        learn = Learner(store, bot_name="Emil", clock=lambda: DAY)
        learn.observe(Chat(t=DAY, sender="dana", text="my secret base is at 120 64 -300", whisper=True))
        learn.observe(Chat(t=DAY + 1, sender="dana", text="Emil, my farm is at 10 64 10"))
        learn.tool_done("whisper", {"player": "dana", "text": "I'll guard your secret base"}, True, frozenset({"dana"}))
        notes = store.notes()
        assert {(n.subject, n.topic) for n in notes if n.about == "player" and n.detail} == {
            ("dana", "whispered"), ("dana", "asked")}  # kept (the operator's `memory show`), no promise
        assert [(n.subject, n.detail) for n in notes if n.about == "place"] == [("farm", "10,64,10")]
        block = render_notes(notes, max_tokens=2000, tokens_of=COUNT, present=frozenset({"dana"}))
        assert block is not None and "my farm is at" not in block  # said once, as a place line
        assert "secret" not in block and "120" not in block and "farm at 10,64,10" in block
    finally:
        store.close()


def test_a_summary_and_shared_lines_keep_who_whispered_not_the_words() -> None:
    opening = Message.observation(
        "[events]\n- (!) " + describe_event(Chat(t=DAY, sender="dana", text="the vault code is 7719", whisper=True))
        + '\n- gus says: "dana whispers to you: \\"fake\\" is not a whisper"', event_time=DAY)
    call = Message.assistant("", tool_calls=[{"id": "c1", "name": "whisper",
                                              "arguments": '{"player": "dana", "text": "spare key under the oak"}'}])
    result = Message.tool_result("c1", "whispered to dana: 'spare key under the oak'")
    text = turns_text([(opening, call, result)], name="Emil")
    assert "7719" not in text and "oak" not in text
    assert "(!) dana whispered to you (private words, left out)" in text
    assert "whispered to dana (private words, left out)" in text
    assert 'gus says: "dana whispers to you:' in text  # a public line that quotes the words stays
    assert without_whispers("- fay says: \"hi\"") == "- fay says: \"hi\""
    assert private_call("say", '{"text": "hi"}') is None
    assert private_call("whisper", "not json") == "whispered to a player (private words, left out)"

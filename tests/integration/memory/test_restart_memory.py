"""A new session remembers the previous one's players and places.

Real embedded server, real bots, the real loop and context manager; the LLM is the
vLLM-dialect double with a SCRIPTED brain (not a model). Session 1: the player names a chest
location, tosses Emil bread and tells it the gate code in passing. Session 2, on the same
data_dir: the pinned notes block of its very first request (read back from its recording) holds
the chest, the bread and the gate code quoted under the player; when the player asks for "the
code for the gate", that turn's observation ends with lines recalled from the first session's
archive, quoted with who said them, and does not repeat the code the notes block already quotes.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from emil.memory import NOTES_HEADER, MemoryStore
from emil.memory.retrieval import RECALL_HEADER
from emil.recording import RequestRecord, messages_for_request, read_recording
from emil.testing.brains import DemoBrain
from tests.integration.agent.services import World, events_of, running_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _gifts(store: MemoryStore) -> int:
    return sum(n.count for n in store.notes() if n.subject == "alex" and n.topic == "gave_me" and n.detail == "bread")


async def _toss_bread(w: World, store: MemoryStore) -> None:
    """The player tosses bread at Emil until Emil has picked some up (a toss can land out of
    reach: flying-squid drops it at the thrower's feet)."""
    for _attempt in range(4):
        had = (await w.player.snapshot()).inventory.get("bread", 0)
        await w.server.command("give alex bread 3")
        with anyio.fail_after(10):
            while (await w.player.snapshot()).inventory.get("bread", 0) < had + 3:  # noqa: ASYNC110 - the bot's view
                await anyio.sleep(0.1)
        out = await w.player.act("give", {"player": "Emil", "item": "bread", "count": 3}, timeout=30)
        assert out.ok, out.error
        with anyio.move_on_after(6):
            while _gifts(store) == 0:  # noqa: ASYNC110
                await anyio.sleep(0.2)
        if _gifts(store):
            return
    raise AssertionError("Emil never picked up the bread alex tossed")


async def test_a_second_session_remembers_the_first_ones_player_and_place(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_world(tmp_path / "one", DemoBrain(), data_dir=data) as w:
        assert w.session.memory is not None
        store = w.session.memory.store
        await w.say("Emil, my chest is at 12 64 -7")
        await w.wait_for("the chest noted", lambda: any(n.subject == "chest" and n.told_by == "alex" for n in store.notes()))
        await _toss_bread(w, store)
        given = _gifts(store)
        await w.say("by the way, the gate code is 4471")
        memory = w.session.memory
        try:
            await w.wait_for("the code archived", lambda: bool(memory.archive.search(["4471"])))
        except TimeoutError:
            raise AssertionError([(x.kind, x.speaker, x.text) for x in memory.archive.recent(limit=30)]
                                 + [str(e)[:200] for e in events_of(w.records(), "chat")]) from None

    async with running_world(tmp_path / "two", DemoBrain(), data_dir=data) as w:
        await w.say("hello Emil")
        await w.wait_for("a first request", lambda: any(isinstance(r, RequestRecord) for r in w.records()))
        await w.say("Emil, what was the code for the gate again?")
        await w.wait_for("the question's turn", lambda: any("code for the gate" in str(m.get("content"))
                                                             for _r, ms in messages_for_request(w.records()) for m in ms))
        recording = w.session.recording_path

    _request, messages = next(iter(messages_for_request(read_recording(recording).records)))
    notes = messages[1]
    assert notes["role"] == "user" and notes["content"].startswith(NOTES_HEADER), messages[:2]
    assert f"gave you {given} bread" in notes["content"]
    assert "chest at 12,64,-7 (alex said so" in notes["content"]
    asked = next(m for _r, ms in messages_for_request(read_recording(recording).records) for m in ms
                 if "code for the gate" in str(m.get("content")))
    assert '  - said: "by the way, the gate code is 4471"' in notes["content"]  # under alex's line
    assert asked["role"] == "user" and RECALL_HEADER in asked["content"], asked
    recalled = asked["content"].split(RECALL_HEADER)[1]
    assert 'alex said: "Emil, my chest is at 12 64 -7"' in recalled  # the first session's archive
    assert "4471" not in recalled  # the notes block in the same prompt already quotes it

"""A whisper stays between its player and Emil, across a restart.

Real embedded server, real bots, the real loop, context manager, notes and archive; the LLM is
the vLLM-dialect double with a SCRIPTED brain (not a model). Session 1: alex whispers a code to
Emil and says where the farm is aloud. Session 2, on the same data_dir (nothing of session 1
verbatim in its history, so everything said before may be recalled): the notes block of its
first request quotes alex's public words and not the whisper; when another player, mallory,
asks for the code, that turn's observation recalls nothing of it; when alex asks, alone, the
observation recalls the whisper, quoted as a whisper.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from emil.memory import NOTES_HEADER
from emil.memory.retrieval import RECALL_HEADER
from emil.recording import Record, RequestRecord, messages_for_request, read_recording
from emil.testing.brains import DemoBrain
from emil.world.bridge import Bot
from emil.world.wire import BotSettings, ReflexSettings
from tests.integration.agent.services import running_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SECRET = "the vault code is 7719"


def _turn_asking(records: list[Record], words: str) -> str | None:
    """The content of the first observation holding ``words`` (None: not yet)."""
    for _r, messages in messages_for_request(records):
        for m in messages:
            if m.get("role") == "user" and words in str(m.get("content")):
                return str(m["content"])
    return None


async def test_a_whisper_comes_back_to_its_player_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with running_world(tmp_path / "one", DemoBrain(), data_dir=data) as w:
        memory = w.session.memory
        assert memory is not None
        out = await w.player.act("whisper", {"player": "Emil", "text": SECRET}, timeout=10)
        assert out.ok, out.error
        await w.say("Emil, my farm is at 30 64 -12 near the vault")
        await w.wait_for("both lines archived", lambda: bool(memory.archive.search(["7719"]))
                         and bool(memory.archive.search(["farm"])))
        await w.wait_for("the whisper noted", lambda: any(n.topic == "whispered" for n in memory.store.notes()))

    async with running_world(tmp_path / "two", DemoBrain(), data_dir=data) as w:
        await w.say("hello Emil")
        await w.wait_for("a first request", lambda: any(isinstance(r, RequestRecord) for r in w.records()))
        port = w.server.port
        stranger = BotSettings(host="127.0.0.1", port=port, username="mallory",
                               reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False))
        async with Bot.connect(stranger) as mallory:
            with anyio.fail_after(30):
                while not (await mallory.act("say", {"text": "Emil, what is the vault code?"}, timeout=10)).ok:  # noqa: ASYNC110 - retried while it spawns
                    await anyio.sleep(0.5)
            await w.wait_for("mallory's turn", lambda: _turn_asking(w.records(), "what is the vault code") is not None)
        await w.say("Emil, what was the vault code again?")
        await w.wait_for("alex's turn", lambda: _turn_asking(w.records(), "what was the vault code again") is not None)
        recording = w.session.recording_path

    records = read_recording(recording).records
    _request, messages = next(iter(messages_for_request(records)))
    notes = messages[1]
    assert notes["role"] == "user" and notes["content"].startswith(NOTES_HEADER), messages[:2]
    assert "farm at 30,64,-12 (alex said so" in notes["content"]  # alex's public words are there
    assert "7719" not in notes["content"]  # the whisper is not
    theirs = _turn_asking(records, "what is the vault code")
    assert theirs is not None and "mallory says" in theirs and "alex says" not in theirs, theirs  # a turn of its own
    assert "7719" not in theirs
    own = _turn_asking(records, "what was the vault code again")
    assert own is not None and RECALL_HEADER in own and "mallory says" not in own, own
    assert f'alex whispered to you: "{SECRET}"' in own.split(RECALL_HEADER)[1]

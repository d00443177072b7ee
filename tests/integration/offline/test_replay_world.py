"""``replay --world embedded``: recorded actions played into a real embedded server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from emil.recording import ToolResultRecord
from emil.replay.world import play_into_embedded, recorded_actions
from emil.world.setup import ensure_js_deps
from tests.unit.offline.crafted import header, write_records

pytestmark = pytest.mark.slow


def _recording(path: Path) -> Path:
    return write_records(
        path,
        [
            header(bot_name="Emil"),
            ToolResultRecord(turn=1, step=1, call_id="a", name="say", arguments={"text": "hello from a replay"}, ok=True, text="said"),
            ToolResultRecord(turn=1, step=1, call_id="b", name="fly", arguments={}, ok=False, text="error: unknown tool 'fly'"),
            ToolResultRecord(turn=2, step=1, call_id="c", name="look_at", arguments={"x": 3, "y": 64, "z": 3}, ok=True, text="{}"),
        ],
    )


def test_recorded_actions_skip_model_mistakes(tmp_path: Path) -> None:
    played, skipped = recorded_actions(_recording(tmp_path / "r.jsonl"))
    assert [r.name for r in played] == ["say", "look_at"] and skipped == 1


async def test_recorded_actions_are_played_into_an_embedded_server(tmp_path: Path) -> None:
    await anyio.to_thread.run_sync(lambda: ensure_js_deps(progress=False))
    path = _recording(tmp_path / "r.jsonl")
    with anyio.fail_after(110):
        playback = await play_into_embedded(path, action_timeout_s=20)
    assert playback.port > 0 and playback.skipped == 1
    assert [a.name for a in playback.actions] == ["say", "look_at"]
    assert playback.actions[0].ok, playback.actions[0].text
    assert "played 2 recorded actions" in playback.summary()

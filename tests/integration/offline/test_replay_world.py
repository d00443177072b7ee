"""``replay --world embedded``: recorded actions played into a real embedded server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

from emil.recording import CONFIRMED_COMMAND, ToolResultRecord
from emil.replay.playback import play_into_embedded, recorded_actions
from emil.testing import processes
from emil.world.setup import ensure_js_deps
from tests.unit.offline.crafted import header, write_records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


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


def test_recorded_actions_skip_confirmed_commands(tmp_path: Path) -> None:
    """A command an operator confirmed was sent by the guard on the operator's word, which the
    playback does not have: it is not a tool call to send again."""
    path = write_records(tmp_path / "r.jsonl", [
        header(bot_name="Emil"),
        ToolResultRecord(turn=1, step=0, call_id="confirmed-0", name=CONFIRMED_COMMAND,
                         arguments={"command": "/time set day", "confirmation": "k7"}, ok=True,
                         text='bob confirmed the command "/time set day": sent', requested_by=["bob"], rule="chat.command"),
        ToolResultRecord(turn=1, step=1, call_id="a", name="say", arguments={"text": "done"}, ok=True, text="said"),
    ])
    played, skipped = recorded_actions(path)
    assert [r.name for r in played] == ["say"] and skipped == 1


async def test_recorded_actions_are_played_into_an_embedded_server(tmp_path: Path) -> None:
    await anyio.to_thread.run_sync(lambda: ensure_js_deps(progress=False))
    path = _recording(tmp_path / "r.jsonl")
    with anyio.fail_after(110):
        playback = await play_into_embedded(path, action_timeout_s=20)
    assert playback.port > 0 and playback.skipped == 1
    assert [a.name for a in playback.actions] == ["say", "look_at"]
    assert playback.actions[0].ok, playback.actions[0].text
    assert "played 2 recorded actions" in playback.summary()


def test_replay_world_json_is_json_alone_and_names_the_action_that_differed(tmp_path: Path) -> None:
    """The command line as an operator runs it: stdout holds one JSON document, nothing else
    (no bridge chatter), and the world outcome names the action whose outcome changed."""
    ensure_js_deps(progress=False)
    path = write_records(
        tmp_path / "r.jsonl",
        [
            header(bot_name="Emil", tokenizer="qwen3.6", window=32768, output_reserve=1024),
            ToolResultRecord(turn=1, step=1, call_id="a", name="say", arguments={"text": "hi"}, ok=True, text="said"),
            # Recorded as failed; on an empty superflat world it succeeds: a difference to report.
            ToolResultRecord(
                turn=2, step=1, call_id="b", name="look_at", arguments={"x": 3, "y": 64, "z": 3}, ok=False,
                text="failed: the server kicked me",
            ),
        ],
    )
    env = {**os.environ, "EMIL_NO_BOOTSTRAP": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, str(ROOT / "run_emil.py"), "replay", str(path), "--world", "embedded"]
    as_json = processes.run([*cmd, "--json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=110)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)  # the whole of stdout, or this raises
    world = data["world"]
    assert world["played"] == 2 and world["as_recorded"] == 1
    assert [(d["turn"], d["name"], d["recorded_ok"], d["ok"]) for d in world["different"]] == [(2, "look_at", False, True)]
    assert "[JSE]" not in as_json.stdout + as_json.stderr and "Timed out" not in as_json.stdout + as_json.stderr
    text = processes.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=110)
    assert text.returncode == 0, text.stderr
    differs = [line for line in text.stdout.splitlines() if "differs:" in line]
    assert len(differs) == 1 and "turn 2.1 look_at" in differs[0] and "recorded failed" in differs[0] and "now ok" in differs[0]

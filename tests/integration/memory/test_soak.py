"""The multi-player soak, short: the real loop among four scripted players holds up, learns
about every player, and its pinned notes change only where a trim changes the prompt anyway.

Real embedded server, real bots, the real Emil; the LLM is the vLLM-dialect double with a
SCRIPTED brain (not a model).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from emil.config import load_settings
from emil.recording import Record, SummaryRecord, TrimRecord, messages_for_request, read_recording
from emil.replay import replay_file
from emil.replay.recorded_notes import notes_in
from emil.testing.soak import PLAYERS, play_soak
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


async def test_a_short_soak(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    recording = tmp_path / "soak.jsonl"
    def block_changes(records: list[Record]) -> int:
        previous, changes = None, 0
        for _request, messages in messages_for_request(records):
            block = notes_in(messages)
            changes += previous is not None and block != previous
            previous = block
        return changes

    # 40 s at least (every player's script runs), then until the notes block has changed once
    # (it changes only at a trim, and how soon the first trim comes depends on the machine's
    # speed), at most 150 s
    started = time.monotonic()
    result = await play_soak(
        load_settings(env={}).settings, duration_s=150, recording=recording, data_dir=tmp_path / "data", window=12800,
        until=lambda records: time.monotonic() - started >= 40 and block_changes(records) >= 1,
    )
    read = read_recording(recording)
    assert read.complete, read.problem
    assert not result.fatal
    stats = result.session.agent.stats if result.session else None
    assert stats is not None and len(stats.turns) >= 10 and stats.actions >= 5
    # Every player was there and talked; the griefer's hit is remembered.
    assert set(result.player_steps) == set(PLAYERS)
    store_notes = result.notes
    assert store_notes["seen"] == len(PLAYERS) and store_notes["asked"] >= 3 and store_notes["hit_me"] >= 1
    # The notes block changed only at requests that came with a trim (prefix-stable between).
    trims_at = {r.turn for r in read.records if isinstance(r, TrimRecord)}
    assert trims_at, "a 12.8k window must trim within 150 s of four players"
    previous = None
    changes = 0
    for request, messages in messages_for_request(read.records):
        block = notes_in(messages)
        if previous is not None and block != previous:
            changes += 1
            assert request.turn in trims_at, f"notes changed without a trim at turn {request.turn}"
        previous = block
    assert changes >= 1 and result.note_renders >= 2  # a fresh store: the block appears at a trim
    # The summarise rung asked the served model (the double's text reducer) between turns,
    # at most once per trim, and a replay folds the recorded lines again: identical requests.
    summaries = [r for r in read.records if isinstance(r, SummaryRecord)]
    assert summaries and len(summaries) <= len(trims_at) + 1
    report = await replay_file(recording)
    assert report.identical == len(report.diffs) == report.steps_total

"""Replay rebuilds, byte for byte, every request of sessions recorded by the real Emil.

Each session runs the real runtime end to end (embedded flying-squid server, real mineflayer
bots, the loop, bridge, context manager, client and notes; the LLM is the vLLM-dialect double
with a SCRIPTED brain, not a model), and its fresh recording replays through the turn engine
with every request identical, ``run_emil.py replay`` exiting 0:

- the demo, as ``run_emil.py demo`` plays it;
- a soak of four players with a chat flood coalesced to a small observation cap, hits that
  interrupt Emil's actions and model calls, and trims with notes and summaries;
- the shipped samples (emil/data/samples), recorded by earlier versions of the same runtime.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from emil.config import load_settings
from emil.demo import play_demo
from emil.recording import (
    EventRecord,
    ObservationRecord,
    Record,
    TrimRecord,
    TurnRecord,
    read_recording,
)
from emil.replay import cli_main, replay_file
from emil.testing.soak import play_soak
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SAMPLES = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples"


async def _exit_code(recording: Path) -> int:
    """``run_emil.py replay FILE`` (its own event loop, so in a thread)."""
    return await anyio.to_thread.run_sync(cli_main, [str(recording), "--no-progress"])


async def _identical(recording: Path) -> None:
    report = await replay_file(recording)
    assert report.stopped is None and not report.errors, (report.stopped, report.errors)
    assert report.diffs and report.identical == len(report.diffs) == report.steps_total, [
        d.to_json() for d in report.differing
    ]
    assert report.observation_diffs == []


@pytest.mark.parametrize("name", ["demo-session.jsonl", "soak-session.jsonl"])
async def test_the_shipped_samples_replay_byte_for_byte(name: str) -> None:
    await _identical(SAMPLES / name)
    assert await _exit_code(SAMPLES / name) == 0


async def test_a_fresh_demo_recording_replays_byte_for_byte(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    recording = tmp_path / "demo.jsonl"
    loaded = load_settings(env={"EMIL_DATA_DIR": str(tmp_path / "data")})
    await play_demo(loaded, duration_s=60, recording=recording)
    assert read_recording(recording).complete
    await _identical(recording)
    assert await _exit_code(recording) == 0


async def test_a_soak_with_a_flood_and_interrupts_replays_byte_for_byte(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    recording = tmp_path / "soak.jsonl"
    # A small observation cap: dana's flood of twelve lines is coalesced to fit it. A slow model
    # (3 tokens/s: a short answer takes about 3 s) and a short grace: a hit while Emil waits for an
    # answer cancels the call (cody starts hitting as a call goes out: soak.py while_emil_thinks).
    settings = load_settings(env={"EMIL_OBSERVATION_CAP_TOKENS": "60", "EMIL_INTERRUPT_GRACE_S": "0.2"}).settings

    def coalesced(records: list[Record]) -> bool:
        return any(isinstance(r, ObservationRecord) and r.shown is not None and r.shown < r.events for r in records)

    def interrupted(records: list[Record]) -> list[str]:
        return [r.interrupted_by for r in records if isinstance(r, TurnRecord) and r.interrupted]

    def trimmed(records: list[Record]) -> bool:
        return any(isinstance(r, TrimRecord) for r in records)

    def everything(records: list[Record]) -> bool:
        return coalesced(records) and any("hit by" in why for why in interrupted(records)) and trimmed(records)

    # Played until all three happened (bounded): on a loaded machine cody's hits may all land
    # between Emil's calls for a while.
    result = await play_soak(settings, duration_s=240, recording=recording, data_dir=tmp_path / "data", window=12800,
                    decode_tps=3.0, until=everything)
    records = list(read_recording(recording).records)
    assert coalesced(records), "the flood was coalesced to the cap"
    hits = [r.event for r in records if isinstance(r, EventRecord) and r.event.get("kind") == "damage"]
    assert any("hit by" in why for why in interrupted(records)), \
        f"a hit interrupted Emil: {interrupted(records)}; hits {hits[:5]}; failed steps {result.failed_steps[:8]}"
    assert trimmed(records), "the 12.8k window trimmed"
    await _identical(recording)
    assert await _exit_code(recording) == 0

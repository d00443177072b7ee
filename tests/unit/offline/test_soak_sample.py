"""The shipped soak sample (regenerate: python tools/soak.py --sample --duration 60 --window 12800):
current schema, several players, a notes block, and every offline tool runs on it."""

from __future__ import annotations

from pathlib import Path

from emil.model.resolve import get_token_counter
from emil.offline.budget_sweep import sweep
from emil.offline.chars_per_token import measure_chars_per_token
from emil.offline.trace import SessionTrace
from emil.recording import (
    SCHEMA_VERSION,
    EventRecord,
    TrimRecord,
    messages_for_request,
    read_recording,
)
from emil.replay import replay_file
from emil.replay.recorded_notes import notes_in

SAMPLE = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "soak-session.jsonl"


def test_the_soak_sample_is_a_small_complete_multi_player_recording() -> None:
    assert SAMPLE.stat().st_size < 300_000
    read = read_recording(SAMPLE)
    assert read.complete and read.header is not None and read.header.schema_version == SCHEMA_VERSION
    senders = {r.event.get("sender") for r in read.records if isinstance(r, EventRecord) and r.event.get("kind") == "chat"}
    assert {"alex", "bella", "cody"} <= senders
    assert any(isinstance(r, TrimRecord) for r in read.records)
    assert any(notes_in(messages) for _request, messages in messages_for_request(read.records))


def test_offline_tools_on_the_soak_sample() -> None:
    (report,) = measure_chars_per_token([SAMPLE]).tokenizers
    assert report.total.tokens > 1000
    trace = SessionTrace.from_recording(SAMPLE)
    result = sweep([trace], get_token_counter("qwen3.6"), windows=[trace.window or 32768])
    assert result.requests_simulated > 0


async def test_replay_of_the_soak_sample_is_identical() -> None:
    report = await replay_file(SAMPLE)
    assert report.stopped is None and not report.errors
    assert report.steps_replayed == report.steps_total > 0
    assert report.identical == len(report.diffs)  # the recorded notes block is served back


def test_the_soak_samples_interrupted_calls_read_as_not_run_from_their_words() -> None:
    """The sample was written before tool results carried their fate: its interrupted calls are
    read as not run by their words (the replay test above replays them identically)."""
    import json

    from emil.recording import ToolResultRecord

    raw = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    assert not any("fate" in d for d in raw if d["kind"] == "tool_result")
    results = [r for r in read_recording(SAMPLE).records if isinstance(r, ToolResultRecord)]
    not_run = [r for r in results if r.fate == "not_run"]
    assert not_run and all(r.text == f"not run: interrupted ({r.interrupt})" for r in not_run)
    assert all(r.fate == "ran" for r in results if r.ok)

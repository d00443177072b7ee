"""Every offline tool runs on the shipped sample recording (regenerate: tools/make_sample.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from emil.model.resolve import get_token_counter
from emil.offline.budget_sweep import sweep
from emil.offline.chars_per_token import measure_chars_per_token
from emil.offline.trace import SessionTrace
from emil.recording import read_recording
from emil.replay import replay_file

SAMPLE = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "demo-session.jsonl"


def test_the_sample_is_a_small_complete_demo_recording() -> None:
    assert SAMPLE.stat().st_size < 300_000
    read = read_recording(SAMPLE)
    assert read.complete and read.header is not None and read.header.tools


def test_chars_per_token_on_the_sample() -> None:
    (report,) = measure_chars_per_token([SAMPLE]).tokenizers
    cats = {c.category for c in report.categories}
    assert {"tool_results", "tool_call_args", "tool_specs", "observations", "system_prompt"} <= cats
    assert report.total.tokens > 1000


def test_tune_budget_on_the_sample() -> None:
    trace = SessionTrace.from_recording(SAMPLE)
    result = sweep([trace], get_token_counter("qwen3.6"), windows=[trace.window or 32768])
    assert result.recommended is not None and result.requests_simulated > 0
    assert any(p.trims > 0 for p in result.points)  # the sweep looks below the session's peak


async def test_replay_on_the_sample_runs_every_step() -> None:
    report = await replay_file(SAMPLE)
    assert report.stopped is None and not report.errors
    assert report.steps_replayed == report.steps_total > 0


def test_the_sample_is_written_in_the_current_schema() -> None:
    """A sample from before a header field existed reads with its default, which misreports what
    the session sent (a sample without preserve_thinking read as "off"): regenerate it with
    tools/make_sample.py when the header grows."""
    import json

    from emil.recording import SCHEMA_VERSION, HeaderRecord

    with SAMPLE.open("rb") as f:
        raw = json.loads(f.readline())
    assert raw["kind"] == "header" and raw["schema_version"] == SCHEMA_VERSION
    missing = set(HeaderRecord.model_fields) - set(raw)
    assert not missing, f"the sample's header lacks {sorted(missing)}: run python3 tools/make_sample.py"
    assert "preserve_thinking" in raw["settings"]


async def test_replay_counting_as_another_family_does_not_calibrate_on_the_recorded_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sample was counted as Qwen3.6; its usage numbers are Qwen3.6 tokens. Replayed as
    Qwen3 (``--tokenizer Qwen/Qwen3-8B``), they must not calibrate Qwen3 predictions: that read
    every request as 159-204 tokens short against a real Qwen3 server that counted exactly."""
    from emil.replay.report import ReplayOptions

    with caplog.at_level(logging.WARNING, logger="emil.context.manager"):
        report = await replay_file(SAMPLE, options=ReplayOptions(tokenizer="Qwen/Qwen3-8B"))
    assert report.steps_replayed == report.steps_total
    assert not [r for r in caplog.records if "prompt count mismatch" in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="emil.context.manager"):
        same = await replay_file(SAMPLE, options=ReplayOptions(tokenizer="Qwen/Qwen3.6-35B-A3B"))
    assert same.steps_replayed == same.steps_total
    assert not [r for r in caplog.records if "prompt count mismatch" in r.getMessage()]

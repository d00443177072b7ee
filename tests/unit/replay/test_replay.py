"""Offline replay of a session recorded by the real agent loop and context manager."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from emil.recording import read_recording
from emil.replay import RecordedSession, ReplayOptions, cli_main, replay_file
from emil.replay.engine import Replayer
from emil.replay.report import format_report
from tests.unit.offline.agent_session import record_session


@pytest.fixture
async def recording(tmp_path: Path) -> Path:
    return await record_session(tmp_path / "session.jsonl", turns=8)


async def test_replay_rebuilds_every_request_of_a_recorded_session(recording: Path) -> None:
    report = await replay_file(recording)
    assert report.stopped is None and not report.errors
    assert report.turns_replayed == report.turns_total == 8
    assert report.steps_replayed == report.steps_total == 16
    assert report.identical == len(report.diffs) == 16
    assert report.observation_diffs == []
    # The session trimmed (budget 4000, ~700-token tool results) and today's ladder agrees.
    assert report.trims_recorded > 0
    assert report.trims_today == report.trims_recorded


async def test_a_smaller_budget_today_shows_which_messages_change_and_by_how_much(recording: Path) -> None:
    report = await replay_file(recording, options=ReplayOptions(prompt_budget=2500))
    differing = [d for d in report.diffs if not d.identical]
    assert differing, "a smaller budget must trim earlier than the recorded session did"
    first = differing[0]
    assert first.today_tokens <= 2500 < (first.recorded_actual or 0)
    assert first.token_delta is not None and first.token_delta < 0
    change = first.changes[0]
    assert change.recorded_tokens > change.today_tokens
    text = format_report(report)
    assert "built differently today" in text and f"turn {first.turn} step {first.step}" in text
    assert report.trims_today > report.trims_recorded


async def test_a_request_never_answered_ends_its_turn_and_replay_goes_on(tmp_path: Path) -> None:
    """A turn interrupted or failed during the model call leaves a request without a completion
    (as does a session stopped in one): replay compares it and goes on with the next turn."""
    path = await record_session(tmp_path / "failed.jsonl", turns=8, unanswered=frozenset({3}))
    report = await replay_file(path)
    assert report.stopped is None and not report.errors
    assert report.turns_replayed == report.turns_total == 8
    assert report.unanswered == 1
    assert report.steps_replayed == report.steps_total == len(report.diffs) == report.identical
    assert "1 unanswered in the recording" in format_report(report)
    assert report.to_json()["unanswered_requests"] == 1


async def test_a_truncated_recording_replays_up_to_the_damage_and_says_where(recording: Path) -> None:
    data = await anyio.Path(recording).read_bytes()
    await anyio.Path(recording).write_bytes(data[: int(len(data) * 0.6)])  # cut mid-line, as a killed process does
    report = await replay_file(recording)
    assert report.stopped is not None and "line" in report.stopped
    assert 0 < report.steps_replayed < 16
    assert report.identical == len(report.diffs)


async def test_a_corrupt_line_stops_replay_there(recording: Path) -> None:
    lines = (await anyio.Path(recording).read_text()).splitlines(keepends=True)
    lines[len(lines) // 2] = "{not json\n"
    await anyio.Path(recording).write_text("".join(lines))
    report = await replay_file(recording)
    assert report.stopped is not None and f"line {len(lines) // 2 + 1}" in report.stopped
    assert report.steps_replayed < 16


def test_cli_prints_json_and_exits_by_strictness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = anyio.run(record_session, tmp_path / "session.jsonl")  # the CLI runs its own loop
    assert cli_main([str(recording), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["identical_requests"] == 16 and data["differing_requests"] == 0
    assert cli_main([str(recording), "--prompt-budget", "2500", "--strict"]) == 1
    assert "built differently today" in capsys.readouterr().out
    assert cli_main([str(recording.with_name("missing.jsonl"))]) == 2
    assert "no such recording" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli_main([str(recording), "--world", "mars"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--world" in err and "replay --help" in err


def _with_header_preserve(path: Path, preserve: bool | None) -> RecordedSession:
    """The recorded session with its header's preserve_thinking set (None: removed, as in a
    file written before the setting existed)."""
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["kind"] == "header"
    header.pop("preserve_thinking", None)
    if preserve is not None:
        header["preserve_thinking"] = preserve
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return RecordedSession.from_read(read_recording(path))


@pytest.mark.parametrize("preserve", [True, False, None])
async def test_the_replay_renders_with_the_recorded_preserve_thinking(recording: Path, preserve: bool | None) -> None:
    replayer = Replayer(_with_header_preserve(recording, preserve))
    assert replayer.manager.incremental.preserve_thinking is bool(preserve)


async def test_an_appended_recording_replays_one_session_at_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """recording_append puts several sessions in one file, each numbering its turns from 1:
    replay takes one (default the last), says how many there are, and never merges them."""
    path = await record_session(tmp_path / "two.jsonl", turns=8)
    await record_session(path, turns=3, prompt_budget=5000, append=True)
    last = await replay_file(path)
    assert (last.session, last.sessions) == (2, 2)
    assert last.turns_total == last.turns_replayed == 3 and last.settings["prompt_budget"] == 5000
    assert last.identical == len(last.diffs) == last.steps_total and not last.errors
    first = await replay_file(path, session=1)
    assert (first.session, first.turns_total, first.steps_total) == (1, 8, 16)
    assert first.identical == 16 and first.settings["prompt_budget"] == 4000
    assert "session 2 of 2 in this file" in format_report(last)

    assert await anyio.to_thread.run_sync(cli_main, [str(path), "--json", "--session", "1", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["session"], out["sessions"], out["turns_total"]) == (1, 2, 8)
    assert await anyio.to_thread.run_sync(cli_main, [str(path), "--session", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds 2 sessions; --session 3 is not one of them (give 1..2)" in err


async def test_a_recording_of_one_session_reports_one(recording: Path) -> None:
    report = await replay_file(recording)
    assert (report.session, report.sessions) == (1, 1)
    assert "session 1 of" not in format_report(report)

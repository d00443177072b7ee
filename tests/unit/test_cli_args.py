"""The shared argument types: what each accepts and the words of what it refuses."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from emil.cli_args import (
    OneLineParser,
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    positive_ints,
    positive_seconds,
    recording_path,
)
from emil.recording import RECORD_ADAPTER, HeaderRecord


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        (positive_int, "3", 3), (non_negative_int, "0", 0), (positive_float, "0.5", 0.5),
        (non_negative_float, "0", 0.0), (positive_seconds, "1e-3", 0.001), (fraction, "1", 1.0),
        (positive_ints, "1, 4,8", [1, 4, 8]),
    ],
)
def test_accepts(kind: object, text: str, value: object) -> None:
    assert kind(text) == value  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kind", "text", "words"),
    [
        (positive_int, "0", "must be a positive integer"), (positive_int, "-2", "must be a positive integer"),
        (positive_int, "1.5", "expected an integer"), (non_negative_int, "-1", "zero or a positive integer"),
        (positive_float, "0", "must be a positive number"), (positive_float, "nan", "must be a finite number"),
        (positive_seconds, "-3", "positive number of seconds"), (positive_seconds, "inf", "must be a finite number"),
        (positive_seconds, "soon", "expected a number of seconds"), (non_negative_float, "-0.1", "zero or a positive"),
        (fraction, "0", "fraction in (0, 1]"), (fraction, "1.5", "fraction in (0, 1]"),
        (positive_ints, ",", "comma-separated"), (positive_ints, "1,0", "must be a positive integer"),
    ],
)
def test_refuses_with_words(kind: object, text: str, words: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as err:
        kind(text)  # type: ignore[operator]
    assert words in str(err.value)


def test_recording_path(tmp_path: Path) -> None:
    good = tmp_path / "ok.jsonl"
    good.write_bytes(RECORD_ADAPTER.dump_json(HeaderRecord(session_id="x")) + b"\n")
    assert recording_path(str(good)) == good
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    with pytest.raises(argparse.ArgumentTypeError, match="is not an Emil recording"):
        recording_path(str(other))


def test_parser_error_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineParser(prog="tool.py")
    parser.add_argument("--runs", type=positive_int, default=3)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--runs", "0"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tool.py: error: argument --runs: must be a positive integer")

"""``run_emil.py memory show | forget NAME | export``: output, and one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emil.memory import Fact, MemoryStore
from emil.memory.cli import cli_main
from emil.memory.store import DB_FILE

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    store = MemoryStore.open(tmp_path / "data")
    store.learn(Fact(about="player", subject="alex", topic="gave_me", detail="bread", count=3), t=1.0)
    store.learn(Fact(about="player", subject="alex", topic="asked", detail="hi \x1b[31mred\x1b[0m"), t=1.0)
    store.learn(Fact(about="place", subject="chest", topic="at", detail="12,64,-7", told_by="alex"), t=2.0)
    store.learn(Fact(about="player", subject="steve", topic="seen"), t=3.0)
    store.close()
    return tmp_path / "data"


def test_show_prints_the_block_and_every_note(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--data-dir", str(data_dir), "show"]) == 0
    out = capsys.readouterr().out
    assert "# pinned block (" in out and "gave you 3 bread" in out and "chest at 12,64,-7" in out
    assert "player | alex | gave_me | bread | 3" in out
    assert "\x1b" not in out  # a player's escape sequences never reach the terminal


def test_export_is_json_alone_on_stdout(data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1"}
    out = subprocess.run(
        [sys.executable, str(ROOT / "run_emil.py"), "memory", "--data-dir", str(data_dir), "export"],
        capture_output=True, text=True, env=env, cwd=data_dir.parent, check=False,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {n["subject"] for n in data["notes"]} == {"alex", "chest", "steve"}


def test_forget_a_known_name(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--data-dir", str(data_dir), "forget", "alex"]) == 0
    assert "forgot 3 notes about alex" in capsys.readouterr().out  # 2 about alex, 1 place he named
    store = MemoryStore.open_existing(data_dir)
    assert {n.subject for n in store.notes()} == {"steve"}
    store.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["forget", "bob"], "no notes about 'bob' in .*; known: alex, chest, steve"),
        (["show", "--tokens", "x"], "invalid int value"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert cli_main(["--data-dir", str(data_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("emil memory: ")
    assert re.search(message, err), err


def test_missing_and_corrupt_databases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["--data-dir", str(tmp_path / "nowhere"), "show"]) == 2
    assert "no notes database at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()  # looking never creates one
    (tmp_path / DB_FILE).write_text("garbage" * 50)
    assert cli_main(["--data-dir", str(tmp_path), "export"]) == 2
    err = capsys.readouterr()
    assert "unreadable" in err.err and err.out == ""

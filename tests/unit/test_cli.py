"""The command line: --print-config, one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.cli import main
from emil.exceptions import ConfigurationError, PatienceExhausted, WorldError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for key in list(__import__("os").environ):
        if key.startswith("EMIL_"):
            monkeypatch.delenv(key)


def test_print_config_shows_values_and_sources(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    Path("emil.toml").write_text("step_limit = 5\n")
    monkeypatch.setenv("EMIL_BOT_NAME", "Otto")
    assert main(["--print-config", "--output-reserve", "4096"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("=")[0].strip(): line for line in out.splitlines() if not line.startswith("#")}
    assert "4096" in lines["output_reserve"] and "flag --output-reserve" in lines["output_reserve"]
    assert '"Otto"' in lines["bot_name"] and "env EMIL_BOT_NAME" in lines["bot_name"]
    assert "5" in lines["step_limit"] and "file emil.toml" in lines["step_limit"]
    assert '"http://127.0.0.1:8000/v1"' in lines["endpoint"] and "default" in lines["endpoint"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["fly"], "invalid choice: 'fly'"),
        (["--output-reserv=5", "--print-config"], "unrecognized arguments: --output-reserv"),
        (["--output-reserve", "many", "--print-config"], "bad setting output_reserve='many' (flag --output-reserve)"),
        (["--config", "missing.toml", "--print-config"], "cannot read config file missing.toml"),
        (["--endpoint", "localhost:8000", "--print-config"], "bad setting endpoint="),
    ],
)
def test_operator_mistakes_are_one_line_and_exit_2(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("emil: ")
    assert expected in err


def test_unreadable_toml_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    Path("emil.toml").write_text("window = [\n")
    assert main(["--print-config"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not valid TOML" in err


def _raise(exc: BaseException) -> object:
    def run_demo(*args: object, **kwargs: object) -> str:
        raise exc

    return run_demo


@pytest.mark.parametrize(
    ("exc", "code", "words"),
    [
        (PatienceExhausted("minecraft server unreachable for 30 s", service="minecraft server", waited_s=30), 3, "emil: gave up waiting: minecraft server"),
        (ExceptionGroup("tasks", [PatienceExhausted("llm endpoint down for 9 s", service="llm endpoint", waited_s=9)]), 3, "emil: gave up waiting: llm endpoint"),
        (ExceptionGroup("tasks", [ConfigurationError("mc_port 1 refused")]), 2, "emil: mc_port 1 refused"),
        (WorldError("the embedded server did not start"), 1, "emil: WorldError: the embedded server did not start"),
    ],
)
def test_the_demo_ends_as_live_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exc: BaseException, code: int, words: str,
) -> None:
    """The same cause gives the same exit code in demo and live (emil.agent.session.ending_of)."""
    import emil.demo

    monkeypatch.setattr(emil.demo, "run_demo", _raise(exc))
    assert main(["demo", "--duration", "1"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(words), err

"""Settings: layering file < env < flags, sources, and one-line errors naming the fix."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from emil.config import (
    Settings,
    add_settings_flags,
    flags_from_namespace,
    format_settings,
    load_settings,
)
from emil.exceptions import ConfigurationError


def test_defaults_match_the_field_notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no emil.toml here
    loaded = load_settings(env={})
    s = loaded.settings
    assert s.endpoint == "http://127.0.0.1:8000/v1"
    assert s.window is None and s.output_reserve == 6144 and s.enable_thinking is False
    assert s.model == "auto" and s.tokenizer == "auto"
    assert set(loaded.sources.values()) == {"default"}


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "emil.toml"
    cfg.write_text('output_reserve = 4096\nbot_name = "Bob"\n[llm]\nwindow = 32768\n')
    loaded = load_settings(
        {"bot_name": "Carl", "window": None},
        env={"EMIL_BOT_NAME": "Eve", "EMIL_ENABLE_THINKING": "true", "EMIL_OPERATORS": "alex, sam"},
        config_file=cfg,
    )
    s = loaded.settings
    assert s.output_reserve == 4096 and s.window == 32768
    assert s.bot_name == "Carl" and s.enable_thinking is True
    assert s.operators == ("alex", "sam")
    assert loaded.sources["output_reserve"] == f"file {cfg}"
    assert loaded.sources["enable_thinking"] == "env EMIL_ENABLE_THINKING"
    assert loaded.sources["bot_name"] == "flag --bot-name"
    assert loaded.sources["mc_port"] == "default"


def test_flags_are_derived_from_the_model() -> None:
    parser = argparse.ArgumentParser()
    add_settings_flags(parser)
    ns = parser.parse_args(["--output-reserve", "2048", "--enable-thinking", "--window", "auto"])
    flags = flags_from_namespace(ns)
    assert set(flags) == set(Settings.model_fields)
    s = load_settings(flags, env={}, config_file=None).settings
    assert s.output_reserve == 2048 and s.enable_thinking is True and s.window is None


def test_bad_value_names_field_value_source_and_fix() -> None:
    with pytest.raises(ConfigurationError) as e:
        load_settings(env={"EMIL_OUTPUT_RESERVE": "lots"})
    msg = str(e.value)
    assert "output_reserve" in msg and "'lots'" in msg and "env EMIL_OUTPUT_RESERVE" in msg
    assert "6144" in msg and "\n" not in msg


def test_unknown_key_in_file_suggests_the_right_name(tmp_path: Path) -> None:
    cfg = tmp_path / "emil.toml"
    cfg.write_text("output_reserv = 100\n")
    with pytest.raises(ConfigurationError, match="did you mean 'output_reserve'"):
        load_settings(env={}, config_file=cfg)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read config file"):
        load_settings(env={}, config_file=tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("window = = 3\n")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_settings(env={}, config_file=bad)


def test_endpoint_must_be_http() -> None:
    with pytest.raises(ConfigurationError, match="endpoint"):
        load_settings({"endpoint": "127.0.0.1:8000"}, env={})


def test_print_config_shows_every_value_with_source_and_masks_secrets() -> None:
    loaded = load_settings({"api_key": "sk-secret"}, env={"EMIL_MC_PORT": "25570"})
    text = format_settings(loaded, resolved={"window": 65536})
    assert "sk-secret" not in text and '"***"' in text
    assert any(line.startswith("mc_port") and "25570" in line and "env EMIL_MC_PORT" in line for line in text.splitlines())
    assert any(line.startswith("window") and "resolved: 65536" in line for line in text.splitlines())
    assert sum(1 for line in text.splitlines() if not line.startswith("#")) == len(Settings.model_fields)


def test_preserve_thinking_default_env_and_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no emil.toml here
    assert load_settings(env={}).settings.preserve_thinking is True
    from_env = load_settings(env={"EMIL_PRESERVE_THINKING": "false"})
    assert from_env.settings.preserve_thinking is False
    assert from_env.sources["preserve_thinking"] == "env EMIL_PRESERVE_THINKING"
    parser = argparse.ArgumentParser()
    add_settings_flags(parser)
    flags = flags_from_namespace(parser.parse_args(["--no-preserve-thinking"]))
    from_flag = load_settings(flags, env={"EMIL_PRESERVE_THINKING": "true"}, config_file=None)
    assert from_flag.settings.preserve_thinking is False
    assert from_flag.sources["preserve_thinking"] == "flag --preserve-thinking"


def test_unknown_environment_variable_suggests_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="unknown environment variable EMIL_OUTPUT_RESERV: did you mean 'EMIL_OUTPUT_RESERVE'"):
        load_settings(env={"EMIL_OUTPUT_RESERV": "4096"}, config_file=None)
    # variables Emil reads that are not settings are not mistakes
    load_settings(env={"EMIL_NO_BOOTSTRAP": "1", "EMIL_JS_DIR": "/tmp", "EMIL_CONFIG": ""}, config_file=None)


def test_a_key_set_twice_in_the_file_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "emil.toml"
    cfg.write_text("output_reserve = 4096\n[llm]\noutput_reserve = 2048\n")
    with pytest.raises(ConfigurationError, match=r"'output_reserve' is set twice .* at the top level and in \[llm\]"):
        load_settings(env={}, config_file=cfg)
    cfg.write_text("[llm]\nwindow = 1\n[other]\nwindow = 2\n")
    with pytest.raises(ConfigurationError, match=r"at \[llm\] and in \[other\]"):
        load_settings(env={}, config_file=cfg)


def test_budget_arithmetic_is_checked_without_a_server() -> None:
    with pytest.raises(ConfigurationError, match="leaves no room for a prompt in window 8192"):
        load_settings({"window": "8192", "output_reserve": "8192"}, env={}, config_file=None)
    with pytest.raises(ConfigurationError, match=r"prompt_budget 8000 \+ output_reserve 1024 > window 8192"):
        load_settings({"window": "8192", "output_reserve": "1024", "prompt_budget": "8000"}, env={}, config_file=None)
    ok = load_settings({"window": "8192", "output_reserve": "1024", "prompt_budget": "7000"}, env={}, config_file=None)
    assert ok.settings.prompt_budget == 7000


def test_every_setting_has_a_description_and_help_shows_it_with_the_default() -> None:
    parser = argparse.ArgumentParser()
    add_settings_flags(parser)
    helps = {a.dest: a.help or "" for a in parser._actions}
    for name, info in Settings.model_fields.items():
        assert info.description, f"setting {name} has no docstring (it is the --help text)"
        text = helps[f"set_{name}"]
        first = " ".join(info.description.split("\n\n")[0].split())
        assert first.replace("%", "%%") in text and "(default: " in text, name
    assert "(default: 6144;" in helps["set_output_reserve"]
    assert "(default: auto;" in helps["set_window"]
    assert "(default: defend,flee,eat,unstuck;" in helps["set_reflexes"]


def test_validate_settings_names_the_setting_its_source_and_the_fix() -> None:
    from emil.config import SettingsError, validate_settings

    assert validate_settings({"output_reserve": 256}, {}).output_reserve == 256
    with pytest.raises(SettingsError) as bad:
        validate_settings({"output_reserve": -5}, {"output_reserve": "--set output_reserve"})
    assert str(bad.value).startswith("bad setting output_reserve=-5 (--set output_reserve): ")
    assert "remove it to use the default" in str(bad.value)
    with pytest.raises(SettingsError, match=r"unknown setting 'output_reserv' \(--set\): did you mean 'output_reserve'\?"):
        validate_settings({"output_reserv": 1}, {"output_reserv": "--set"})

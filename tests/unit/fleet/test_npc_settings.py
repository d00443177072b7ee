"""One NPC's settings from a fleet file: the file's top level < its [[npc]] table < env < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.config import SettingsError, load_settings
from emil.exceptions import ConfigurationError

FLEET = """\
endpoint = "http://127.0.0.1:8000/v1"
operators = ["olga"]
give_items_per_hour = 10
metrics_address = "127.0.0.2:9480"

[[npc]]
name = "Mira"
persona = "You are the trader."
data_dir = "data/mira"
metrics_port = 9481
give_items_per_hour = 64

[[npc]]
name = "Bram"
data_dir = "data/bram"
npc_players = ["Rover"]
"""


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.toml"
    path.write_text(FLEET)
    return path


def test_the_npc_table_lies_over_the_top_level(fleet: Path) -> None:
    mira = load_settings(env={}, config_file=fleet, npc="Mira")
    s = mira.settings
    assert (s.bot_name, s.persona, s.data_dir) == ("Mira", "You are the trader.", Path("data/mira"))
    assert s.give_items_per_hour == 64 and mira.sources["give_items_per_hour"] == f"file {fleet} [[npc]] Mira"
    assert s.operators == ("olga",) and mira.sources["operators"] == f"file {fleet}"
    assert s.metrics_address == "127.0.0.2:9481"  # the top level's host, the table's port
    bram = load_settings(env={}, config_file=fleet, npc="Bram").settings
    assert bram.give_items_per_hour == 10 and bram.persona == "" and bram.metrics_address == "127.0.0.2:9480"


def test_the_fleets_other_names_join_npc_players(fleet: Path) -> None:
    assert load_settings(env={}, config_file=fleet, npc="Mira").settings.npc_players == ("Bram",)
    bram = load_settings(env={}, config_file=fleet, npc="Bram")
    assert bram.settings.npc_players == ("Rover", "Mira")
    assert "the fleet's other NPCs" in bram.sources["npc_players"]


def test_env_and_flags_still_win(fleet: Path) -> None:
    s = load_settings({"give_items_per_hour": "5"}, env={"EMIL_PERSONA": "You are loud."}, config_file=fleet,
                      npc="Mira").settings
    assert (s.give_items_per_hour, s.persona) == (5, "You are loud.")
    assert load_settings(env={"EMIL_NPC": "Bram"}, config_file=fleet).settings.bot_name == "Bram"


def test_a_fleet_file_needs_an_npc_named(fleet: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"fleet of 2 NPCs \(Mira, Bram\); pass --npc NAME"):
        load_settings(env={}, config_file=fleet)
    with pytest.raises(ConfigurationError, match=r"no NPC of that name; did you mean Mira\? its NPCs: Mira, Bram"):
        load_settings(env={}, config_file=fleet, npc="Mora")


def test_npc_needs_a_fleet_file(tmp_path: Path) -> None:
    plain = tmp_path / "emil.toml"
    plain.write_text('bot_name = "Emil"\n')
    with pytest.raises(ConfigurationError, match="has no \\[\\[npc\\]\\] tables"):
        load_settings(env={}, config_file=plain, npc="Mira")


@pytest.mark.parametrize(("text", "wrong"), [
    ('[npc]\nname = "Mira"\n', r"has an \[npc\] table; write \[\[npc\]\]"),
    ('[[npc]]\ndata_dir = "x"\n', r"\[\[npc\]\] number 1 .* has no name"),
    ('[[npc]]\nname = "Mira"\n[[npc]]\nname = "Mira"\n', "are named Mira; every NPC needs its own name"),
])
def test_fleet_file_shapes_that_are_refused(tmp_path: Path, text: str, wrong: str) -> None:
    path = tmp_path / "f.toml"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=wrong):
        load_settings(env={}, config_file=path, npc="Mira")


def test_every_problem_of_one_npc_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text('[[npc]]\nname = "Mira"\nbot_name = "X"\nmetrics_port = 70000\ngive_items_per_hour = -1\n'
                    'chat_lines_per_turn = 900\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(env={}, config_file=path, npc="Mira")
    problems = caught.value.problems
    assert len(problems) == 4, problems
    assert any("bot_name in [[npc]] Mira" in p for p in problems)
    assert any("bad metrics_port=70000" in p for p in problems)
    assert any(p.startswith("bad setting give_items_per_hour=-1 (file") for p in problems)
    assert any(p.startswith("bad setting chat_lines_per_turn=900") for p in problems)
    assert str(caught.value) == problems[0]


def test_a_name_that_is_no_minecraft_name(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text('[[npc]]\nname = "Old Mira"\n')
    with pytest.raises(SettingsError, match="is not a Minecraft name"):
        load_settings(env={}, config_file=path, npc="Old Mira")


def test_live_runs_one_npc_of_the_file(fleet: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from emil.cli import main

    for key in [k for k in __import__("os").environ if k.startswith("EMIL_")]:
        monkeypatch.delenv(key)
    assert main(["--config", str(fleet), "--npc", "Mira", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert f"# config file: {fleet}, NPC Mira" in out
    assert 'persona' in out and f"file {fleet} [[npc]] Mira" in out
    assert main(["live", "--config", str(fleet)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("emil: ") and "pass --npc NAME" in err and len(err.splitlines()) == 1

"""``fleet check``: the documented fleet resolves; a problem in one NPC is its own line, exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from emil.fleet.cli import cli_main
from emil.fleet.plan import check_fleet, format_plan

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "fleet.toml"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the check makes recording_dir, relative to the working folder
    return tmp_path


def test_the_documented_fleet_resolves_with_real_personas(here: Path) -> None:
    plan = check_fleet(EXAMPLE, env={})
    assert plan.ok, plan.problems
    names = [n.name for n in plan.npcs]
    assert names == ["Mira", "Bram", "Tilda"]
    for npc in plan.npcs:
        s = npc.settings
        assert s.bot_name == npc.name and s.persona and str(s.data_dir).endswith(npc.name.lower())
        assert set(s.npc_players) == set(names) - {npc.name}
    # different personas, different system prompts, each counted
    assert len({n.settings.persona for n in plan.npcs}) == 3
    assert all(n.system_prompt_tokens > 300 for n in plan.npcs)
    assert len({n.settings.metrics_address for n in plan.npcs}) == 3
    text = format_plan(plan)
    assert "3 NPCs; nothing wrong" in text and "live --config" in text and "--npc NAME" in text
    for npc in plan.npcs:
        assert f"{npc.system_prompt_tokens} tokens" in text


def test_a_longer_persona_costs_more_tokens(here: Path) -> None:
    path = here / "f.toml"
    path.write_text('[[npc]]\nname = "A"\ndata_dir = "a"\nmetrics_port = 0\npersona = "You are the smith."\n'
                    '[[npc]]\nname = "B"\ndata_dir = "b"\nmetrics_port = 0\n'
                    'persona = "You are the blacksmith of the northern village; you forge tools, mend armour '
                    'and complain about the price of iron to anyone who listens."\n')
    plan = check_fleet(path, env={})
    assert plan.ok, plan.problems
    a, b = plan.npcs
    assert b.system_prompt_tokens > a.system_prompt_tokens + 20


def test_every_npcs_problems_and_the_fleets_own(here: Path) -> None:
    path = here / "f.toml"
    path.write_text('operators = ["olga"]\n'
                    '[[npc]]\nname = "Mira"\ndata_dir = "d/m"\nmetrics_port = 9481\n'
                    '[[npc]]\nname = "Bram"\ndata_dir = "d/b"\nmetrics_port = 9482\ngive_items_per_hour = -3\n'
                    '[[npc]]\nname = "Tilda"\ndata_dir = "d/m"\nmetrics_port = 9481\n'
                    '[[npc]]\nname = "Olaf"\ndata_dir = "d/o"\nmetrics_port = 9484\nreflexs = ["eat"]\n')
    plan = check_fleet(path, env={})
    lines = [str(p) for p in plan.problems]
    assert not plan.ok
    assert [p.npc for p in plan.problems] == ["Bram", "Tilda", "Tilda", "Olaf"], lines
    assert lines[0].startswith("Bram: bad setting give_items_per_hour=-3 (file") and "[[npc]] Bram" in lines[0]
    assert "data_dir d/m" in lines[1] and "also Mira's" in lines[1] and "give Tilda its own data_dir" in lines[1]
    assert "port 9481, as Mira does" in lines[2] and "metrics_port" in lines[2]
    assert "did you mean 'reflexes'" in lines[3]


def test_an_npc_that_does_not_validate_still_counts_for_the_fleets_checks(here: Path) -> None:
    path = here / "f.toml"
    path.write_text('[[npc]]\nname = "Mira"\ndata_dir = "d/m"\nmetrics_port = 9481\n'
                    '[[npc]]\nname = "Tilda"\ndata_dir = "d/m"\nmetrics_port = 9481\nreflexs = ["eat"]\n')
    lines = [str(p) for p in check_fleet(path, env={}).problems]
    assert len(lines) == 3 and all(line.startswith("Tilda: ") for line in lines), lines
    assert "also Mira's" in lines[1] and "as Mira does" in lines[2]


def test_the_command_prints_one_line_per_problem_and_exits_2(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = here / "f.toml"
    shutil.copy(EXAMPLE, path)
    path.write_text(path.read_text().replace("metrics_port = 9482", "metrics_port = 9482\nnpc_turns_per_minute = 0"))
    assert cli_main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("emil fleet: Bram: bad setting npc_turns_per_minute=0 (file")
    assert err[-1] == f"emil fleet: 1 problem(s) in 1 NPC(s) of {path}; nothing started"
    assert len(err) == 2


def test_a_file_without_npcs_is_one_line(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = here / "emil.toml"
    path.write_text('bot_name = "Emil"\n')
    assert cli_main(["check", "--config", str(path)]) == 2
    assert capsys.readouterr().err == f"emil fleet: {path} has no [[npc]] tables: a fleet names each NPC in one (docs/fleet.md)\n"
    assert cli_main(["check", "--config", str(here / "missing.toml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err

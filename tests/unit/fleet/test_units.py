"""The generated units: systemd's own verifier and the Kubernetes API schemas read them.

systemd cannot run here (PID 1 is not systemd, and ``systemd --user`` does not start in this
sandbox), so the template unit is checked with ``systemd-analyze verify`` and its restart
lines are read back; the Kubernetes manifest is validated with kubernetes-validate (the API's
own OpenAPI schemas, strict: an unknown field fails).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from emil.fleet.plan import FleetPlan, check_fleet
from emil.fleet.restart import DEFAULT_POLICY
from emil.fleet.units import UnitOptions, k8s_name, kubernetes_manifest, systemd_unit, write_units

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "fleet.toml"
NEWER_KEYS = ("RestartSteps", "RestartMaxDelaySec")
"""systemd 254's backoff keys: an older systemd ignores them (with a warning) and waits RestartSec."""


@pytest.fixture
def plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FleetPlan:
    monkeypatch.chdir(tmp_path)
    plan = check_fleet(EXAMPLE, env={})
    assert plan.ok, plan.problems
    return plan


def _options(tmp_path: Path) -> UnitOptions:
    return UnitOptions(config=EXAMPLE, workdir=tmp_path, python=Path(sys.executable))


def _verify(unit: Path) -> tuple[int, list[str]]:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is missing: apt-get install systemd"
    done = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    return done.returncode, [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]


def _systemd_version() -> int:
    out = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"systemd (\d+)", out)
    assert m, out
    return int(m.group(1))


def test_the_template_unit_passes_systemds_verifier(plan: FleetPlan, tmp_path: Path) -> None:
    out = tmp_path / "units"
    write_units(plan, _options(tmp_path), out)
    for npc in plan.npcs:  # an instance: the template's text under the instance's name
        shutil.copy(out / "emil@.service", out / f"emil@{npc.name}.service")
    code, lines = _verify(out / "emil@Mira.service")
    assert code == 0, lines
    unexpected = [ln for ln in lines if not (_systemd_version() < 254 and any(f"Unknown key '{k}'" in ln or
                                                                              f"Unknown key name '{k}'" in ln
                                                                              for k in NEWER_KEYS))]
    assert not unexpected, lines
    code, lines = _verify(out / "emil-fleet.target")
    assert code == 0 and not [ln for ln in lines if not any(k in ln for k in NEWER_KEYS)], lines


def test_the_verifier_can_fail(tmp_path: Path) -> None:
    """A unit whose program is missing is refused: the check above reads something."""
    bad = tmp_path / "emil@Mira.service"
    text = systemd_unit(_options(tmp_path)).replace(sys.executable, "/nonexistent/python")
    bad.write_text(text)
    code, lines = _verify(bad)
    assert code != 0 and any("/nonexistent/python" in ln for ln in lines), lines


def test_the_restart_rule_in_the_unit(tmp_path: Path) -> None:
    text = systemd_unit(_options(tmp_path))
    keys = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln and not ln.startswith("#"))
    assert keys["Restart"] == "on-failure"  # 1, 3 and signals restart; 0 does not
    assert keys["RestartPreventExitStatus"] == "2"  # a configuration error never does
    assert keys["RestartSec"] == f"{DEFAULT_POLICY.first_delay_s:g}s"
    assert keys["RestartMaxDelaySec"] == f"{DEFAULT_POLICY.max_delay_s:g}s"
    assert keys["RestartSteps"] == str(DEFAULT_POLICY.steps)
    assert keys["StartLimitBurst"] == str(DEFAULT_POLICY.burst)
    assert keys["KillSignal"] == "SIGTERM"
    assert keys["ExecStart"].endswith(f"live --config {EXAMPLE} --npc %i")


def test_the_kubernetes_jobs_validate_and_fail_on_exit_2(plan: FleetPlan, tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(kubernetes_manifest(plan, _options(tmp_path))) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.31.0", strict=True)
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert [j["metadata"]["name"] for j in jobs] == [k8s_name(n.name) for n in plan.npcs]
    for job, npc in zip(jobs, plan.npcs, strict=True):
        spec = job["spec"]
        assert spec["template"]["spec"]["restartPolicy"] == "Never"
        (rule,) = spec["podFailurePolicy"]["rules"]
        assert rule == {"action": "FailJob", "onExitCodes": {"containerName": "emil", "operator": "In", "values": [2]}}
        (container,) = spec["template"]["spec"]["containers"]
        assert container["args"][-2:] == ["--npc", npc.name]
        assert {"name": "EMIL_METRICS_ADDRESS", "value": f"0.0.0.0:{npc.settings.metrics_address.rsplit(':', 1)[1]}"} \
            in container["env"]
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config["data"]["emil.toml"] == EXAMPLE.read_text()


def test_the_schema_check_can_fail(plan: FleetPlan, tmp_path: Path) -> None:
    job = next(d for d in yaml.safe_load_all(kubernetes_manifest(plan, _options(tmp_path))) if d and d["kind"] == "Job")
    job["spec"]["podFailurePolicy"]["rules"][0]["onExitCode"] = job["spec"]["podFailurePolicy"]["rules"][0].pop("onExitCodes")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.31.0", strict=True)


def test_names_that_clash_as_kubernetes_names_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from emil.exceptions import ConfigurationError

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "f.toml"
    path.write_text('[[npc]]\nname = "Mira_A"\ndata_dir = "a"\nmetrics_port = 0\n'
                    '[[npc]]\nname = "mira-a"\ndata_dir = "b"\nmetrics_port = 0\n')
    plan = check_fleet(path, env={})
    assert not plan.ok  # "mira-a" is no Minecraft name: the check says so first
    path.write_text('[[npc]]\nname = "Mira_A"\ndata_dir = "a"\nmetrics_port = 0\n'
                    '[[npc]]\nname = "mira_a"\ndata_dir = "b"\nmetrics_port = 0\n')
    plan = check_fleet(path, env={})
    assert plan.ok, plan.problems
    with pytest.raises(ConfigurationError, match="same Kubernetes name"):
        kubernetes_manifest(plan, _options(tmp_path))

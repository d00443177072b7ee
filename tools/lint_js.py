#!/usr/bin/env python3
"""ESLint over Emil's JavaScript (emil/world/js: the bot module, the embedded server's plugins,
the scripted player), with the flat config committed there (eslint.config.js).

ESLint is a devDependency of emil/world/js/package.json, pinned in its lockfile; `run_emil.py
setup` installs the runtime's dependencies only (``npm ci --omit=dev``), so the first run here
adds the dev ones from the same lockfile (``npm install --include=dev``, a few seconds with a
warm cache). .ci/run calls it after ruff and mypy.

    python3 tools/lint_js.py [paths...]     (default: the whole folder)

Exit codes: 0 clean, 1 ESLint found problems (printed), 2 ESLint could not run (setup).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.exceptions import EmilError
from emil.world.setup import JS_SOURCE_DIR, ensure_js_deps, node_bin, npm_cli

ESLINT = JS_SOURCE_DIR / "node_modules" / "eslint" / "bin" / "eslint.js"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(node_bin().parent) + os.pathsep + env.get("PATH", "")  # npm's scripts run this Node
    return env


def ensure_eslint() -> Path:
    """ESLint from the lockfile in emil/world/js/node_modules (installed when missing)."""
    ensure_js_deps(progress=False)
    if not ESLINT.exists():
        cmd = [str(node_bin()), str(npm_cli()), "install", "--include=dev", "--no-audit", "--no-fund", "--loglevel=error"]
        done = subprocess.run(cmd, cwd=JS_SOURCE_DIR, env=_env(), capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not ESLINT.exists():
            raise EmilError(f"npm install --include=dev failed in {JS_SOURCE_DIR} (exit {done.returncode}): "
                            + (done.stderr or done.stdout).strip()[-400:])
    return ESLINT


def main(argv: list[str] | None = None) -> int:
    paths = (sys.argv[1:] if argv is None else argv) or ["."]
    try:
        eslint = ensure_eslint()
    except EmilError as e:
        sys.stderr.write(f"lint_js: {e}\n")
        return 2
    done = subprocess.run([str(node_bin()), str(eslint), *paths], cwd=JS_SOURCE_DIR, env=_env(), check=False)
    if done.returncode not in (0, 1):
        sys.stderr.write(f"lint_js: eslint could not run (exit {done.returncode})\n")
        return 2
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())

"""The bot's JavaScript is linted like the Python (ESLint, the flat config in emil/world/js):
clean today, and the lint can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the first run installs ESLint from the lockfile (npm)

ROOT = Path(__file__).resolve().parents[3]
LINT = [sys.executable, str(ROOT / "tools" / "lint_js.py")]


def test_the_javascript_is_clean() -> None:
    done = subprocess.run(LINT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_lint_finds_a_bug_and_exits_1() -> None:
    bug = "'use strict'\nfunction f (a) { return b }\nmodule.exports = { f }\n"
    done = subprocess.run([*LINT, "--stdin", "--stdin-filename", "emil_bug.js"], input=bug, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "'b' is not defined" in done.stdout and "no-undef" in done.stdout

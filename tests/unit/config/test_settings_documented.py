"""Every setting has its row in docs/operations.md's settings table, and no row names a setting
that does not exist: the table is where an operator looks a setting up."""

from __future__ import annotations

import re
from pathlib import Path

from emil.config import Settings

DOC = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def _documented() -> set[str]:
    names: set[str] = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        first = line.split("|")[1] if line.startswith("| `") else ""
        names |= set(re.findall(r"`([a-z][a-z0-9_]*)`", first))
    return names


def test_every_setting_has_a_row() -> None:
    missing = sorted(set(Settings.model_fields) - _documented())
    assert not missing, f"settings without a row in docs/operations.md: {missing}"


def test_every_row_is_a_setting() -> None:
    unknown = sorted(_documented() - set(Settings.model_fields))
    assert not unknown, f"rows in docs/operations.md naming no setting: {unknown}"

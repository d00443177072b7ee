"""Every operator tool re-runs itself in the project's .venv before importing a dependency, so
`python3 tools/NAME.py` works as the docs write it (the docs test runs them; this says which
one broke, without services)."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

TOOLS = sorted((Path(__file__).resolve().parents[2] / "tools").glob("*.py"))
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: p.name)
def test_a_tool_bootstraps_before_importing_a_dependency(path: Path) -> None:
    body = ast.parse(path.read_text()).body
    calls = [i for i, node in enumerate(body)
             if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
             and getattr(node.value.func, "id", "") == "use_project_python"]
    assert calls, f"{path.name} never calls use_project_python(__file__)"
    for node in body[: calls[0]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            for name in names:
                top = name.split(".")[0]
                assert top in STDLIB or name == "emil._bootstrap", (
                    f"{path.name} imports {name} before use_project_python: it fails under a bare python3"
                )


def test_the_just_installed_marker_stays_with_the_process_that_was_installed_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a first-run install the tool re-runs itself with a marker; once it runs, its own
    children (python3 tools/... in another checkout) must not inherit it, or each would say
    "the install into .venv did not take" and exit 2."""
    from emil import _bootstrap

    monkeypatch.setenv(_bootstrap._JUST_INSTALLED, "1")
    monkeypatch.delenv("EMIL_NO_BOOTSTRAP", raising=False)
    monkeypatch.setattr(_bootstrap, "_has_emil_from_here", lambda: True)
    monkeypatch.setattr(_bootstrap, "_in_project_venv", lambda: True)
    monkeypatch.setattr(_bootstrap, "_install_is_current", lambda: True)
    _bootstrap.use_project_python(__file__, [])
    assert _bootstrap._JUST_INSTALLED not in os.environ

"""At the end of a session that ran documented commands: what each cost against its budget."""

from __future__ import annotations

import sys

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    module = sys.modules.get("tests.docs.test_doc_commands")
    spent = getattr(module, "SPENT", None)
    if not spent:
        return
    wall = sum(s.wall_s for s in spent)
    cpu = sum(s.cpu_s for s in spent)
    tr = terminalreporter
    tr.section("documented commands: time against budget (tests/docs/test_doc_commands.py BUDGET_S)")
    ranked = sorted(spent, key=lambda s: s.cpu_s, reverse=True)
    shown = [s for i, s in enumerate(ranked) if i < 10 or s.cpu_s >= s.budget_s / 2]
    tr.write_line(f"{len(spent)} commands: {wall:.0f} s wall, {cpu:.0f} s CPU; the 10 costliest and any over half its budget:")
    for s in shown:
        tr.write_line(f"  {s.cpu_s:6.1f} s CPU of {s.budget_s:4.0f}  {s.wall_s:6.1f} s wall  {s.where}  {s.argv[:90]}")

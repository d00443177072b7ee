"""Pytest's final counts and failed tests, read from its output (any options, colours or not).

Used by the tools that run the suite and report on it: tools/ci_under_load.py (the suite under
load, several times) and tools/test_lanes.py (the suite in two lanes at once, .ci/run).
"""

from __future__ import annotations

import re

__all__ = ["parse_pytest_output"]

_SUMMARY = re.compile(r"^=*\s*(.*?\b(?:passed|failed|errors?|skipped|deselected|no tests ran)\b.*?) in [\d.]+s\b")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)")
_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)")
_FAILED_VERBOSE = re.compile(r"^(\S+::\S+) (FAILED|ERROR)\b")
_SECTION = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_BANNER = re.compile(r"^=+ .* =+$")
_HEADER = re.compile(r"^_{3,} (?:ERROR at \w+ of |ERROR collecting )?(.+?) _{3,}$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def parse_pytest_output(text: str) -> tuple[dict[str, int], list[str]]:
    """Pytest's final counts ({"passed": 1480, "failed": 1, ...}) and the failed/erroring tests.

    Whatever options the run's pytest had: colours are stripped (FORCE_COLOR/PY_COLORS in a CI
    environment colour even a log file); the tests are named from the short summary (``FAILED
    tests/...::name``, pytest's default ``-r fE``), else from verbose result lines
    (``tests/...::name FAILED``), else from the FAILURES/ERRORS section headers (the bare
    name); failures that none of these names are counted as such, never dropped."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    counts: dict[str, int] = {}
    for line in reversed(lines):
        m = _SUMMARY.match(line.strip())
        if m:
            for n, what in _COUNT.findall(m.group(1)):
                key = {"error": "errors", "warning": "warnings"}.get(what, what)
                counts[key] = int(n)
            break
    failures: list[str] = []

    def add(word: str, name: str) -> None:
        if f"{word} {name}" not in failures:
            failures.append(f"{word} {name}")

    for line in lines:
        if m := _FAILED.match(line):
            add(m.group(1), m.group(2))
    if not failures:
        for line in lines:
            if m := _FAILED_VERBOSE.match(line):
                add(m.group(2), m.group(1))
    if not failures:
        word = None
        for line in lines:
            if m := _SECTION.match(line):
                word = "FAILED" if m.group(1) == "FAILURES" else "ERROR"
            elif _BANNER.match(line):
                word = None
            elif word and (m := _HEADER.match(line)):
                add(word, m.group(1))
    unnamed = counts.get("failed", 0) + counts.get("errors", 0) - len(failures)
    if unnamed > 0:
        failures.append(f"UNNAMED {unnamed} failed or erroring test(s) that the output does not name (see the log)")
    return counts, failures

"""Argument types and the parser every command line of Emil shares (run_emil.py and tools/).

An operator's mistake in a flag (a zero or negative count, a duration of ``-3``, a file that is
not an Emil recording) must be one line on stderr and exit code 2, before any service starts.
argparse runs these types while it parses, so a bad value never reaches the code that starts a
server or a double; :class:`OneLineParser` prints argparse's own errors on one line (argparse
prints the usage block first).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = [
    "EXIT_MISTAKE",
    "OneLineParser",
    "fraction",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "positive_ints",
    "positive_seconds",
    "recording_path",
]

EXIT_MISTAKE = 2


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (``PROG: error: ... (see PROG --help)``), exit 2."""

    def error(self, message: str) -> NoReturn:
        one_line = " ".join(message.split())
        sys.stderr.write(f"{self.prog}: error: {one_line} (see {self.prog} --help)\n")
        raise SystemExit(EXIT_MISTAKE)


def _checked(text: str, kind: Callable[[str], float], what: str, ok: Callable[[float], bool], rule: str) -> float:
    """``text`` read as ``kind`` (``what`` names it), finite, and ``ok``; else why not."""
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    if not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """A count or a size: an integer > 0."""
    return int(_checked(text, int, "an integer", lambda v: v > 0, "a positive integer"))


def non_negative_int(text: str) -> int:
    """A count that may be zero (warm-up requests, rows to show)."""
    return int(_checked(text, int, "an integer", lambda v: v >= 0, "zero or a positive integer"))


def positive_float(text: str) -> float:
    """A length (hours, a ratio such as chars per token): a finite number > 0."""
    return _checked(text, float, "a number", lambda v: v > 0, "a positive number")


def non_negative_float(text: str) -> float:
    """A pause that may be zero (seconds to hold, idle gap)."""
    return _checked(text, float, "a number", lambda v: v >= 0, "zero or a positive number")


def positive_seconds(text: str) -> float:
    """A duration in seconds: a finite number > 0."""
    return _checked(text, float, "a number of seconds", lambda v: v > 0, "a positive number of seconds")


def fraction(text: str) -> float:
    """A share of something: a number in (0, 1]."""
    return _checked(text, float, "a number", lambda v: 0 < v <= 1, "a fraction in (0, 1]")


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of positive integers (``1,4,8``), at least one."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return [positive_int(p) for p in parts]


def recording_path(text: str) -> Path:
    """A file that is an Emil recording (starts with its header record); else one line why not."""
    from emil.exceptions import NotARecordingError
    from emil.recording import check_recording_file

    try:
        check_recording_file(text)
    except NotARecordingError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return Path(text)

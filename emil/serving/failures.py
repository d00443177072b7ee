"""An engine's log tail -> the root cause of its death, and whether a restart can help.

vLLM prints the real error inside the engine-core process's traceback and then a wrapper
("RuntimeError: Engine core initialization failed. See root cause above."), so the first
non-wrapper exception is the cause. A configuration error (a bad flag value, an unsupported
backend, an unrecognised argument, memory that cannot fit) fails identically on every start;
restarting it is the field notes' nine reloads of 23 GiB.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["EngineFailure", "classify_failure"]

FailureKind = Literal["configuration", "crash"]

_EXC_RE = re.compile(
    r"(?:^|\s|\))(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit))"
    r"(?::\s*(?P<msg>.*))?$"
)
# Wrappers that point at the real cause printed earlier.
_WRAPPERS = (
    "Engine core initialization failed",
    "See root cause above",
    "EngineDeadError",
    "EngineCore encountered an issue",
    "Worker failed with error",
    "died unexpectedly",
)
_CONFIG_TYPES = frozenset(
    {
        "ValueError",
        "TypeError",
        "KeyError",
        "NotImplementedError",
        "AssertionError",
        "ImportError",
        "ModuleNotFoundError",
        "FileNotFoundError",
        "PermissionError",
        "ValidationError",
        "SystemExit",
    }
)
_CONFIG_PATTERNS = re.compile(
    r"not supported|unsupported|does not support|unrecognized arguments|invalid choice|"
    r"unknown flag|no such file|not found|out of memory|no available memory|"
    r"exceeds available|insufficient|invalid value|must be|cannot be|is not a valid|"
    r"gated repo|401 client error|could not find|requires",
    re.IGNORECASE,
)
_ARGPARSE_RE = re.compile(r"^(?:usage: .*|.*: error: (?P<msg>.*))$")
# Log prefixes vLLM puts before each line: "(EngineCore_DP0 pid=123) ERROR 11-30 03:00:00 [x.py:1] "
_PREFIX_RE = re.compile(
    r"^(?:\([\w-]+ pid=\d+\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+[\d-]+\s+[\d:.]+\s+"
    r"\[[^\]]*\]\s*)?"
)
_VOLATILE_RE = re.compile(r"0x[0-9a-f]+|\b\d+(?:\.\d+)?\b", re.IGNORECASE)


@dataclass(frozen=True)
class EngineFailure:
    """Why the engine stopped, as far as its log and exit status tell."""

    cause: str
    """The root-cause line(s), e.g. "ValueError: moe_backend='marlin' is not supported ..."."""
    kind: FailureKind
    exit_code: int | None
    signature: str
    """The cause with numbers and addresses masked: equal signatures = the same failure."""


def _strip(line: str) -> str:
    return _PREFIX_RE.sub("", line.rstrip("\n")).rstrip()


def _is_wrapper(text: str) -> bool:
    return any(w in text for w in _WRAPPERS)


def classify_failure(
    log_tail: Sequence[str], exit_code: int | None, *, health_message: str | None = None
) -> EngineFailure:
    """Find the root cause in ``log_tail`` (oldest line first) and classify it."""
    lines = [_strip(line) for line in log_tail]
    cause: str | None = None
    exc_type = ""
    for i, line in enumerate(lines):
        argparse_match = _ARGPARSE_RE.match(line)
        if argparse_match and argparse_match.group("msg"):
            cause, exc_type = line, "SystemExit"
            break
        match = _EXC_RE.search(line)
        if match is None or _is_wrapper(line) or line.lstrip().startswith(("Traceback", "File ")):
            continue
        exc_type = match.group("type").rsplit(".", 1)[-1]
        cause = f"{exc_type}: {match.group('msg') or ''}".rstrip(": ").rstrip()
        # vLLM wraps long messages over the next line(s) ("Expected one of [...]").
        for follow in lines[i + 1 : i + 3]:
            if not follow or follow.lstrip().startswith(("Traceback", "File ", "[rank")):
                break
            if _EXC_RE.search(follow) or _is_wrapper(follow):
                break
            cause += " " + follow.strip()
        break
    if cause is None:
        cause = health_message or next(
            (line for line in reversed(lines) if line.strip()), "no output"
        )
        if exit_code is not None:
            cause = f"exit status {exit_code}: {cause}"
    configuration = exc_type in _CONFIG_TYPES or bool(_CONFIG_PATTERNS.search(cause))
    return EngineFailure(
        cause=cause,
        kind="configuration" if configuration else "crash",
        exit_code=exit_code,
        signature=_VOLATILE_RE.sub("#", cause),
    )

"""The recording's reader: tolerant of a torn tail, strict about what is a recording at all.

:func:`read_recording` stops at the first line it cannot read and says where, and reads a lone
surrogate escaped in a line (``"\\ud800"``, which no writer of this version leaves) as U+FFFD;
:func:`check_recording_file` refuses, with the reason, a file that is not an Emil recording
(before a command line does any work on it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from emil.exceptions import NotARecordingError
from emil.recording.records import (
    EndRecord,
    HeaderRecord,
    MessageRecord,
    Record,
    RequestRecord,
    parse_record,
)
from emil.trust.caps import valid_loads

__all__ = [
    "RecordingRead",
    "check_recording_file",
    "messages_for_request",
    "read_recording",
]


class RecordingRead(NamedTuple):
    """What :func:`read_recording` could read."""

    records: list[Record]
    stopped_at_line: int | None
    """1-based line number of the first unreadable line, or None when every line was read."""
    problem: str | None
    """What was wrong with that line (truncated JSON, unknown schema...), or None."""

    @property
    def header(self) -> HeaderRecord | None:
        """The first header, if any."""
        return next((r for r in self.records if isinstance(r, HeaderRecord)), None)

    @property
    def complete(self) -> bool:
        """True when the session was closed cleanly and every line was read."""
        return self.problem is None and bool(self.records) and isinstance(self.records[-1], EndRecord)


def read_recording(path: str | Path) -> RecordingRead:
    """Read a recording, stopping at the first line that is not a valid record.

    A process killed mid-write leaves a partial last line; that is reported in ``problem`` with
    its line number, and every record before it is returned. Blank lines are skipped.
    """
    records: list[Record] = []
    with Path(path).open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            truncated = not raw.endswith(b"\n")
            try:
                records.append(parse_record(valid_loads(raw)))
            except (ValueError, RecursionError, ValidationError) as e:
                what = "truncated last line" if truncated else "unreadable line"
                detail = str(e).splitlines()[0][:200]
                return RecordingRead(records, lineno, f"line {lineno}: {what} ({detail})")
    return RecordingRead(records, None, None)


_HEADER_LINE_LIMIT = 8 << 20
"""Bytes read looking for the end of the first line (a header holds the system prompt and tools)."""


def check_recording_file(path: str | Path) -> None:
    """Refuse, with the reason, a file an operator named as a recording that is not one.

    An Emil recording starts with its header record (the writer puts it first); anything else
    (an empty file, binary data, a README, another program's JSONL) raises
    :class:`~emil.exceptions.NotARecordingError`. :func:`read_recording` stays tolerant: this
    check is for command lines, before any work is done on the file.
    """
    p = Path(path)
    if not p.exists():
        raise NotARecordingError(f"no such recording: {p}")
    if not p.is_file():
        raise NotARecordingError(f"{p} is not an Emil recording (not a regular file); give a .jsonl file written by run_emil.py")
    with p.open("rb") as f:
        first = b""
        while not first.strip():
            first = f.readline(_HEADER_LINE_LIMIT)
            if not first:
                break
    why = _not_a_header(first)
    if why is not None:
        raise NotARecordingError(
            f"{p} is not an Emil recording ({why}); give a .jsonl file written by run_emil.py (live, demo or --recording)"
        )


def _not_a_header(line: bytes) -> str | None:
    if not line.strip():
        return "the file is empty"
    if b"\0" in line:
        return "binary data"
    try:
        data = json.loads(line)
    except (UnicodeDecodeError, ValueError):
        return "its first line is not JSON" if line.endswith(b"\n") else "its first line is not a complete JSON record"
    if not isinstance(data, dict) or data.get("kind") != "header":
        return "its first line is not an Emil header record"
    try:
        HeaderRecord.model_validate(data)
    except ValidationError as e:
        return f"its header record does not validate: {str(e).splitlines()[0]}"
    return None


def messages_for_request(records: Iterable[Record]) -> Iterator[tuple[RequestRecord, list[dict[str, Any]]]]:
    """Rebuild every request's OpenAI messages from the message records (for replay)."""
    by_ref: dict[str, dict[str, Any]] = {}
    for r in records:
        if isinstance(r, MessageRecord):
            by_ref[r.ref] = r.openai
        elif isinstance(r, RequestRecord):
            yield r, [by_ref[ref] for ref in r.refs]

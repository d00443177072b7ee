"""The recording's writer: append-only JSONL, flushed per record, never appending by accident.

A new session never appends to an existing file unless asked to, and then repairs a torn tail
first (:func:`repair_tail`), so a file holding several sessions reads to its end. Each message's
full content is written once (:meth:`Recorder.message`) and requests reference it by ``ref``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from emil.exceptions import ConfigurationError
from emil.recording.records import (
    RECORD_ADAPTER,
    EndRecord,
    ErrorRecord,
    MessageRecord,
    parse_record,
)
from emil.trust.caps import valid_json_text

__all__ = [
    "Recorder",
    "RecordingExists",
    "repair_tail",
]

_log = logging.getLogger("emil.recording")


class _MessageLike(Protocol):
    """What the recorder needs of a history message (emil.context.history.Message)."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def event_time(self) -> float | None: ...
    @property
    def status_full(self) -> str | None: ...
    def to_openai(self) -> dict[str, Any]: ...


def _canonical(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _valid_line(record: BaseModel) -> str:
    """A record whose text UTF-8 cannot encode (a lone surrogate that reached it past the
    answer's parsing), written with U+FFFD in its place (:func:`valid_json_text`), the same
    rule as everywhere else: the record is kept, never lost."""
    valid = RECORD_ADAPTER.validate_python(valid_json_text(RECORD_ADAPTER.dump_python(record)))  # type: ignore[arg-type]
    return RECORD_ADAPTER.dump_json(valid).decode()


class RecordingExists(ConfigurationError):
    """A new session was pointed at an existing recording without asking to append to it."""


def repair_tail(path: Path) -> int:
    """Cut a torn tail (a process killed mid-write) so the file ends on a whole, readable record.

    Lines are cut from the end while they are partial (no newline) or unreadable; returns the
    number of bytes cut (0 when the file was whole). An unreadable line followed by readable
    ones is not a tail: it stays, for the reader to report.
    """
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            start = _line_start(f, keep)
            f.seek(start)
            line = f.read(keep - start)
            if line.endswith(b"\n") and (not line.strip() or _readable(line)):
                break
            keep = start
        if keep < size:
            f.truncate(keep)
        return size - keep


def _line_start(f: IO[bytes], end: int) -> int:
    """Offset of the first byte of the line that ends at ``end`` (its newline included)."""
    f.seek(end - 1)
    hi = end - 1 if f.read(1) == b"\n" else end
    while hi > 0:
        lo = max(0, hi - 65536)
        f.seek(lo)
        newline = f.read(hi - lo).rfind(b"\n")
        if newline >= 0:
            return lo + newline + 1
        hi = lo
    return 0


def _readable(line: bytes) -> bool:
    try:
        parse_record(json.loads(line))
    except (ValueError, ValidationError):
        return False
    return True


class Recorder:
    """Append-only JSONL writer; every record is flushed as soon as it is written.

    A new recording never appends to an existing file: a non-empty ``path`` raises
    :class:`RecordingExists` unless ``append`` is True, and then a torn tail left by a killed
    process is cut first (and an ``error`` record says how many bytes), so the new session
    starts on a line of its own and the whole file stays readable.

    Besides :meth:`write`, it interns messages: :meth:`message` records a history message once;
    :meth:`request_refs` maps the OpenAI messages of a request to refs, writing a ``message``
    record for any part it has not seen (system prompt, memory note, trimmed variants).
    Observers (:meth:`add_observer`) receive every record after it is written; Emil's metrics
    are fed that way, so the loop makes no metrics calls. Not thread-safe: one recorder per
    agent loop.
    """

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing = self.path.exists() and self.path.stat().st_size > 0
        if existing and not append:
            raise RecordingExists(
                f"recording {self.path} already exists; choose another path (--recording) or set "
                "recording_append (--recording-append) to continue it"
            )
        repaired = repair_tail(self.path) if existing else 0
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self._refs: dict[str, str] = {}
        """Canonical JSON of an OpenAI message -> its ref (content-addressed interning)."""
        self._ids: dict[int, str] = {}
        """Message id -> ref, so a request's known messages are found without hashing them."""
        self._derived = 0
        self.records_written = 0
        self._observers: list[Callable[[BaseModel], None]] = []
        if repaired:
            _log.warning("recording %s: cut a torn last line (%d bytes) before appending", self.path, repaired)
            self.write(ErrorRecord(
                error_type="TornTail", where="recording",
                message=f"cut {repaired} bytes of a torn last line before this session appended",
            ))

    def add_observer(self, observer: Callable[[BaseModel], None]) -> None:
        """Call ``observer(record)`` for every record written from now on.

        An observer that raises is reported once in the log and removed: watching a session
        must never end it.
        """
        self._observers.append(observer)

    @property
    def closed(self) -> bool:
        return self._file is None

    def write(self, record: BaseModel) -> None:
        """Append one record and flush it. Writing to a closed recorder is a no-op."""
        if self._file is None:
            return
        try:
            line = RECORD_ADAPTER.dump_json(record).decode()  # type: ignore[arg-type]
        except PydanticSerializationError:
            line = _valid_line(record)
        self._file.write(line + "\n")
        self._file.flush()
        self.records_written += 1
        for observer in list(self._observers):
            try:
                observer(record)
            except Exception:
                _log.exception("recording observer %r failed; removed", observer)
                self._observers.remove(observer)

    def message(self, msg: _MessageLike, *, turn: int | None = None) -> str:
        """Record a history message's full content once; returns its ref (its id as text)."""
        ref = str(msg.id)
        if msg.id in self._ids:
            return self._ids[msg.id]
        openai = msg.to_openai()
        origin: Literal["history", "system", "memory"] = (
            "system" if msg.kind == "system" else "memory" if msg.kind == "memory" else "history"
        )
        self.write(
            MessageRecord(
                ref=ref, id=msg.id, origin=origin, message_kind=msg.kind,
                event_time=msg.event_time, openai=openai, turn=turn, status_full=msg.status_full,
            )
        )
        self._ids[msg.id] = ref
        self._refs[_canonical(openai)] = ref
        return ref

    def request_refs(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        turn: int | None = None,
        ids: Sequence[int | None] | None = None,
    ) -> list[str]:
        """Refs of a request's OpenAI messages, recording every part not seen before.

        ``ids`` (parallel to ``messages``) are the messages' immutable ids when known: a known
        id is looked up instead of hashing the message, which keeps a 36k-token prompt cheap.
        """
        refs: list[str] = []
        for i, m in enumerate(messages):
            mid = ids[i] if ids is not None and i < len(ids) else None
            if mid is not None and mid in self._ids:
                refs.append(self._ids[mid])
                continue
            key = _canonical(m)
            ref = self._refs.get(key)
            if ref is None:
                self._derived += 1
                ref = f"x{self._derived}"
                role = m.get("role")
                origin: Literal["system", "derived"] = (
                    "system" if role == "system" and i == 0 else "derived"
                )
                self.write(MessageRecord(ref=ref, id=mid, origin=origin, openai=dict(m), turn=turn))
                self._refs[key] = ref
            if mid is not None:
                self._ids[mid] = ref
            refs.append(ref)
        return refs

    def close(self, reason: str = "closed", *, exit_code: int | None = None) -> None:
        """Write the end record and close the file (idempotent)."""
        if self._file is None:
            return
        self.write(EndRecord(reason=reason, exit_code=exit_code))
        self._file.close()
        self._file = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close("error" if exc[0] is not None else "closed")



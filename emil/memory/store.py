"""Emil's notes in an embedded SQLite file, ``<data_dir>/memory.sqlite3``.

Written as facts are learned, one durable transaction per fact (or per batch of a summary), with
SQLite's rollback journal (:mod:`emil.memory.dbfile`: no shared-memory mapping, so a disk that
turns read-only is an error, never a SIGBUS): a process killed mid-write leaves the database as
of its last committed fact, readable by the next start and by ``run_emil.py memory``. A running Emil holds ``<data_dir>/emil.lock``
(:mod:`emil.memory.lock`); the operator's ``memory`` commands do not take it, and SQLite's own
locking keeps a ``forget`` beside a running Emil consistent.

Growth is bounded: each ``(about, subject, topic)`` keeps :data:`KEEP_PER_TOPIC` notes (a
player flooding requests keeps their last fifty, not all: promises not yet kept go last, then
what was said once or twice before what was repeated, then the newest), and the whole store its
newest :data:`MAX_NOTES`. Everything said stays in the archive (:mod:`emil.memory.archive`) for
its retention; the notes are the short form the pinned block is made of.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from emil.exceptions import ConfigurationError
from emil.memory.dbfile import Watched, connect
from emil.memory.lock import DataDirLock
from emil.memory.notes import Fact, Note, Source

__all__ = ["DB_FILE", "KEEP_PER_TOPIC", "MAX_NOTES", "MIN_FREE_BYTES", "MemoryStore", "MemoryStoreError", "check_free_space"]

DB_FILE = "memory.sqlite3"
SCHEMA_VERSION = 1
KEEP_PER_TOPIC = 50
MAX_NOTES = 20_000
MIN_FREE_BYTES = 8 * 1024 * 1024
"""Free space data_dir must have at start (a day of archive is a few MB)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    id       INTEGER PRIMARY KEY,
    about    TEXT NOT NULL,
    subject  TEXT NOT NULL,
    topic    TEXT NOT NULL,
    detail   TEXT NOT NULL DEFAULT '',
    count    INTEGER NOT NULL DEFAULT 1,
    note     TEXT NOT NULL DEFAULT '',
    told_by  TEXT,
    first_t  REAL NOT NULL,
    last_t   REAL NOT NULL,
    source   TEXT NOT NULL,
    UNIQUE (about, subject, topic, detail)
);
CREATE INDEX IF NOT EXISTS notes_by_topic ON notes (about, subject, topic, last_t);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLUMNS = "id, about, subject, topic, detail, count, note, told_by, first_t, last_t, source"


class MemoryStoreError(ConfigurationError):
    """The notes database cannot be used as configured (unwritable, missing, corrupt)."""


def _note(row: Sequence[Any]) -> Note:
    # Rows this store wrote through Fact's validation: built without validating them again
    # (rendering reads every note; validation was two thirds of its time).
    return Note.model_construct(
        id=row[0], about=row[1], subject=row[2], topic=row[3], detail=row[4], count=row[5],
        note=row[6], told_by=row[7], first_t=row[8], last_t=row[9], source=row[10],
    )


class MemoryStore:
    """Notes that survive a restart. Open with :meth:`open` (Emil) or :meth:`open_existing`
    (the operator's commands); not thread-safe: one store per agent loop."""

    def __init__(self, conn: sqlite3.Connection, path: Path, lock: DataDirLock | None, *, durable: bool = True) -> None:
        self._file = Watched(conn, path, what="notes database", durable=durable)
        self.path = path
        self._lock = lock

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._file.conn

    def check(self) -> None:
        """Between turns: a notes file deleted or replaced under the running Emil is written back
        from the open copy (said once; :class:`~emil.memory.dbfile.Watched`)."""
        self._file.check()

    # -- opening ----------------------------------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, *, lock: bool = True, durable: bool = True) -> MemoryStore:
        """Create the directory and database if needed, take the one-Emil lock, check the file.

        Raises :class:`MemoryStoreError` (a configuration error: exit 2) when the directory is
        not writable, the disk has less than :data:`MIN_FREE_BYTES` free, or the file is not a
        readable notes database, and :class:`~emil.memory.lock.DataDirLocked` when another Emil
        holds the directory. ``durable=False``: scratch stores (benchmarks) skip the disk syncs.
        """
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            held = DataDirLock(data_dir) if lock else None
            if held is not None:
                held.acquire()
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise MemoryStoreError(
                    f"data_dir {data_dir}: the disk is full ({e.strerror or e}); free space or point data_dir elsewhere"
                ) from e
            raise MemoryStoreError(
                f"data_dir {data_dir} is not writable ({e.strerror or e}); "
                "make it writable or set data_dir to a directory Emil may write"
            ) from e
        path = data_dir / DB_FILE
        try:
            if lock:
                check_free_space(data_dir)
            conn = cls._connect(path, readonly=False, durable=durable)
            try:
                with conn:
                    conn.executescript(_SCHEMA)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            except sqlite3.Error as e:
                conn.close()
                raise _unusable(path, e) from e
        except BaseException:
            if held is not None:
                held.release()
            raise
        return cls(conn, path, held, durable=durable)

    @classmethod
    def open_existing(cls, data_dir: Path, *, readonly: bool = True) -> MemoryStore:
        """An existing database, without the lock (Emil may be running beside the operator)."""
        path = data_dir / DB_FILE
        if not path.is_file():
            raise MemoryStoreError(
                f"no notes database at {path} (Emil has not run with this data_dir yet); "
                "check data_dir (--data-dir, EMIL_DATA_DIR or emil.toml)"
            )
        return cls(cls._connect(path, readonly=readonly), path, None)

    @staticmethod
    def _connect(path: Path, *, readonly: bool, durable: bool = True) -> sqlite3.Connection:
        try:
            conn = connect(path, readonly=readonly, durable=durable)
        except sqlite3.Error as e:
            raise _unusable(path, e) from e
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check: {check[0] if check else 'no answer'}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as e:
            conn.close()
            raise _unusable(path, e) from e
        if version > SCHEMA_VERSION:
            conn.close()
            raise MemoryStoreError(
                f"notes database {path} is schema {version}, newer than this Emil's "
                f"{SCHEMA_VERSION}; update Emil or use another data_dir"
            )
        if version and "notes" not in tables:
            conn.close()
            raise MemoryStoreError(f"{path} is an SQLite file but not Emil's notes; use another data_dir")
        return conn

    def close(self) -> None:
        """Close the database and release the lock (idempotent)."""
        self._conn.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def meta(self, key: str) -> str | None:
        """A value the store keeps about itself (e.g. ``archive_since``), None when unset."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._conn:
            self._conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                               (key, value))

    # -- writing ----------------------------------------------------------------------------------

    def learn(self, fact: Fact, *, t: float, source: Source = "event") -> None:
        """Remember one fact now (committed before this returns)."""
        self.learn_many([fact], t=t, source=source)

    def learn_many(self, facts: Iterable[Fact], *, t: float, source: Source = "event") -> int:
        """Remember several facts in one transaction; returns how many."""
        n = 0
        with self._conn:
            for fact in facts:
                self._upsert(fact, t, source)
                n += 1
        return n

    def facts_from_summary(self, facts: Iterable[Fact], *, t: float) -> int:
        """Phase 2's entry: the facts a model-written summary of folded turns names."""
        return self.learn_many(facts, t=t, source="summary")

    def _upsert(self, f: Fact, t: float, source: Source) -> None:
        self._conn.execute(
            """
            INSERT INTO notes (about, subject, topic, detail, count, note, told_by, first_t, last_t, source)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (about, subject, topic, detail) DO UPDATE SET
                count = count + excluded.count,
                note = CASE WHEN excluded.note != '' THEN excluded.note ELSE note END,
                told_by = COALESCE(excluded.told_by, told_by),
                last_t = MAX(last_t, excluded.last_t),
                source = excluded.source
            """,
            (f.about, f.subject, f.topic, f.detail, f.count, f.note, f.told_by, t, t, source),
        )
        self._conn.execute(
            """
            DELETE FROM notes WHERE id IN (
                SELECT id FROM notes WHERE about = ? AND subject = ? AND topic = ?
                ORDER BY (topic = 'promised' AND note = '') DESC, (count > 2) ASC, last_t DESC, id DESC LIMIT -1 OFFSET ?
            )
            """,
            (f.about, f.subject, f.topic, KEEP_PER_TOPIC),
        )
        total = self._conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0]
        if total > MAX_NOTES:
            self._conn.execute(
                "DELETE FROM notes WHERE id IN (SELECT id FROM notes ORDER BY last_t, id LIMIT ?)",
                (total - MAX_NOTES,),
            )

    def set_goal_status(self, goal: str, status: str, *, t: float) -> None:
        """A goal's status (active, done, failed, interrupted) replaced in place."""
        self.learn(Fact(about="goal", subject=goal, topic="goal", note=status), t=t)

    def keep_promises(self, player: str, item: str, *, since: float) -> int:
        """Emil gave ``player`` some ``item``: the promises made to them since ``since`` that
        name the item are kept (``note = "kept"``); the notes show open promises."""
        words = {item.lower(), item.lower().replace("_", " ")}
        with self._conn:
            rows = self._conn.execute(
                "SELECT id, detail FROM notes WHERE about = 'player' AND subject = ? AND topic = 'promised' "
                "AND note = '' AND last_t >= ?",
                (player, since),
            ).fetchall()
            kept = [row[0] for row in rows if any(w in str(row[1]).lower() for w in words)]
            self._conn.executemany("UPDATE notes SET note = 'kept' WHERE id = ?", [(i,) for i in kept])
        return len(kept)

    def interrupt_goals(self, *, t: float) -> int:
        """At start: goals still active belong to a session that ended before they did."""
        with self._conn:
            cur = self._conn.execute(
                "UPDATE notes SET note = 'interrupted', last_t = ? WHERE about = 'goal' AND note = 'active'",
                (t,),
            )
        return cur.rowcount

    def forget(self, name: str) -> int:
        """Delete every note about ``name`` (a player, place or goal, any case) and every note
        that player told; returns how many went (0 = nothing known by that name)."""
        with self._conn:
            cur = self._conn.execute(
                "DELETE FROM notes WHERE subject = ? COLLATE NOCASE OR told_by = ? COLLATE NOCASE",
                (name, name),
            )
        return cur.rowcount

    # -- reading ----------------------------------------------------------------------------------

    def version(self) -> tuple[int, int]:
        """Changes to the notes so far: this connection's writes and SQLite's ``data_version``
        (which moves when another connection, e.g. ``run_emil.py memory forget``, commits)."""
        return self._conn.total_changes, self._conn.execute("PRAGMA data_version").fetchone()[0]

    def notes(self) -> list[Note]:
        """Every note, in a fixed order (about, subject, topic, first learned, id)."""
        rows = self._conn.execute(
            f"SELECT {_COLUMNS} FROM notes ORDER BY about, subject, topic, first_t, id"
        ).fetchall()
        return [_note(r) for r in rows]

    def subjects(self) -> list[str]:
        """Every distinct subject (players, places, goals), sorted."""
        return [r[0] for r in self._conn.execute("SELECT DISTINCT subject FROM notes ORDER BY subject")]

    def export(self) -> dict[str, Any]:
        """Everything, as JSON-able data (``run_emil.py memory export``)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "database": str(self.path),
            "notes": [n.model_dump(mode="json") for n in self.notes()],
        }


def check_free_space(data_dir: Path, need: int = MIN_FREE_BYTES) -> None:
    """A configuration error when ``data_dir``'s disk has less than ``need`` bytes free."""
    try:
        free = shutil.disk_usage(data_dir).free
    except OSError:
        return
    if free < need:
        raise MemoryStoreError(
            f"data_dir {data_dir} has {free // 1024} KiB free, less than the {need // (1024 * 1024)} MiB "
            "Emil needs to keep its notes and archive; free space or point data_dir elsewhere"
        )


def _unusable(path: Path, e: sqlite3.Error) -> MemoryStoreError:
    """The configuration error for a notes file SQLite refused, with the fix for its cause."""
    text = str(e)
    if "full" in text:
        return MemoryStoreError(f"cannot write the notes database {path} ({text}): the disk is full; "
                                "free space or point data_dir elsewhere")
    if isinstance(e, sqlite3.OperationalError) or "readonly" in text or "I/O" in text:
        return MemoryStoreError(f"cannot open notes database {path} ({text}); "
                                "make data_dir writable or point data_dir elsewhere")
    return MemoryStoreError(f"notes database {path} is unreadable ({text}); move it aside to start with no "
                            "notes, or restore a copy")

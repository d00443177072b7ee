"""The archive: every line said and done in Emil's sessions, searchable, in ``<data_dir>/archive.sqlite3``.

Where the notes (:mod:`emil.memory.store`) keep a few facts per player, the archive keeps the
text itself: every chat line and whisper (with its author), every game event that involves
someone (joins, gifts, hits, deaths), everything Emil said, every tool call of Emil's with its
result, and the notes Emil wrote with ``remember``. It is searched two ways: each turn, with
what the turn is about (:mod:`emil.memory.retrieval`), and by the model itself with the
``recall`` tool. Ambient noise (time of day, weather, health ticks, the bot's own action echoes)
is not kept: the status line carries it and it would only dilute the search.

Schema (one table and its full-text index)::

    lines(id INTEGER PRIMARY KEY, t REAL, kind TEXT, speaker TEXT, target TEXT, text TEXT)
    lines_fts USING fts5(text, speaker, content='lines', content_rowid='id',
                         tokenize='porter unicode61 remove_diacritics 2')

``kind`` is one of :data:`KINDS`; ``speaker`` the player (or Emil) whose words or act it is
(None for the world's own events); ``target`` whom it was said to (a whisper's addressee).
The index is external-content, kept by triggers; the porter stemmer makes "torches" find
"torch". Search ranks by ``bm25()`` (speaker column weighted double: lines *by* a player weigh
more than lines naming them).

Retention: lines older than ``retention_days`` (a setting, default 90; 0 keeps everything)
are deleted when the archive opens. Lines are searchable the moment they are added and
committed together (:data:`COMMIT_S`, :data:`BATCH`, and at each turn's start), durably
(:mod:`emil.memory.dbfile`): a process killed at any moment loses no committed line, and at
most the last second of lines.

A line that cannot be written (disk full, data_dir turned read-only) costs no turn: the first
failure is logged once, the line waits in memory (searched like the others, at most
:data:`PENDING_MAX` lines, the oldest dropped first and counted) and the archive tries again
every :data:`RETRY_S` seconds; lines already written are never rewritten.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from emil.memory.dbfile import Trouble, Watched, connect
from emil.memory.store import MemoryStoreError
from emil.trust.caps import valid_unicode

__all__ = [
    "ARCHIVE_FILE",
    "BATCH",
    "COMMIT_S",
    "COMMON_MIN",
    "COMMON_SHARE",
    "KINDS",
    "LINE_CHARS",
    "PENDING_MAX",
    "RETRY_S",
    "Archive",
    "Kind",
    "Line",
    "fts_query",
    "words",
]

_log = logging.getLogger("emil.memory")

ARCHIVE_FILE = "archive.sqlite3"
SCHEMA_VERSION = 1
LINE_CHARS = 600
"""A line's text is clipped to this many characters (a flood cannot grow one row without bound)."""
PENDING_MAX = 20_000
"""Lines kept in memory while the disk refuses them (about a day of a busy server)."""
RETRY_S = 60.0
"""How often writing is tried again after a failure."""
COMMIT_S = 1.0
BATCH = 64
"""Lines are committed together: at most COMMIT_S after the first of them, at BATCH lines, and at
each turn's start (one disk sync for a burst of chat instead of one per line)."""
COMMON_SHARE = 0.005
COMMON_MIN = 200
"""A word in more than COMMON_SHARE of the lines, and in more than COMMON_MIN of them, is common:
it searches nothing on its own (:meth:`Archive.search`)."""
MAX_TERMS = 4
"""A search ranks by at most this many words, the rarest of its selective ones: a long chat
line's fifth-rarest word adds matches to rank, not meaning."""

Kind = Literal["chat", "whisper", "event", "said", "tool", "note"]
KINDS: tuple[Kind, ...] = get_args(Kind)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lines (
    id      INTEGER PRIMARY KEY,
    t       REAL NOT NULL,
    kind    TEXT NOT NULL,
    speaker TEXT,
    target  TEXT,
    text    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lines_by_t ON lines (t);
CREATE VIRTUAL TABLE IF NOT EXISTS lines_fts USING fts5(
    text, speaker, content='lines', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS lines_ai AFTER INSERT ON lines BEGIN
    INSERT INTO lines_fts (rowid, text, speaker) VALUES (new.id, new.text, coalesce(new.speaker, ''));
END;
CREATE TRIGGER IF NOT EXISTS lines_ad AFTER DELETE ON lines BEGIN
    INSERT INTO lines_fts (lines_fts, rowid, text, speaker) VALUES ('delete', old.id, old.text, coalesce(old.speaker, ''));
END;
"""

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


def words(text: str) -> list[str]:
    """The words of ``text`` as the index splits them (letters and digits; apostrophes inside)."""
    return [w.lower() for w in _WORD.findall(text)]


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 query matching any of ``terms`` (each quoted: no operator can be smuggled in)."""
    out: list[str] = []
    for term in terms:
        for w in words(term):
            quoted = '"' + w.replace('"', '""') + '"'
            if quoted not in out:
                out.append(quoted)
    return " OR ".join(out)


@dataclass(frozen=True)
class Line:
    """One archived line. ``id`` is negative while it waits in memory for the disk."""

    id: int
    t: float
    kind: Kind
    speaker: str | None
    target: str | None
    text: str

    @property
    def private_to(self) -> str | None:
        """The one player this line is private to, or None (public): a whisper to Emil is its
        author's, Emil's whisper is its addressee's."""
        if self.kind == "whisper":
            return self.speaker or ""
        if self.kind == "said" and self.target:
            return self.target
        return None

    def heard_by(self, audience: Collection[str] | None) -> bool:
        """Whether this line may be shown to ``audience`` (the players whose words a turn
        answers; None: the operator, who sees everything): a private line only when its one
        player is the whole audience."""
        owner = self.private_to
        return owner is None or audience is None or set(audience) == {owner}


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= LINE_CHARS else flat[: LINE_CHARS - 1] + "…"


def _audience_sql(audience: Collection[str] | None) -> tuple[str, list[object]]:
    """:meth:`Line.heard_by` as a WHERE clause over ``lines AS l``."""
    if audience is None:
        return "", []
    players = set(audience)
    owner = next(iter(players)) if len(players) == 1 else None
    return (" AND NOT ((l.kind = 'whisper' AND coalesce(l.speaker, '') IS NOT ?)"
            " OR (l.kind = 'said' AND l.target IS NOT NULL AND l.target != '' AND l.target IS NOT ?))", [owner, owner])


class Archive:
    """The archive of one data_dir (see the module doc). Not thread-safe: one per agent loop.

    Open with :meth:`open`; :meth:`add` never raises (a failing disk is logged once and the line
    waits in memory); :meth:`search` reads; :meth:`check` (between turns) writes waiting lines
    back and notices a deleted file.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, durable: bool = True,
                 clock: Callable[[], float] = time.monotonic, trouble: Trouble | None = None) -> None:
        self.path = path
        self.trouble = trouble or Trouble(path.parent)
        """Where a failing write is said (shared with the notes: one warning per outage)."""
        self._file = Watched(conn, path, what="archive", durable=durable)
        self._clock = clock
        self._pending: deque[Line] = deque()
        self._dropped = 0
        self._next_pending = -1
        self._retry_at = 0.0
        self._failing = False
        self._first_pending_at = 0.0
        self._read_warned = False
        self.written = 0
        """Lines written by this process."""
        self._dfs: dict[str, tuple[int, int]] = {}
        self._written_total: int | None = None

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._file.conn

    # -- opening ----------------------------------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path, *, retention_days: float = 90.0, durable: bool = True,
             now: float | None = None, trouble: Trouble | None = None) -> Archive:
        """Open (creating if needed) the archive in ``data_dir`` and drop lines past retention.

        Raises :class:`~emil.memory.store.MemoryStoreError` (a configuration error, exit 2) when
        the file cannot be created or written, or is not an archive.
        """
        path = data_dir / ARCHIVE_FILE
        try:
            conn = connect(path, durable=durable)
        except sqlite3.Error as e:
            raise _open_error(path, e) from e
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"archive {path} is schema {version}, newer than this Emil's {SCHEMA_VERSION}; "
                    "update Emil or use another data_dir"
                )
            if tables and "lines" not in tables:
                raise MemoryStoreError(f"{path} is an SQLite file but not Emil's archive; use another data_dir")
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            archive = cls(conn, path, durable=durable, trouble=trouble)
            if retention_days > 0:
                archive.prune(before=(time.time() if now is None else now) - retention_days * 86400.0)
        except sqlite3.Error as e:
            conn.close()
            raise _open_error(path, e) from e
        except BaseException:
            conn.close()
            raise
        return archive

    @classmethod
    def open_existing(cls, path: Path, *, readonly: bool = True) -> Archive:
        """An existing archive file, for the operator's commands (no retention, no schema change)."""
        try:
            conn = connect(path, readonly=readonly)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as e:
            raise _open_error(path, e) from e
        if "lines" not in tables:
            conn.close()
            raise MemoryStoreError(f"{path} is an SQLite file but not Emil's archive; check data_dir")
        return cls(conn, path)

    def forget(self, speaker: str) -> int:
        """Delete every line ``speaker`` said (any case); returns how many."""
        with self._conn:
            cur = self._conn.execute("DELETE FROM lines WHERE speaker = ? COLLATE NOCASE", (speaker,))
        self._written_total = None
        return cur.rowcount

    def close(self) -> None:
        """Write what waits (once more), then close (idempotent)."""
        if self._pending:
            self._flush()
        if self._pending or self._dropped:
            _log.error("memory: %d archive lines could not be written before Emil stopped (%s)",
                       len(self._pending) + self._dropped, self.path)
            self._pending.clear()
            self._dropped = 0
        self._conn.close()

    # -- writing ----------------------------------------------------------------------------------

    def add(self, t: float, kind: Kind, text: str, *, speaker: str | None = None, target: str | None = None) -> None:
        """Archive one line: searchable at once, committed with the others within
        :data:`COMMIT_S` (or :data:`BATCH` lines, or at the next :meth:`check`)."""
        if not text.strip():
            return
        # sqlite refuses a lone surrogate (UnicodeEncodeError, the batch stuck): U+FFFD instead
        speaker, target = (None if v is None else valid_unicode(v) for v in (speaker, target))
        line = Line(self._next_pending, t, kind, speaker, target, _clip(valid_unicode(text)))
        self._next_pending -= 1
        if not self._pending:
            self._first_pending_at = self._clock()
        self._queue(line)
        if self._due():
            self._flush()

    def _due(self) -> bool:
        now = self._clock()
        if self._failing:
            return now >= self._retry_at
        return len(self._pending) >= BATCH or now - self._first_pending_at >= COMMIT_S

    def import_lines(self, lines: Iterable[Line]) -> int:
        """Write ``lines`` (their ids ignored) in one transaction, now; returns how many. For
        moving an archive's lines and for benchmarks; play adds lines with :meth:`add`."""
        rows = list(lines)
        with self._conn:
            for line in rows:
                self._insert(line)
        self._wrote(len(rows))
        return len(rows)

    def _insert(self, line: Line) -> None:
        self._conn.execute(
            "INSERT INTO lines (t, kind, speaker, target, text) VALUES (?, ?, ?, ?, ?)",
            (line.t, line.kind, line.speaker, line.target, line.text),
        )

    def _wrote(self, n: int) -> None:
        self.written += n
        if self._written_total is not None:
            self._written_total += n

    def _queue(self, line: Line) -> None:
        self._pending.append(line)
        while len(self._pending) > PENDING_MAX:
            self._pending.popleft()
            self._dropped += 1

    def _failed(self, e: sqlite3.Error) -> None:
        self._failing = True
        self._retry_at = self._clock() + RETRY_S
        self.trouble.failed("archive", e)

    def _flush(self) -> None:
        try:
            with self._conn:
                for line in self._pending:
                    self._insert(line)
        except sqlite3.Error as e:
            self._failed(e)
            return
        self._wrote(len(self._pending))
        self._pending.clear()
        if not self._failing:
            return
        self._failing = False
        if self._dropped:
            _log.warning("memory: %d archive lines did not fit in memory while the disk refused them and are lost",
                         self._dropped)
            self._dropped = 0
        self.trouble.recovered()

    def check(self) -> None:
        """Each turn: restore a deleted file, commit the waiting lines (after a failure, once
        :data:`RETRY_S` passed)."""
        self._file.check()
        if self._pending and (not self._failing or self._clock() >= self._retry_at):
            self._flush()

    def prune(self, *, before: float) -> int:
        """Delete lines older than ``before`` (unix time); returns how many."""
        with self._conn:
            cur = self._conn.execute("DELETE FROM lines WHERE t < ?", (before,))
        self._written_total = None
        return cur.rowcount

    # -- reading ----------------------------------------------------------------------------------

    def count(self) -> int:
        """Lines in the archive (those waiting in memory included)."""
        return self._total() + len(self._pending)

    def _total(self) -> int:
        # Counted once (a scan of the table), then kept by add and prune.
        if self._written_total is None:
            self._written_total = int(self._conn.execute("SELECT COUNT(*) FROM lines").fetchone()[0])
        return self._written_total

    @property
    def pending(self) -> int:
        """Lines waiting in memory for the disk."""
        return len(self._pending)

    def search(
        self, terms: Iterable[str], *, names: Iterable[str] = (), limit: int = 20, before: float | None = None,
        exclude: Iterable[int] = (), kinds: Sequence[Kind] | None = None, newest_if_common: bool = False,
        audience: Collection[str] | None = None,
    ) -> list[Line]:
        """Lines matching the ``terms`` that say something, best first, at most ``limit``.

        Ranking is bm25 over the selective terms: a word found in more than
        :data:`COMMON_SHARE` of the lines (at least :data:`COMMON_MIN` of them) is common and
        searches nothing on its own, like a stop word (it would cost a scan of thousands of
        rows and rank them by length). Lines by one of ``names`` (the players the search is
        about) rank higher. ``before``: only lines older than this (unix time: what is still
        verbatim in the prompt is left out); ``exclude``: line ids not wanted (already shown);
        ``kinds``: only these. ``newest_if_common``: when every term is common, the newest lines
        holding all of them instead of nothing (the ``recall`` tool: the model asked).
        ``audience``: the players the answer is for; whispers between Emil and one player
        only when that player is the whole audience (:meth:`Line.heard_by`; None: all lines).
        """
        wanted = list(dict.fromkeys(w for term in terms for w in words(term)))
        if not wanted or limit <= 0:
            return []
        if self._pending and not self._failing:
            self._flush()  # what waits is searched by the index, stemmed like the rest
        skip = set(exclude)
        who = {w for name in names for w in words(name)}
        try:
            selective = self._selective(wanted, pair=[w for w in wanted if w not in who])
            if not selective and newest_if_common:
                every = " AND ".join(fts_query([w]) for w in wanted)
                rows = self._ranked([every], limit=limit, before=before, kinds=kinds, skip=skip, newest=True,
                                    audience=audience)
            else:
                rows = (self._ranked(selective, limit=limit * 2, before=before, kinds=kinds, skip=skip, audience=audience)
                        if selective else [])
        except sqlite3.Error as e:
            self._read_failed(e)
            rows = []
        # bm25 is negative, better when lower: a line by a player the search is about counts 1.5 times.
        scored = sorted(rows, key=lambda r: (r[6] * (1.5 if (r[3] or "").lower() in who else 1.0), -r[1]))
        found = [Line(*row[:6]) for row in scored if row[0] not in skip][:limit]
        if self._pending and len(found) < limit:
            found += self._search_pending(set(wanted), limit - len(found), before, skip, kinds, audience)
        return found

    def _selective(self, terms: Sequence[str], *, pair: Sequence[str]) -> list[str]:
        """The :data:`MAX_TERMS` rarest terms that are not common (see :meth:`search`); the
        first two of ``pair`` together when every term is common but they meet in few lines
        (not the names of the players searched about: they are in thousands of lines, and
        their meeting costs a scan of both)."""
        total = self._total()
        cap = max(COMMON_MIN, int(total * COMMON_SHARE))
        df = {t: self._df(t, total, cap) for t in terms}
        selective = [t for n, t in sorted((n, t) for t, n in df.items() if 0 < n <= cap)][:MAX_TERMS]
        present = [t for t in pair if df.get(t, 0) > 0]
        if selective or len(present) < 2:
            return selective
        both = f"{fts_query([present[0]])} AND {fts_query([present[1]])}"
        return [both] if self._docs(both, cap) <= cap else []

    def _df(self, term: str, total: int, cap: int) -> int:
        """Lines holding ``term``, counted up to ``cap + 1`` (more: common). That a word is
        common is remembered until the archive grew by a twentieth (it stays common); a rare
        word is counted each time (cheap, and it may just have been said)."""
        known = self._dfs.get(term)
        if known is not None and total <= known[1] * 1.05 + 20:
            return max(known[0], cap + 1)
        n = self._docs(fts_query([term]), cap)
        if n > COMMON_MIN:
            if len(self._dfs) >= 4096:
                self._dfs.clear()
            self._dfs[term] = (n, total)
        return n

    def _docs(self, query: str, cap: int) -> int:
        """Lines matching ``query``, counted up to ``cap + 1``: whether a word is common needs
        no more, and a common word's full count would read its whole posting list."""
        sql = "SELECT COUNT(*) FROM (SELECT 1 FROM lines_fts WHERE lines_fts MATCH ? LIMIT ?)"
        return int(self._conn.execute(sql, (query, cap + 1)).fetchone()[0])

    def _ranked(self, terms: Sequence[str], *, limit: int, before: float | None, kinds: Sequence[Kind] | None,
                skip: set[int], newest: bool = False, audience: Collection[str] | None = None,
                ) -> list[tuple[int, float, Kind, str | None, str | None, str, float]]:
        query = " OR ".join(t if " AND " in t else fts_query([t]) for t in terms)
        sql = (
            "SELECT l.id, l.t, l.kind, l.speaker, l.target, l.text, bm25(lines_fts, 1.0, 2.0) AS score "
            "FROM lines_fts JOIN lines AS l ON l.id = lines_fts.rowid WHERE lines_fts MATCH ?"
        )
        params: list[object] = [query]
        if before is not None:
            sql += " AND l.t < ?"
            params.append(before)
        if kinds is not None:
            sql += f" AND l.kind IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        private, private_params = _audience_sql(audience)
        sql += private
        params += private_params
        if skip:
            sql += " AND l.id NOT IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(sorted(i for i in skip if i > 0)))
        sql += " ORDER BY l.t DESC LIMIT ?" if newest else " ORDER BY score, l.t DESC LIMIT ?"
        params.append(limit)
        return self._conn.execute(sql, params).fetchall()

    def _search_pending(self, wanted: set[str], limit: int, before: float | None, skip: set[int],
                        kinds: Sequence[Kind] | None, audience: Collection[str] | None = None) -> list[Line]:
        scored = []
        for line in self._pending:
            if line.id in skip or (before is not None and line.t >= before) or (kinds is not None and line.kind not in kinds):
                continue
            if not line.heard_by(audience):
                continue
            hits = len(wanted & set(words(f"{line.text} {line.speaker or ''}")))
            if hits:
                scored.append((-hits, -line.t, line))
        return [line for *_k, line in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]]

    def _read_failed(self, e: sqlite3.Error) -> None:
        if not self._read_warned:
            self._read_warned = True
            _log.warning("memory: the archive %s cannot be searched (%s); turns recall nothing from it meanwhile", self.path, e)

    def recent(self, *, limit: int = 50, speaker: str | None = None) -> list[Line]:
        """The newest lines (of one speaker), newest first: for the operator's commands."""
        sql = "SELECT id, t, kind, speaker, target, text FROM lines"
        params: list[object] = []
        if speaker is not None:
            sql += " WHERE speaker = ? COLLATE NOCASE"
            params.append(speaker)
        sql += " ORDER BY t DESC, id DESC LIMIT ?"
        params.append(limit)
        return [Line(*row) for row in self._conn.execute(sql, params).fetchall()]


def _open_error(path: Path, e: sqlite3.Error) -> MemoryStoreError:
    text = str(e)
    if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.OperationalError):
        return MemoryStoreError(f"archive {path} is unreadable ({text}); move it aside to start with an empty archive, or restore a copy")
    if "full" in text:
        return MemoryStoreError(f"cannot write the archive {path} ({text}): the disk is full; free space or point data_dir elsewhere")
    return MemoryStoreError(f"cannot open the archive {path} ({text}); make data_dir writable or point data_dir elsewhere")

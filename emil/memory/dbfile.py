"""One SQLite file of ``data_dir``, opened so that a failing disk is an error, never a crash.

Both of Emil's databases (the notes, ``memory.sqlite3``, and the archive, ``archive.sqlite3``)
open through :func:`connect`:

- **No shared memory.** The rollback journal (``journal_mode = TRUNCATE``), not WAL: WAL maps
  its ``-shm`` index into memory, and when the filesystem under a mapped file turns read-only
  (``chattr +i``, an ext4 error remount, a frozen or shut-down disk) the next write to the
  mapping is a SIGBUS that kills the process: no end record, the Node child orphaned. Measured
  here: WAL + ``chattr +i`` on the directory = SIGBUS (exit 135) at the next commit; the
  rollback journal = a clean ``disk I/O error`` that Emil logs once and plays on. ``mmap_size``
  stays 0 for the same reason.
- **Durable commits.** ``synchronous = NORMAL``: the journal is synced before the database
  changes, so a commit is atomic whatever happens (a process killed at any point leaves the
  file as of its last commit; a power cut may lose the last commits, never corrupt the file).
  A commit costs a disk sync (under a millisecond on this machine's idle disk): the notes commit
  a fact at a time, the archive a burst of lines at a time.
- **Checked.** ``quick_check`` at open (the notes; the archive checks only its schema: a
  quick_check of a large archive would slow every start).

:class:`Watched` notices when the file Emil holds open is deleted or replaced under it (an
operator's ``rm``, a cleanup script): the open connection still reads the old inode, so it is
copied back to the path with SQLite's backup API, and said once, instead of being lost at exit.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

__all__ = ["Trouble", "Watched", "connect", "file_id"]

_log = logging.getLogger("emil.memory")


def connect(path: Path, *, readonly: bool = False, durable: bool = True) -> sqlite3.Connection:
    """An SQLite connection to ``path`` with Emil's settings (see the module doc).

    ``durable=False`` (scratch databases of benchmarks) commits without waiting for the disk.
    Raises :class:`sqlite3.Error` as SQLite reports it; callers turn it into their own message.
    """
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    else:
        conn = sqlite3.connect(path, timeout=5.0)
    try:
        conn.execute("PRAGMA mmap_size = 0")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode = TRUNCATE").fetchone()
            if mode is None or str(mode[0]).lower() != "truncate":
                raise sqlite3.OperationalError(f"cannot leave journal mode {mode[0] if mode else '?'}")
            conn.execute(f"PRAGMA synchronous = {'NORMAL' if durable else 'OFF'}")
    except BaseException:
        conn.close()
        raise
    return conn


def file_id(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``; None when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Watched:
    """An open database file that may be deleted under the running Emil (see the module doc).

    :meth:`check` (between turns) compares the path's inode with the one opened; when the file
    is gone or replaced it copies the open database back to the path (:meth:`restore`) and
    returns the new connection, so the caller swaps it in. One warning per event.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, what: str, durable: bool = True) -> None:
        self.conn = conn
        self.path = path
        self.what = what
        self.durable = durable
        self.opened = file_id(path)
        self._failed = False

    def check(self) -> sqlite3.Connection | None:
        """A new connection when the file was deleted or replaced and has been restored."""
        now = file_id(self.path)
        if now is not None and now == self.opened:
            return None
        return self.restore(replaced=now is not None)

    def restore(self, *, replaced: bool) -> sqlite3.Connection | None:
        """Copy the open database to the path (a replaced file is moved aside first)."""
        try:
            if replaced:
                aside = self.path.with_name(f"{self.path.name}.replaced-{os.getpid()}")
                os.replace(self.path, aside)
                how = f"replaced under the running Emil (the new file was moved to {aside.name})"
            else:
                how = "deleted while Emil ran"
            target = connect(self.path, durable=self.durable)
            self.conn.backup(target)
        except (sqlite3.Error, OSError) as e:
            if not self._failed:
                self._failed = True
                _log.error("memory: %s %s was %s and cannot be written back (%s); what it holds stays "
                           "readable until Emil stops", self.what, self.path,
                           "replaced" if replaced else "deleted", e)
            return None
        _log.warning("memory: %s %s was %s; written back from the open copy, nothing lost",
                     self.what, self.path, how)
        self.conn.close()
        self.conn = target
        self.opened = file_id(self.path)
        self._failed = False
        return target


class Trouble:
    """One warning per outage of data_dir's disk, whichever write meets it first (a note, an
    archive line, a check), and one line when writing works again: play goes on in between."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.failing = False
        self.outages = 0

    def failed(self, what: str, error: BaseException) -> None:
        """A write failed (``what``: which kind); warns on the first failure of an outage."""
        if self.failing:
            return
        self.failing = True
        self.outages += 1
        _log.warning("memory: cannot write to %s (%s: %s); playing on: new notes are not kept and new archive "
                     "lines wait in memory until the disk takes writes again", self.where, what, error)

    def recovered(self) -> None:
        """Writing works again (the archive wrote what waited)."""
        if self.failing:
            self.failing = False
            _log.warning("memory: %s takes writes again; the archive lines that waited are written", self.where)

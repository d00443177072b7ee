"""One Emil per data directory: an exclusive, advisory lock on ``<data_dir>/emil.lock``.

``flock`` locks belong to the open file, so the kernel releases them when the process ends,
however it ends: a crashed or killed Emil never leaves a stale lock behind. The file holds the
holder's pid, only so that the second process can say who holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from emil.exceptions import ConfigurationError

__all__ = ["DataDirLock", "DataDirLocked"]

LOCK_FILE = "emil.lock"


class DataDirLocked(ConfigurationError):
    """Another running Emil holds this data directory."""


class DataDirLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process ends)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock; :class:`DataDirLocked` when another process has it."""
        f = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise DataDirLocked(
                f"data_dir {self.path.parent} is in use by another Emil (pid {holder}); "
                "stop it, or give each Emil its own data_dir"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._file = f

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._file is not None:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._file.close()
            self._file = None

"""What Emil remembers across turns and restarts: notes about players, places and its own
goals, and an archive of every line said and done.

- :mod:`emil.memory.notes`     what a note is (:class:`Fact` in, :class:`Note` stored)
- :mod:`emil.memory.store`     the SQLite file in ``data_dir``, written as facts are learned
- :mod:`emil.memory.lock`      one running Emil per ``data_dir``
- :mod:`emil.memory.learn`     game events, snapshots and tool outcomes -> facts
- :mod:`emil.memory.world`     the world port that feeds the learner
- :mod:`emil.memory.render`    the pinned notes block: bounded in tokens, deterministic
- :mod:`emil.memory.note_text` untrusted text made safe to quote in the prompt
- :mod:`emil.memory.pinned`    the block's seam with the context manager (changes at trims)
- :mod:`emil.memory.summary`   the summary request (prompt, facts kept) and its parsing
- :mod:`emil.memory.summariser` the ``summarise`` rung's source: asks the served model between turns
- :mod:`emil.memory.wiring`   all of it opened for one session
- :mod:`emil.memory.archive`   every line said and done, searchable (SQLite FTS5), with a retention
- :mod:`emil.memory.archivist` game events, Emil's words and tool results -> archive lines
- :mod:`emil.memory.retrieval` each turn, the archive's old lines that bear on it (a bounded block)
- :mod:`emil.memory.tools`     the model's own ``recall`` and ``remember``
- :mod:`emil.memory.dbfile`    one SQLite file of data_dir, opened so a failing disk is an error
- :mod:`emil.memory.cli`       ``run_emil.py memory show | recall | forget NAME | export``

Design and commands: docs/memory.md.
"""

from emil.memory.learn import Learner
from emil.memory.lock import DataDirLock, DataDirLocked
from emil.memory.note_text import as_data
from emil.memory.notes import Fact, Note
from emil.memory.pinned import PinnedNotes
from emil.memory.render import NOTES_HEADER, render_notes
from emil.memory.store import MemoryStore, MemoryStoreError
from emil.memory.wiring import Memory, open_memory
from emil.memory.world import RememberingWorld

__all__ = [
    "NOTES_HEADER",
    "DataDirLock",
    "DataDirLocked",
    "Fact",
    "Learner",
    "Memory",
    "MemoryStore",
    "MemoryStoreError",
    "Note",
    "PinnedNotes",
    "RememberingWorld",
    "as_data",
    "open_memory",
    "render_notes",
]

"""Memory for one session: open the notes (with the one-Emil lock) and the archive, and the parts
built on them: the learner and the archivist fed by the world wrapper, the pinned block, the
per-turn retrieval, the model's memory tools, the summariser.

At start a data_dir that an Emil used before (its ``emil.lock`` is there) but whose notes
database or archive is gone is said, one warning each, and play starts with an empty one: a
deleted database is never silent. The notes remember whether an archive was made
(``meta.archive_since``), so a data_dir from before the archive existed is not mistaken for one
that lost it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emil.config import Settings
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.archivist import Archivist
from emil.memory.learn import Learner
from emil.memory.lock import LOCK_FILE
from emil.memory.pinned import PinnedNotes
from emil.memory.render import quoted_in
from emil.memory.retrieval import Recollection, topic_of
from emil.memory.store import DB_FILE, MemoryStore
from emil.memory.summariser import Summariser
from emil.memory.summary import load_summary_prompt
from emil.memory.tools import MemoryTools
from emil.memory.world import RememberingWorld
from emil.recording import SummaryRecord
from emil.world.events import GameEvent
from emil.world.port import WorldPort

__all__ = ["Memory", "open_memory"]

_log = logging.getLogger("emil.memory")


@dataclass
class Memory:
    """The notes and the archive, what writes to them, and what reads from them for the prompt."""

    store: MemoryStore
    learner: Learner
    archive: Archive
    archivist: Archivist
    block: PinnedNotes | None = None
    """The pinned block made by :meth:`pinned` (its ``renders`` count the re-renders)."""
    summaries: Summariser | None = None
    """The summariser made by :meth:`summariser` (its ``stats``)."""
    recollection: Recollection | None = None
    """The per-turn retrieval made by :meth:`recall`."""

    def pinned(
        self,
        *,
        max_tokens: int,
        tokens_of: Callable[[str], int],
        neutralise: Callable[[str], str] | None = None,
    ) -> PinnedNotes:
        """The notes source for the context manager (bounded by the session's exact counter;
        ``neutralise`` is the served vocabulary's special-token breaker, when there is one)."""
        self.block = PinnedNotes(self.store, max_tokens=max_tokens, tokens_of=tokens_of, neutralise=neutralise,
                                 present=lambda: self.learner.present)
        return self.block

    def recall(self, *, max_tokens: int, tokens_of: Callable[[str], int],
               neutralise: Callable[[str], str] | None = None) -> Recollection:
        """The per-turn retrieval into the turn's observation (``recall_tokens``)."""
        self.recollection = Recollection(self.archive, max_tokens=max_tokens, tokens_of=tokens_of,
                                         bot_name=self.learner.bot_name, neutralise=neutralise)
        return self.recollection

    def turn_recall(self, *, max_tokens: int, tokens_of: Callable[[str], int], since: Callable[[], float | None],
                    neutralise: Callable[[str], str] | None = None, pinned: Callable[[], str | None] = lambda: None,
                    clock: Callable[[], float] = time.time) -> Callable[[list[GameEvent], Mapping[str, Any] | None], str | None]:
        """The agent loop's per-turn retrieval: a turn's events and snapshot -> its recalled
        block (None: nothing). ``since``: the game time of the oldest event the history still
        holds verbatim (what is older may be recalled); ``pinned``: the notes block the prompt
        holds now (what it quotes is not recalled again)."""
        recollection = self.recall(max_tokens=max_tokens, tokens_of=tokens_of, neutralise=neutralise)
        name = self.learner.bot_name

        def recall(events: list[GameEvent], snapshot: Mapping[str, Any] | None) -> str | None:
            now = clock()
            topic = topic_of(events, snapshot, bot_name=name)
            # quoted_in is cached per block text: the block changes only at trims
            return recollection.block(topic, since=since(), now=now, turn_t=min((e.t for e in events), default=now),
                                      pinned=quoted_in(pinned()))

        return recall

    def tools(self, *, tokens_of: Callable[[str], int], neutralise: Callable[[str], str] | None = None,
              max_tokens: int = 600) -> MemoryTools:
        """What the model's ``recall`` and ``remember`` tools do in this session."""
        return MemoryTools(self.archive, self.archivist, self.store, tokens_of=tokens_of,
                           bot_name=self.learner.bot_name, neutralise=neutralise, max_tokens=max_tokens)

    def summariser(self, s: Settings, *, record: Callable[[SummaryRecord], None]) -> Summariser:
        """The ``summarise`` rung's source for this session: asks the served model, writes the
        facts of the summaries it uses to this store, and each request's ``summary`` record
        through ``record``."""
        self.summaries = Summariser(
            prompt=load_summary_prompt(s.prompts_dir, name=s.bot_name, max_tokens=s.summary_max_tokens), name=s.bot_name,
            max_tokens=s.summary_max_tokens, timeout_s=s.summary_timeout_s, store=self.store, record=record,
        )
        return self.summaries

    def world(self, world: WorldPort) -> RememberingWorld:
        """``world`` wrapped so that what passes through is learned and archived."""
        return RememberingWorld(world, self.learner, self.archivist, check=self.check)

    def check(self) -> None:
        """Between turns (each turn's snapshot): a database deleted under the running Emil is
        written back from the open copy; archive lines waiting for the disk are retried."""
        self.store.check()
        self.archive.check()


@contextmanager
def open_memory(data_dir: Path, *, bot_name: str, retention_days: float = 90.0, durable: bool = True) -> Iterator[Memory]:
    """Open ``data_dir``'s notes and archive for a session; closed (and the lock released) on exit.

    Configuration errors (unwritable directory, a full disk, an unreadable database, another
    Emil holding the directory) propagate: the session must not start without the memory it
    was configured with (one line, exit 2). ``durable=False``: scratch memory (benchmarks).
    """
    used_before = (data_dir / LOCK_FILE).is_file()
    had_notes, had_archive = (data_dir / DB_FILE).is_file(), (data_dir / ARCHIVE_FILE).is_file()
    store = MemoryStore.open(data_dir, durable=durable)
    try:
        if used_before and not had_notes:
            _log.warning("memory: the notes database %s is gone (an Emil used %s before); starting with no notes "
                         "(restore a copy to keep them)", store.path, data_dir)
        archive = Archive.open(data_dir, retention_days=retention_days, durable=durable)
        try:
            if had_notes and not had_archive and store.meta("archive_since") is not None:
                _log.warning("memory: the archive %s is gone (it was made %s); starting with an empty archive "
                             "(restore a copy to keep it)", archive.path, store.meta("archive_since"))
            if store.meta("archive_since") is None:
                store.set_meta("archive_since", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
            interrupted = store.interrupt_goals(t=time.time())
            _log.info(
                "memory: %d notes in %s, %d archived lines%s", len(store.notes()), store.path, archive.count(),
                f"; {interrupted} unfinished goals from the last session" if interrupted else "",
            )
            learner = Learner(store, bot_name=bot_name)
            yield Memory(store, learner, archive, Archivist(archive, bot_name=bot_name, clock=time.time))
        finally:
            archive.close()
    finally:
        store.close()

"""Memory for one session: open the store (with the one-Emil lock), and the parts built on it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from emil.agent.ports import WorldPort
from emil.config import Settings
from emil.memory.learn import Learner
from emil.memory.pinned import PinnedNotes
from emil.memory.store import MemoryStore
from emil.memory.summariser import Summariser
from emil.memory.summary import load_summary_prompt
from emil.memory.world import RememberingWorld
from emil.recording import SummaryRecord

__all__ = ["Memory", "open_memory"]

_log = logging.getLogger("emil.memory")


@dataclass
class Memory:
    """The store, the learner writing to it, and the pinned block reading from it."""

    store: MemoryStore
    learner: Learner
    block: PinnedNotes | None = None
    """The pinned block made by :meth:`pinned` (its ``renders`` count the re-renders)."""
    summaries: Summariser | None = None
    """The summariser made by :meth:`summariser` (its ``stats``)."""

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
        """``world`` wrapped so that what passes through is learned."""
        return RememberingWorld(world, self.learner)


@contextmanager
def open_memory(data_dir: Path, *, bot_name: str) -> Iterator[Memory]:
    """Open ``data_dir``'s notes for a session; closed (and the lock released) on exit.

    Configuration errors (unwritable directory, unreadable database, another Emil holding the
    directory) propagate: the session must not start without the memory it was configured with.
    """
    store = MemoryStore.open(data_dir)
    try:
        interrupted = store.interrupt_goals(t=time.time())
        _log.info(
            "memory: %d notes in %s%s", len(store.notes()), store.path,
            f"; {interrupted} unfinished goals from the last session" if interrupted else "",
        )
        yield Memory(store, Learner(store, bot_name=bot_name))
    finally:
        store.close()

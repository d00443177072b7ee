"""The pinned notes block: the seam between the notes store and the context manager.

A :class:`~emil.context.rungs.NotesSource` for the ``refresh_notes`` trim rung. The block is
rendered at start and then between turns (:meth:`PinnedNotes.prepare`, only when the notes
changed); the rung puts the prepared text in the prompt only at a trim, first: the block's
bytes change only where the prompt changes anyway, so vLLM's prefix cache keeps serving
everything before the trimmed part, and the trim itself (inside the overflow recovery too)
reads no database. See docs/memory.md.
"""

from __future__ import annotations

from collections.abc import Callable

from emil.memory.render import render_notes
from emil.memory.store import MemoryStore

__all__ = ["PinnedNotes"]


class PinnedNotes:
    """Renders the store's notes within ``max_tokens`` of the session's exact text counter.

    ``renders`` counts the renders (at start, then once per change of the notes or of who is
    present).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        max_tokens: int,
        tokens_of: Callable[[str], int],
        neutralise: Callable[[str], str] | None = None,
        present: Callable[[], frozenset[str]] | None = None,
    ) -> None:
        self.store = store
        self.present = present
        """Who is in sight now (the learner's latest snapshot): those players' lines come first."""
        self._present: frozenset[str] = frozenset()
        self.max_tokens = max_tokens
        self.tokens_of = tokens_of
        self.neutralise = neutralise
        """The served vocabulary's special-token breaker, on top of ``as_data`` (see render)."""
        self.renders = 0
        self.last: str | None = None
        self._version: tuple[int, int] | None = None
        self.prepare()

    def prepare(self) -> None:
        """Render the block if the notes changed since the last render (this Emil learned, or
        an operator's ``memory forget`` beside it)."""
        version = self.store.version()
        present = self.present() if self.present is not None else frozenset()
        if version != self._version or present != self._present:
            self._version, self._present = version, present
            self.render()

    def text(self) -> str | None:
        """The block as last rendered; no I/O."""
        return self.last

    def render(self) -> str | None:
        """The block as the notes read now (None: no notes, or ``max_tokens`` is 0)."""
        self.renders += 1
        if self.max_tokens <= 0:
            self.last = None
        else:
            self.last = render_notes(
                self.store.notes(), max_tokens=self.max_tokens, tokens_of=self.tokens_of, neutralise=self.neutralise,
                present=self._present,
            )
        return self.last

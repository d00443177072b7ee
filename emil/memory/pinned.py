"""The pinned notes block: the seam between the notes store and the context manager.

The context manager (:class:`emil.context.manager.ContextManager`, argument ``notes``) calls
:meth:`PinnedNotes.render` once at start and then only when its trim ladder is about to run,
never between trims: the block's bytes change only where the prompt changes anyway, so vLLM's
prefix cache keeps serving everything before the trimmed part. With rungs as objects, the same
call belongs to a rung that runs first at every trim ("refresh the pinned notes"); see
docs/memory.md.
"""

from __future__ import annotations

from collections.abc import Callable

from emil.memory.render import render_notes
from emil.memory.store import MemoryStore

__all__ = ["PinnedNotes"]


class PinnedNotes:
    """Renders the store's notes within ``max_tokens`` of the session's exact text counter.

    ``renders`` counts the calls (a test and the soak check it moves only at trims).
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        max_tokens: int,
        tokens_of: Callable[[str], int],
        neutralise: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.max_tokens = max_tokens
        self.tokens_of = tokens_of
        self.neutralise = neutralise
        """The served vocabulary's special-token breaker, on top of ``as_data`` (see render)."""
        self.renders = 0
        self.last: str | None = None

    def render(self) -> str | None:
        """The block as the notes read now (None: no notes, or ``max_tokens`` is 0)."""
        self.renders += 1
        if self.max_tokens <= 0:
            self.last = None
        else:
            self.last = render_notes(
                self.store.notes(), max_tokens=self.max_tokens, tokens_of=self.tokens_of, neutralise=self.neutralise
            )
        return self.last

"""The context's between-turns step, run in the background while the loop idles.

The trim ladder may prepare work off the hot path (issue #13: a summary the model writes for
the next trim). It runs only while the loop has nothing to do: the loop says :meth:`idle` when
it starts waiting and :meth:`busy` when it wakes. ``busy`` cancels a running preparation
without waiting for it to unwind, so a turn that starts is not delayed by even one scheduling
round (with several Emils in one process, that round is the other Emils' work). A failed
preparation is logged and dropped: the ladder falls back to what needs no preparation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["BetweenTurns"]

_log = logging.getLogger("emil.agent")


class BetweenTurns:
    """Runs ``prepare()`` whenever the loop is idle; :meth:`run` is the background task."""

    def __init__(self, prepare: Callable[[], Awaitable[None]]) -> None:
        self._prepare = prepare
        self._wanted = anyio.Event()
        """Set once the loop idles, until its preparation is done or the loop wakes."""
        self._scope: anyio.CancelScope | None = None

    def idle(self) -> None:
        """The loop starts waiting: prepare (once; saying it again while that preparation is
        pending or running changes nothing)."""
        self._wanted.set()

    def busy(self) -> None:
        """The loop woke: stop preparing now, and drop a preparation not started yet."""
        if self._scope is not None:
            self._scope.cancel()
        if self._wanted.is_set():
            self._wanted = anyio.Event()

    async def run(self) -> None:
        """Prepare each time the loop idles, until cancelled with the loop."""
        while True:
            wanted = self._wanted
            await wanted.wait()
            if wanted is not self._wanted:  # the loop woke before this started
                continue
            with anyio.CancelScope() as self._scope:
                try:
                    await self._prepare()
                except Exception as e:  # optional work: the ladder has a fallback for what is missing
                    _log.warning("between-turns preparation failed (%s: %s); trims use their fallback", type(e).__name__, e)
            self._scope = None
            if wanted is self._wanted:  # done while the loop still idles: wait for the next idle()
                self._wanted = anyio.Event()

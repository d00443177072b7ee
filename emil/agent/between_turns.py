"""The context's between-turns step, run while the loop waits and cancelled when it wakes.

The trim ladder may prepare work off the hot path (issue #13: a summary the model writes for
the next trim). It runs only while the loop has nothing to do; whatever wakes the loop (an
event that may start a turn, a stop) cancels it at once, so it never delays a turn. A failed
preparation is logged and dropped: the ladder falls back to what needs no preparation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["wait_preparing"]

_log = logging.getLogger("emil.agent")


async def wait_preparing(wake: anyio.Event, prepare: Callable[[], Awaitable[None]]) -> None:
    """Wait for ``wake`` while ``prepare()`` runs; a wake cancels ``prepare``."""

    async def run() -> None:
        try:
            await prepare()
        except Exception as e:  # optional work: the ladder has a fallback for what is missing
            _log.warning("between-turns preparation failed (%s: %s); trims use their fallback", type(e).__name__, e)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wake.wait()
        tg.cancel_scope.cancel()

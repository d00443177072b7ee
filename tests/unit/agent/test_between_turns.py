"""BetweenTurns: the context prepares while the loop idles, once per idle(), and a wake stops
it at once without waiting for it."""

from __future__ import annotations

import anyio
import anyio.lowlevel

from emil.agent.between_turns import BetweenTurns


class _Prep:
    """Counts preparations; each waits for ``release`` (or runs through when it is set)."""

    def __init__(self) -> None:
        self.started = 0
        self.finished = 0
        self.cancelled = 0
        self.release = anyio.Event()
        self.running = anyio.Event()

    async def __call__(self) -> None:
        self.started += 1
        self.running.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        self.finished += 1


async def _settle() -> None:
    for _ in range(5):
        await anyio.lowlevel.checkpoint()


async def test_once_per_idle_and_a_wake_cancels_without_waiting() -> None:
    prep = _Prep()
    between = BetweenTurns(prep)
    async with anyio.create_task_group() as tg:
        tg.start_soon(between.run)
        await _settle()
        assert prep.started == 0  # not idle yet
        between.idle()
        await prep.running.wait()
        between.busy()  # returns at once; the preparation unwinds in the background
        assert prep.cancelled == 0
        await _settle()
        assert (prep.started, prep.cancelled, prep.finished) == (1, 1, 0)
        # Said twice while pending: one preparation; once done it is not repeated until said again.
        prep.release.set()
        between.idle()
        between.idle()
        await _settle()
        await _settle()
        assert (prep.started, prep.finished) == (2, 1)
        between.busy()
        between.idle()
        await _settle()
        assert prep.started == 3
        # Idle then busy before the background task got to it: nothing runs.
        between.busy()
        between.idle()
        between.busy()
        await _settle()
        assert prep.started == 3
        tg.cancel_scope.cancel()

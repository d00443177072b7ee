"""Run a vLLM-dialect double in a child process (benchmarks: vLLM is a separate process too,
so the double's own prompt counting must not share the measured process's GIL)."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["double_in_subprocess"]


@contextlib.contextmanager
def double_in_subprocess(serve: Callable[[Any, Any], None]) -> Iterator[str]:
    """Start ``serve(urls, stop)`` in a spawned child and yield the base URL it puts on ``urls``.

    ``serve`` must be a module-level function (spawn pickles it by name); it starts the double,
    puts ``double.base_url`` on the queue and waits on the ``stop`` event.
    """
    ctx = multiprocessing.get_context("spawn")
    urls = ctx.Queue()
    stop = ctx.Event()
    proc = ctx.Process(target=serve, args=(urls, stop), daemon=True)
    proc.start()
    try:
        yield str(urls.get(timeout=60))
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()

"""JsRuntime's health check and the bridge hardening, on stand-ins for JSPyBridge's modules."""

from __future__ import annotations

import threading
import types
from typing import Any

from emil.world import _jsruntime
from emil.world._jsruntime import JsRuntime


class _Proc:
    def __init__(self, code: int | None) -> None:
        self.code = code
        self.pid = 4242

    def poll(self) -> int | None:
        return self.code


def _runtime(proc: _Proc | None, thread: threading.Thread | None) -> JsRuntime:
    rt = JsRuntime()
    rt._js = types.SimpleNamespace(
        connection=types.SimpleNamespace(proc=proc),
        config=types.SimpleNamespace(event_thread=thread),
    )
    return rt


def _finished_thread() -> threading.Thread:
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    return t


def test_alive_needs_node_and_the_event_loop_thread() -> None:
    stop = threading.Event()
    running = threading.Thread(target=stop.wait, daemon=True)
    running.start()
    try:
        assert _runtime(_Proc(None), running).alive()
        assert not _runtime(_Proc(None), _finished_thread()).alive()  # Node up, loop dead
        assert not _runtime(_Proc(None), None).alive()  # loop stopped by connection.stop()
        assert not _runtime(_Proc(1), running).alive()  # Node exited
        assert not _runtime(None, running).alive()  # never started
    finally:
        stop.set()


def test_harden_bridge_swaps_only_the_barrier() -> None:
    events: Any = types.SimpleNamespace(threading=threading)
    bridge = types.SimpleNamespace(events=events)
    _jsruntime._harden_bridge(bridge)
    assert events.threading.Barrier is _jsruntime._Handoff
    assert events.threading.Lock is threading.Lock
    assert events.threading.Event is threading.Event
    patched = events.threading
    _jsruntime._harden_bridge(bridge)  # idempotent: a second boot keeps the same namespace
    assert events.threading is patched
    assert threading.Barrier is not _jsruntime._Handoff  # the real module is untouched


def test_handoff_never_blocks_or_breaks() -> None:
    barrier = _jsruntime._Handoff(2, timeout=5)
    # A real Barrier(2, timeout=5) waited on by one side alone raises BrokenBarrierError after
    # five seconds; the stand-in returns at once, however often and whoever calls.
    assert barrier.wait() == 0
    assert barrier.wait(timeout=0.01) == 0

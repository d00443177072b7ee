"""The Python side of Emil's body: one mineflayer bot in Node, driven through JSPyBridge.

::

    async with Bot.connect(BotSettings(host="127.0.0.1", port=25565)) as bot:
        async for event in bot.events: ...             # GameEvent, from the JS bot module
        snap = await bot.snapshot()                      # status + surroundings, one call
        res = await bot.act("go_to", {"player": "Alex"}, timeout=30, job=True)   # ActionResult

Design (see docs/world.md): bridge calls are coarse and short. ``act()`` only *starts* a JS
action; its outcome comes back through the same single callback as the game events, so no bridge
call ever blocks for the length of a job. The JSPyBridge callback thread only hands each JSON line to
the event loop (``call_soon_threadsafe``) and returns. Cancelling ``act()`` or hitting its timeout
aborts the JS job.

Failures: a server that cannot be reached (at start, after a disconnect or a kick) is waited
for with the one backoff of :mod:`emil.backoff`, for ``patience_s`` (None: until stopped); the
Node process dying is detected by a watchdog and restarted, at most ``restarts_per_hour``
times within any hour. A configuration error (unknown host, wrong version, login refused)
stops at once with a ConfigurationError that says what to change; patience running out, or
one restart too many, with :class:`~emil.exceptions.PatienceExhausted`. When the bot gives up,
the event stream ends with an ``error`` event and leaving the ``async with`` raises the reason.
Every failed attempt and every change of state (down, up: a reconnect, gone) is an
:class:`~emil.backoff.OutageEvent` for ``on_outage`` (the session records them).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pydantic import JsonValue, ValidationError

from emil.backoff import Backoff, OutageEvent, Patience
from emil.exceptions import ConfigurationError, EmilError, PatienceExhausted, WorldError
from emil.trust.caps import valid_json_text, valid_loads
from emil.world._jsruntime import JsRuntime
from emil.world.events import ErrorEvent, GameEvent, parse_event
from emil.world.wire import ActionResult, BotSettings, ReflexSettings, Snapshot

__all__ = ["Bot"]

_log = logging.getLogger(__name__)

SHUTDOWN_S = 5.0
"""The longest the bot's logout (quit, then unhooking its events) may hold up a stop."""

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters and line/paragraph separators: spaces in chat text from the server."""

_CONFIG_KICK_WORDS = (
    "outdated", "version", "whitelist", "white-listed", "banned", "not authenticated",
    "invalid session", "failed to verify", "online mode", "premium", "already connected",
)


class _Pending:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.value: dict[str, Any] = {}


class _Handoff:
    """Run a function on the event loop from a foreign thread without waiting for it."""

    def __init__(self) -> None:
        import asyncio

        self._soon: Callable[[Callable[[], None]], object]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend: a short blocking hop through its token
            token = anyio.lowlevel.current_token()
            self._soon = lambda fn: anyio.from_thread.run_sync(fn, token=token)
        else:
            self._soon = lambda fn: loop.call_soon_threadsafe(fn)

    def __call__(self, fn: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # loop closed: the bot is gone, drop it
            self._soon(fn)


class Bot:
    """Emil's mineflayer bot. Create with ``async with Bot.connect(settings) as bot``."""

    def __init__(self, settings: BotSettings, *, on_outage: Callable[[OutageEvent], None] | None = None) -> None:
        self.settings = settings
        self.patience = Patience(
            "minecraft server",
            backoff=Backoff(settings.reconnect_base_s, max(settings.reconnect_base_s, settings.reconnect_cap_s)),
            limit_s=settings.patience_s, on_event=on_outage,
            fix=f"start the server at {settings.host}:{settings.port} or set mc_host/mc_port "
                "(world_patience_s sets how long Emil waits)",
        )
        """The server's availability: shared by the first connect and every reconnect."""
        self._restart_times: deque[float] = deque()
        self._send: MemoryObjectSendStream[GameEvent]
        self.events: MemoryObjectReceiveStream[GameEvent]
        self._send, self.events = anyio.create_memory_object_stream[GameEvent](settings.event_buffer)
        self.dropped_events = 0
        """Events dropped because the consumer fell more than ``event_buffer`` behind."""
        self.node_restarts = 0
        self.reconnects = 0
        self.failure: EmilError | None = None
        """Why the bot gave up, once it has."""
        self.version: str | None = None
        """The Minecraft version the bot speaks, once connected (found from the server's
        status ping when ``settings.version`` is "auto")."""
        self._rt: JsRuntime | None = None
        self._ctl: Any = None
        self._handle: Any = None
        self._events_emitter: Any = None
        self._limiter = anyio.CapacityLimiter(1)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._connected = False
        self._connected_event = anyio.Event()
        self._trouble = anyio.Event()
        self._closing = False
        self._handoff: _Handoff | None = None
        self._last_pid: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, settings: BotSettings, *, on_outage: Callable[[OutageEvent], None] | None = None
    ) -> AsyncIterator[Bot]:
        """Start Node, create the bot and wait for it to spawn; stop everything on exit."""
        bot = cls(settings, on_outage=on_outage)
        bot._handoff = _Handoff()
        try:
            await bot._start_runtime()
            await bot._connect_with_retries()
            async with anyio.create_task_group() as tg:
                tg.start_soon(bot._watchdog)
                tg.start_soon(bot._supervise)
                try:
                    yield bot
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await bot._shutdown()
        if bot.failure is not None:
            raise bot.failure

    @property
    def connected(self) -> bool:
        return self._connected

    async def _start_runtime(self) -> None:
        from emil.world.setup import ensure_js_deps

        await anyio.to_thread.run_sync(ensure_js_deps)
        self._rt = await anyio.to_thread.run_sync(JsRuntime.instance)
        await self._create_controller()

    async def _create_controller(self) -> None:
        rt = self._require_rt()
        options = {
            "host": self.settings.host,
            "port": self.settings.port,
            "username": self.settings.username,
            "version": self.settings.version,
            "reflexes": self.settings.reflexes.to_js(),
            "allowCommands": self.settings.allow_commands,
            "operators": sorted(self.settings.operators),
            "spawnTimeoutMs": int(self.settings.spawn_timeout_s * 1000),
            "modulesDir": str(rt.modules_path()),
        }

        def create() -> Any:
            mod = rt.require_bot_module()
            ctl = rt.call(mod, "createController", json.dumps(options), timeout=60)
            self._events_emitter = rt.get(ctl, "events")
            # a plain function: JSPyBridge tags the callable with an id, which bound methods refuse
            def on_event(*args: Any) -> None:
                self._on_js_event(*args)

            handle = rt.on(self._events_emitter, "event", on_event)
            return ctl, handle

        self._ctl, self._handle = await anyio.to_thread.run_sync(create, limiter=self._limiter)
        self._last_pid = rt.pid()

    def _require_rt(self) -> JsRuntime:
        if self._rt is None:
            raise WorldError("the bot is not started")
        return self._rt

    async def _call(self, method: str, *args: Any, bridge_timeout: float = 10.0) -> Any:
        """One bridge call in a worker thread. A cancelled caller stops waiting at once (the
        thread is left to finish within ``bridge_timeout``; the runtime's lock keeps the calls
        in order), so a deadline around a call holds even when Node does not answer."""
        rt = self._require_rt()
        ctl = self._ctl
        return await anyio.to_thread.run_sync(
            lambda: rt.call(ctl, method, *args, timeout=bridge_timeout), limiter=self._limiter, abandon_on_cancel=True
        )

    async def _connect_once(self) -> dict[str, Any]:
        cid = next(self._ids)
        pending = _Pending()
        self._pending[cid] = pending
        try:
            await self._call("startConnect", cid)
            with anyio.move_on_after(self.settings.spawn_timeout_s + 10):
                await pending.done.wait()
            if not pending.done.is_set():
                return {"ok": False, "code": "timeout", "error": "no answer from the bot module"}
            return pending.value
        finally:
            self._pending.pop(cid, None)

    def _classify(self, res: dict[str, Any]) -> ConfigurationError | None:
        """A configuration error to stop with, or None when retrying may help."""
        s = self.settings
        code = str(res.get("code") or "")
        error = str(res.get("error") or "")
        if code in ("ENOTFOUND", "EAI_AGAIN", "EAI_NONAME"):
            return ConfigurationError(f"unknown host {s.host!r}: set mc_host to the server's address ({error})")
        if code == "version":  # the bot module's message names the versions and the fix
            return ConfigurationError(f"Minecraft server {s.host}:{s.port}: {error}")
        if code == "config" or "unsupported" in error.lower() or "not supported" in error.lower():
            return ConfigurationError(f"cannot play Minecraft version {s.version!r}: {error}; leave mc_version on auto or set it to the server's version")
        if code == "kicked" and any(w in error.lower() for w in _CONFIG_KICK_WORDS):
            return ConfigurationError(
                f"the server at {s.host}:{s.port} refused the login of {s.username!r}: {error!r}; "
                "check mc_version, bot_name and the server's whitelist/online-mode"
            )
        return None

    async def _connect_with_retries(self) -> None:
        """Connect, waiting out an unreachable server with the patience (see the module doc)."""
        s = self.settings
        while True:
            res = await self._connect_once()
            if res.get("ok"):
                if res.get("version"):
                    if self.version is None:
                        _log.info("Minecraft server %s:%d runs %s; the bot speaks %s",
                                  s.host, s.port, res.get("server_version") or "?", res["version"])
                    self.version = str(res["version"])
                self._connected = True
                self._connected_event.set()
                self.patience.succeeded()
                return
            _log.debug("connect to %s:%d failed: %s", s.host, s.port, res)
            problem = self._classify(res)
            if problem is not None:
                raise problem
            await self.patience.wait(f"connect to {s.host}:{s.port} failed ({res.get('code') or '-'}: {res.get('error')})")

    async def _shutdown(self) -> None:
        """Log the bot out and unhook its events, within SHUTDOWN_S in all (a stop signal's exit
        waits on this; a runtime that does not answer is stopped with the process)."""
        self._closing = True
        rt = self._rt
        if rt is not None and self._ctl is not None and rt.alive():
            started = time.monotonic()
            with anyio.move_on_after(SHUTDOWN_S) as scope:
                with contextlib.suppress(EmilError):
                    await self._call("quit", bridge_timeout=SHUTDOWN_S)
                handle, self._handle = self._handle, None
                if handle is not None:
                    emitter = self._events_emitter
                    # abandoned past the bound: a call in a thread is not cancelled, only left
                    await anyio.to_thread.run_sync(
                        lambda: rt.off(emitter, "event", handle), limiter=self._limiter, abandon_on_cancel=True
                    )
            if scope.cancelled_caught:
                _log.warning("the bot did not finish logging out within %.0f s (%.1f s); going on without it",
                             SHUTDOWN_S, time.monotonic() - started)
        for pending in self._pending.values():
            pending.value = {"ok": False, "error": "the bot was stopped"}
            pending.done.set()
        self._send.close()
        self.events.close()

    # ------------------------------------------------------------------ events

    def _on_js_event(self, *args: Any) -> None:
        """Runs on JSPyBridge's callback thread: hand the line to the event loop and return."""
        line = args[-1] if args else None
        handoff = self._handoff
        if isinstance(line, str) and handoff is not None:
            handoff(lambda: self._deliver(line))

    def _deliver(self, line: str) -> None:
        try:
            data = valid_loads(line)
        except (ValueError, RecursionError):
            _log.warning("bot module sent a line that is not JSON: %.200s", line)
            return
        if not isinstance(data, dict):
            _log.warning("bot module sent a line that is not a JSON object: %.200s", line)
            return
        kind = data.get("kind")
        if kind in ("_result", "_connected"):
            pending = self._pending.get(int(data.get("id", -1)))
            if pending is not None:
                pending.value = data
                pending.done.set()
            return
        if kind in ("disconnected", "kicked") and not self._closing:
            self._connected = False
            self._connected_event = anyio.Event()
            self._trouble.set()
        if kind == "chat":
            # One line per chat line: a newline in a player's text must not open a line of its own
            # in the observation (where it could pose as another player's words).
            for key in ("sender", "text"):
                if isinstance(data.get(key), str):
                    data[key] = _CONTROLS.sub(" ", data[key])
        try:
            event = parse_event(data)
        except ValidationError as e:  # a malformed event is news about the bot, never a crash
            event = ErrorEvent(message=f"the bot module sent a malformed {str(kind)[:40]!r} event: {e.errors()[0]['msg']}")
        self._emit(event)

    def _emit(self, event: GameEvent) -> None:
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped_events += 1
            if self.dropped_events in (1, 10, 100) or self.dropped_events % 1000 == 0:
                _log.warning("event consumer is behind: %d events dropped", self.dropped_events)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    # ------------------------------------------------------------------ supervision

    async def _watchdog(self) -> None:
        rt = self._require_rt()
        while True:
            await anyio.sleep(0.25)
            if not rt.alive() and not self._closing:
                self._connected = False
                self._connected_event = anyio.Event()
                self._trouble.set()

    async def _supervise(self) -> None:
        rt = self._require_rt()
        while True:
            await self._trouble.wait()
            self._trouble = anyio.Event()
            if self._closing:
                return
            if self._connected and rt.alive():
                continue  # signalled while a recovery was under way, which has dealt with it
            try:
                if not rt.alive():
                    await self._restart_node()
                else:
                    self.reconnects += 1
                    await self._connect_with_retries()
            except EmilError as exc:
                self._give_up(exc)
                return

    async def _restart_node(self) -> None:
        rt = self._require_rt()
        now = time.monotonic()
        while self._restart_times and now - self._restart_times[0] >= 3600:
            self._restart_times.popleft()
        limit = self.settings.restarts_per_hour
        if len(self._restart_times) >= limit:
            raise PatienceExhausted(
                f"the bot's Node process died {len(self._restart_times) + 1} times within an hour "
                f"(world_restarts_per_hour is {limit}); check the server and the bot's log, or "
                "raise world_restarts_per_hour",
                service="minecraft bridge", waited_s=now - self._restart_times[0] if self._restart_times else 0.0,
            )
        self._restart_times.append(now)
        self.node_restarts += 1
        self._emit(ErrorEvent(message=f"the Node process running the bot died; restarting it ({len(self._restart_times)}/{limit} this hour)"))
        for pending in list(self._pending.values()):
            pending.value = {"ok": False, "error": "the bot's Node process died during the action"}
            pending.done.set()
        await self.patience.wait("the bot's Node process died")
        await anyio.to_thread.run_sync(rt.restart, limiter=self._limiter)
        with anyio.fail_after(30):
            while not rt.alive():  # noqa: ASYNC110 - JSPyBridge offers no "spawned" event
                await anyio.sleep(0.1)
        await self._create_controller()
        await self._connect_with_retries()

    def _give_up(self, exc: EmilError) -> None:
        _log.error("world bridge gives up: %s", exc)
        self.failure = exc
        self._emit(ErrorEvent(message=f"the bot stopped: {exc}"))
        self._send.close()

    # ------------------------------------------------------------------ API

    async def wait_connected(self, timeout: float = 60.0) -> bool:  # noqa: ASYNC109
        """Wait until the bot is (re)connected; False on timeout or after giving up."""
        with anyio.move_on_after(timeout):
            while self.failure is None:
                if self._connected:
                    return True
                await self._connected_event.wait()
        return self._connected and self.failure is None

    async def act(
        self,
        name: str,
        args: Mapping[str, JsonValue] | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - the contract's signature; a timeout must abort the JS job
        *,
        job: bool = False,
    ) -> ActionResult:
        """Run one coarse JS action; never raises for failed actions (they are results).

        ``job``: a long job (the tool class says so): it pre-empts the running job, and stop,
        abort and this call's timeout or cancellation reach it. Other actions run beside a job.
        """
        if self.failure is not None:
            return ActionResult(ok=False, error=f"the bot has stopped: {self.failure}")
        if not self._connected:
            return ActionResult(ok=False, error="not connected to the server right now (reconnecting)")
        aid = next(self._ids)
        pending = _Pending()
        self._pending[aid] = pending
        try:
            try:
                await self._call("start", aid, name, json.dumps(valid_json_text(dict(args or {}))), job, bridge_timeout=10)
            except WorldError as exc:
                return ActionResult(ok=False, error=str(exc))
            with anyio.move_on_after(timeout):
                await pending.done.wait()
            if not pending.done.is_set():
                await self._cancel_quietly(aid, f"timed out after {timeout:g} s")
                return ActionResult(
                    ok=False, error=f"{name} did not finish within {timeout:g} s and was stopped",
                    elapsed_ms=timeout * 1000,
                )
            v = pending.value
            return ActionResult(
                ok=bool(v.get("ok")), result=v.get("result"), error=v.get("error"),
                elapsed_ms=float(v.get("elapsed_ms") or 0.0),
            )
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancel_quietly(aid, "cancelled by the runtime")
            raise
        finally:
            self._pending.pop(aid, None)

    async def _cancel_quietly(self, aid: int, reason: str) -> None:
        with contextlib.suppress(EmilError), anyio.move_on_after(5):
            await self._call("cancel", aid, reason, bridge_timeout=5)

    async def abort(self) -> str | None:
        """Abort whatever job is running (movement, digging, fighting); returns its name."""
        try:
            out = json.loads(await self._call("abort", "aborted by the runtime", bridge_timeout=5))
        except EmilError:
            return None
        aborted = out.get("aborted")
        return str(aborted) if aborted else None

    async def snapshot(self) -> Snapshot:
        """Status and surroundings in one bridge call."""
        if not self._connected:
            return Snapshot(connected=False)
        try:
            raw = await self._call("snapshot", bridge_timeout=10)
        except WorldError:
            return Snapshot(connected=False)
        # Names, items and text from the server are made valid Unicode before anything reads them.
        return Snapshot.model_validate(valid_loads(raw))

    async def set_reflexes(self, reflexes: ReflexSettings) -> None:
        """Switch reflexes on or off while running."""
        await self._call("setReflexes", json.dumps(reflexes.to_js()), bridge_timeout=5)

    def node_pid(self) -> int | None:
        """The pid of the Node process (tests kill it to prove the bot survives)."""
        return self._rt.pid() if self._rt else None


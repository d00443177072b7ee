"""An embedded Minecraft server (flying-squid, Node) for the demo and the integration tests.

Started as a Node subprocess running Emil's own launcher (``js/server_launcher.js``), which loads
flying-squid 1.12.0 with Emil's plugin (``js/emil_squid_plugin.js``: whispers, a damage command
through the server's own damage path, a food command, eating, tossing items, and two fixes to
flying-squid's player list for 1.20.2+ clients; mobs that reach clients, chase and hit; weather
and time as vanilla sends them; server-side windows for 2x2 and crafting-table crafting and
furnaces). Offline mode, a superflat world, every player an operator, survival mode, bound to
127.0.0.1 on a free port.

flying-squid reads console commands from stdin, so :meth:`EmbeddedServer.command` runs server
commands (``give``, ``hurt``, ``food``, ``time``, ``weather``, ``summon zombie x y z``, ``clear``...)
as the console would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from types import TracebackType
from typing import Self

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.text import TextReceiveStream

from emil.exceptions import ConfigurationError, WorldError
from emil.world.setup import JS_SOURCE_DIR, ensure_js_deps, modules_dir, node_bin

__all__ = ["EmbeddedServer"]

_log = logging.getLogger(__name__)
_LISTENING = re.compile(r"EMIL_SERVER_LISTENING (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class EmbeddedServer:
    """A flying-squid server on 127.0.0.1: ``async with EmbeddedServer() as srv: srv.port``."""

    host = "127.0.0.1"

    def __init__(
        self,
        port: int = 0,
        version: str = "1.20.4",
        *,
        game_mode: int = 0,
        everybody_op: bool = True,
        start_timeout: float = 60.0,
    ) -> None:
        self.requested_port = port
        self.version = version
        self.game_mode = game_mode
        self.everybody_op = everybody_op
        self.start_timeout = start_timeout
        self.port = 0
        """The port it listens on (known once started)."""
        self.log_lines: list[str] = []
        """The server's recent console output (for diagnostics; bounded)."""
        self._proc: Process | None = None
        self._tg: TaskGroup | None = None
        self._listening = anyio.Event()
        self._exited = anyio.Event()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self.start()
        except BaseException:
            await self._close_tg()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await self.stop()
        finally:
            await self._close_tg()

    async def _close_tg(self) -> None:
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)

    async def start(self) -> None:
        """Spawn the server and wait until it accepts connections (or fail with its output)."""
        if self._tg is None:
            raise WorldError("EmbeddedServer.start() needs `async with EmbeddedServer() as srv`")
        await anyio.to_thread.run_sync(ensure_js_deps)
        self._listening = anyio.Event()
        self._exited = anyio.Event()
        opts = {
            "port": self.requested_port or self.port,
            "version": self.version,
            "gameMode": self.game_mode,
            "everybodyOp": self.everybody_op,
        }
        env = dict(os.environ, EMIL_JS_MODULES=str(modules_dir()), FORCE_COLOR="0")
        self._proc = await anyio.open_process(
            [str(node_bin()), str(JS_SOURCE_DIR / "server_launcher.js"), json.dumps(opts)],
            env=env,
            cwd=str(JS_SOURCE_DIR),
        )
        self._tg.start_soon(self._pump, self._proc)
        with anyio.move_on_after(self.start_timeout):
            async with anyio.create_task_group() as wait:

                async def _until(event: anyio.Event) -> None:
                    await event.wait()
                    wait.cancel_scope.cancel()

                wait.start_soon(_until, self._listening)
                wait.start_soon(_until, self._exited)
        if not self._listening.is_set():
            tail = "\n".join(self.log_lines[-20:])
            await self.kill()
            if any("is not supported" in line for line in self.log_lines):
                raise ConfigurationError(
                    f"flying-squid cannot serve Minecraft version {self.version!r}; use a tested one such as 1.20.4\n{tail}"
                )
            raise WorldError(f"embedded server did not start within {self.start_timeout:.0f} s:\n{tail}")
        _log.info("embedded flying-squid %s listening on %s:%d", self.version, self.host, self.port)

    async def _pump(self, proc: Process) -> None:
        async def read(stream: anyio.abc.ByteReceiveStream | None) -> None:
            if stream is None:
                return
            buf = ""
            async for chunk in TextReceiveStream(stream, errors="replace"):
                buf += chunk
                *lines, buf = buf.split("\n")
                for raw in lines:
                    line = _ANSI.sub("", raw).replace("\r", "").strip("> ").strip()
                    if not line:
                        continue
                    self.log_lines = [*self.log_lines[-199:], line]
                    _log.debug("server: %s", line)
                    m = _LISTENING.search(line)
                    if m:
                        self.port = int(m.group(1))
                        self._listening.set()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(read, proc.stdout)
                tg.start_soon(read, proc.stderr)
            await proc.wait()
        finally:
            self._exited.set()

    async def command(self, line: str) -> None:
        """Run one console command (no leading slash), e.g. ``give Emil bread 3``."""
        if not self.running or self._proc is None or self._proc.stdin is None:
            raise WorldError("the embedded server is not running")
        if "\n" in line or "\r" in line:
            raise ValueError("one command per call")
        await self._proc.stdin.send((line + "\n").encode())

    async def stop(self, grace_s: float = 10.0) -> None:
        """Ask the server to shut down (closing its stdin), then make sure it has exited."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with anyio.move_on_after(grace_s):
            if proc.stdin is not None:
                await proc.stdin.aclose()
            await self._exited.wait()
            await proc.wait()
            return
        await self.kill()

    async def kill(self) -> None:
        """Kill the Node process at once (tests use this to prove the bot survives it)."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with anyio.move_on_after(5):
            await proc.wait()

    async def restart(self) -> None:
        """Start again on the same port after a stop or a kill."""
        await self.stop()
        self.requested_port = self.port
        await self.start()

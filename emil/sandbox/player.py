"""A second, plain mineflayer bot (js/player_bot.js, its own Node process) to play "the player".

Used by the integration tests, tools/bench_world.py and the demo. Not a double: a real client
on the real server, driven over JSON lines.
"""

from __future__ import annotations

import itertools
import json
import os
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import Process, TaskGroup
from anyio.streams.text import TextReceiveStream

from emil.world.setup import JS_SOURCE_DIR, modules_dir, node_bin

__all__ = ["PlayerBot"]


class PlayerBot:
    """``async with PlayerBot(port, "Alex") as alex: await alex.do("chat", text="hi")``."""

    def __init__(self, port: int, username: str = "Alex", version: str = "1.20.4") -> None:
        self.port = port
        self.username = username
        self.version = version
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._proc: Process | None = None
        self._tg: TaskGroup | None = None
        self._spawned = anyio.Event()

    async def __aenter__(self) -> Self:
        opts = {"host": "127.0.0.1", "port": self.port, "username": self.username,
                "version": self.version, "modulesDir": str(modules_dir())}
        self._proc = await anyio.open_process(
            [str(node_bin()), str(JS_SOURCE_DIR / "player_bot.js"), json.dumps(opts)],
            env=dict(os.environ, FORCE_COLOR="0"),
        )
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read)
        with anyio.fail_after(30):
            await self._spawned.wait()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        with anyio.CancelScope(shield=True):
            if self._proc is not None:
                if self._proc.stdin is not None:
                    await self._proc.stdin.aclose()
                with anyio.move_on_after(5):
                    await self._proc.wait()
                if self._proc.returncode is None:
                    self._proc.kill()
                    await self._proc.wait()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        buf = ""
        async for chunk in TextReceiveStream(self._proc.stdout):
            buf += chunk
            *lines, buf = buf.split("\n")
            for line in lines:
                if not line.startswith("{"):
                    continue
                msg = json.loads(line)
                if "id" in msg and msg["id"] in self._waiting:
                    event, box = self._waiting.pop(msg["id"])
                    box.append(msg)
                    event.set()
                elif "event" in msg:
                    self.events.append(msg)
                    if msg["event"] == "spawn":
                        self._spawned.set()

    async def do(self, op: str, timeout: float = 30, **args: Any) -> Any:  # noqa: ASYNC109
        """Run one op; return its result or raise AssertionError with its error."""
        assert self._proc is not None and self._proc.stdin is not None
        rid = next(self._ids)
        event, box = anyio.Event(), list[dict[str, Any]]()
        self._waiting[rid] = (event, box)
        await self._proc.stdin.send((json.dumps({"id": rid, "op": op, **args}) + "\n").encode())
        with anyio.fail_after(timeout):
            await event.wait()
        reply = box[0]
        if not reply["ok"]:
            raise AssertionError(f"player op {op} failed: {reply['error']}")
        return reply["result"]

    def messages(self) -> list[str]:
        return [e["text"] for e in self.events if e["event"] == "message"]

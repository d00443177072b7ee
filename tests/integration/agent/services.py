"""Real services for the agent's end-to-end tests: embedded server, vLLM-dialect double, bots.

The double is a double of vLLM answering with a SCRIPTED brain (no model); the Minecraft server
(flying-squid), Emil's bot and the player's bot are real. The real-vLLM tier passes a real
server's endpoint instead (``running_world(..., endpoint=URL)``): then there is no double.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from emil.agent.session import Session, open_session
from emil.config import Settings
from emil.recording import Record, read_recording
from emil.sandbox.server import EmbeddedServer
from emil.testing.vllm_double import VLLMDouble
from emil.world.bridge import Bot
from emil.world.events import Chat
from emil.world.setup import ensure_js_deps
from emil.world.wire import BotSettings, ReflexSettings


@dataclass
class World:
    """Everything one end-to-end test plays with."""

    server: EmbeddedServer
    double: VLLMDouble | None
    """The vLLM-dialect double answering, or None when a real server does."""
    session: Session
    player: Bot
    heard: list[str]
    """What Emil said in chat, as the player heard it."""
    agent_done: anyio.Event
    """Set once Emil's agent loop has returned (after a stop, nothing more is recorded)."""

    async def stop_agent(self, within: float = 30.0) -> None:
        """Stop Emil's loop and wait until it has returned."""
        self.session.agent.stop()
        with anyio.fail_after(within):
            await self.agent_done.wait()

    def records(self) -> list[Record]:
        return read_recording(self.session.recording_path).records

    async def wait_for(self, what: str, check: Callable[[], bool], within: float = 30.0) -> None:
        """Poll ``check`` (it reads the recording file, which has no event to wait on)."""
        with anyio.fail_after(within):
            while not check():  # noqa: ASYNC110
                await anyio.sleep(0.2)

    async def say(self, text: str, *, within: float = 30.0) -> None:
        """The player says ``text`` (retried while its bot is still reconnecting, and while the
        bot's own chat pacing, a burst of 8 then a line a second, holds a flood back)."""
        with anyio.fail_after(within):
            while True:
                out = await self.player.act("say", {"text": text}, timeout=10)
                if out.ok:
                    return
                error = out.error or ""
                assert "connect" in error or "too fast" in error, error
                await anyio.sleep(0.5)


async def _listen(player: Bot, emil: str, heard: list[str]) -> None:
    async for event in player.events:
        if isinstance(event, Chat) and event.sender == emil:
            heard.append(event.text)


@asynccontextmanager
async def running_world(
    tmp_path: Path,
    policy: Any,
    *,
    window: int = 32768,
    counter: Any = None,
    wording: Any = "at_least",
    endpoint: str | None = None,
    **settings: Any,
) -> AsyncIterator[World]:
    """Server + double (or the real server at ``endpoint``) + Emil (running) + player bot;
    everything stopped on exit."""
    ensure_js_deps(progress=False)
    kwargs: dict[str, Any] = {"window": window, "wording": wording}
    if counter is not None:
        kwargs["counter"] = counter
    settings.setdefault("data_dir", tmp_path / "data")  # the notes: never the checkout's ./data
    # Metrics on a free loopback port: tests scrape it, and parallel runs never collide.
    settings.setdefault("metrics_address", "127.0.0.1:0")
    llm = VLLMDouble(policy, **kwargs) if endpoint is None else contextlib.nullcontext(None)
    async with EmbeddedServer() as server, llm as double:
        s = Settings(
            endpoint=endpoint or double.base_url, mc_port=server.port, recording_dir=tmp_path, endpoint_wait_s=30.0, **settings
        )
        async with open_session(s, recording=tmp_path / "session.jsonl") as session:
            player_settings = BotSettings(
                host="127.0.0.1", port=server.port, username="alex",
                reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False),
                # A person's stand-in on Emil's bridge: its own operator, so the bridge's check
                # (docs/trust.md) lets it hit a player it names in its order.
                operators=frozenset({"alex"}),
            )
            async with Bot.connect(player_settings) as player, anyio.create_task_group() as tg:
                heard: list[str] = []
                done = anyio.Event()

                async def run_agent() -> None:
                    try:
                        await session.agent.run()
                    finally:
                        done.set()

                tg.start_soon(_listen, player, s.bot_name, heard)
                tg.start_soon(run_agent)
                try:
                    yield World(server, double, session, player, heard, done)
                finally:
                    session.agent.stop()
                    tg.cancel_scope.cancel()


def events_of(records: list[Record], kind: str) -> list[dict[str, Any]]:
    """Game events of one kind from a recording."""
    from emil.recording import EventRecord

    return [r.event for r in records if isinstance(r, EventRecord) and r.event.get("kind") == kind]


__all__ = ["ALEX_HITS_EMIL", "World", "events_of", "running_world"]

ALEX_HITS_EMIL = {"requesters": ["alex"], "attack": "Emil"}
"""The order alex's bridge needs to hit Emil (the bridge checks attacks on players again)."""

"""Failures Emil must survive, or stop on with a message saying what to change.

Its own server per module: these tests kill the Node process and the server.
"""

from __future__ import annotations

import os
import signal
import socket
import time

import anyio
import pytest

from emil.backoff import OutageEvent
from emil.exceptions import ConfigurationError, PatienceExhausted
from emil.sandbox.server import EmbeddedServer
from emil.world.bridge import Bot
from emil.world.events import Disconnected, ErrorEvent
from emil.world.wire import BotSettings
from tests.integration.world.conftest import next_event

pytestmark = pytest.mark.slow

FAST = {"patience_s": 3.0, "reconnect_base_s": 0.2, "reconnect_cap_s": 1.0, "spawn_timeout_s": 10.0}


async def test_unknown_host_is_a_configuration_error() -> None:
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="unknown host"):
        async with Bot.connect(BotSettings(host="no-such-host.invalid", port=25565, **FAST)):
            pass
    assert time.monotonic() - started < 20  # stopped, not an endless reconnect loop


async def test_nothing_listening_is_waited_for_until_the_patience_runs_out() -> None:
    # Behaviour change (issue #11, world patience): a server that refuses connections may be
    # restarting, so it is waited for with backoff like the LLM endpoint, not a config error.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free, and nothing listens on it once closed
    events: list[OutageEvent] = []
    started = time.monotonic()
    with pytest.raises(PatienceExhausted, match=f"start the server at 127.0.0.1:{port}") as err:
        async with Bot.connect(BotSettings(port=port, **FAST), on_outage=events.append):
            pass
    assert err.value.service == "minecraft server" and err.value.waited_s >= 3.0
    assert time.monotonic() - started < 30
    kinds = [e.kind for e in events]
    assert kinds[0] == "down" and kinds[-1] == "gone" and kinds.count("retry") >= 2


async def test_wrong_version_is_a_configuration_error(server: EmbeddedServer) -> None:
    with pytest.raises(ConfigurationError, match="version"):
        async with Bot.connect(BotSettings(port=server.port, version="1.19.4", username="Wrong", **FAST)):
            pass


async def test_node_process_death_is_survived(server: EmbeddedServer) -> None:
    async with Bot.connect(BotSettings(port=server.port, username="Phoenix", **FAST)) as bot:
        pid = bot.node_pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        ev = await next_event(bot, lambda e: isinstance(e, ErrorEvent), timeout=10)
        assert "Node process" in ev.message  # type: ignore[union-attr]
        assert await bot.wait_connected(30)
        assert bot.node_pid() != pid and bot.node_restarts == 1
        res = await bot.act("say", {"text": "back again"}, timeout=10)
        assert res.ok, res.error
        assert (await bot.snapshot()).connected


async def test_server_restart_is_survived_with_reconnect(server: EmbeddedServer) -> None:
    settings = BotSettings(port=server.port, username="Stayer", reconnect_base_s=0.3, reconnect_cap_s=2.0)
    events: list[OutageEvent] = []
    async with Bot.connect(settings, on_outage=events.append) as bot:
        await server.kill()
        ev = await next_event(bot, lambda e: isinstance(e, Disconnected), timeout=15)
        assert isinstance(ev, Disconnected)
        res = await bot.act("say", {"text": "anyone?"})
        assert not res.ok and "not connected" in (res.error or "")
        await server.restart()
        assert await bot.wait_connected(40)
        assert bot.reconnects >= 1
        assert (await bot.act("say", {"text": "reconnected"})).ok
    assert [e.kind for e in events if e.kind != "retry"] == ["down", "up"]  # one outage, one reconnect


async def test_giving_up_ends_the_stream_and_raises(server: EmbeddedServer) -> None:
    settings = BotSettings(port=server.port, username="Quitter", patience_s=2.0, reconnect_base_s=0.2, reconnect_cap_s=0.5, spawn_timeout_s=5)
    with pytest.raises(PatienceExhausted, match=r"longer than its patience of 2 s"):
        async with Bot.connect(settings) as bot:
            await server.kill()
            with anyio.fail_after(40):
                async for _ in bot.events:
                    pass  # the stream ends when the bot gives up
            assert bot.failure is not None
    await server.restart()

"""The Minecraft version is found, not configured: the bot speaks what the server's status
ping names, refuses a version mineflayer does not support (listing the ones it does), and a
pinned mc_version must agree with the server.

Each case starts its own embedded flying-squid server on that version (flying-squid 1.12 serves
1.8.8 to 1.21.4; mineflayer 4.39 is tested with 1.8.8 to 26.1, not with 1.18).
"""

from __future__ import annotations

import pytest

from emil.exceptions import ConfigurationError
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.world.bridge import Bot
from emil.world.wire import BotSettings
from tests.integration.world.conftest import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FAST = {"max_reconnects": 1, "reconnect_base_s": 0.2, "reconnect_cap_s": 1.0, "spawn_timeout_s": 15.0}


@pytest.mark.parametrize("version", ["1.21.4", "1.16.5"])
async def test_the_bot_speaks_the_version_the_server_advertises(version: str) -> None:
    async with EmbeddedServer(version=version) as server, Bot.connect(BotSettings(port=server.port, **FAST)) as bot:
        assert bot.version == version  # the settings said "auto"
        async with PlayerBot(server.port, "Alex", version=version) as alex:
            said = await bot.act("say", {"text": f"I speak {version}"}, timeout=10)
            assert said.ok, said.error

            async def heard() -> bool:
                return any(f"I speak {version}" in m for m in alex.messages())

            await eventually(heard, timeout=10, what="the player hears Emil")
            assert await heard()
        snap = await bot.snapshot()
        assert snap.connected and snap.position is not None


async def test_a_version_mineflayer_does_not_support_is_refused_with_the_list() -> None:
    async with EmbeddedServer(version="1.18") as server:  # protocol 757: mineflayer has 1.18.2 (758)
        with pytest.raises(ConfigurationError) as e:
            async with Bot.connect(BotSettings(port=server.port, **FAST)):
                pass
    msg = str(e.value)
    assert "the server runs 1.18 (protocol 757)" in msg
    assert "supports 1.8.8, " in msg and "1.20.4" in msg and "1.21.4" in msg


async def test_a_pinned_version_still_wins_when_it_agrees_and_is_refused_when_not() -> None:
    async with EmbeddedServer(version="1.20.4") as server:
        # 1.20.3 speaks 1.20.4's protocol: a pin the server accepts is used as given.
        async with Bot.connect(BotSettings(port=server.port, version="1.20.3", username="Pinned", **FAST)) as bot:
            assert bot.version == "1.20.3"
        with pytest.raises(ConfigurationError, match=r"the server runs 1\.20\.4 \(protocol 765\) but mc_version is 1\.21\.4"):
            async with Bot.connect(BotSettings(port=server.port, version="1.21.4", username="Wrong", **FAST)):
                pass
        with pytest.raises(ConfigurationError, match=r"unknown Minecraft version 9\.9; mineflayer 4\.39\.0 supports"):
            async with Bot.connect(BotSettings(port=server.port, version="9.9", username="Wrong", **FAST)):
                pass

"""``run_emil.py demo``: Emil on an embedded server, with a SCRIPTED brain and a scripted player.

Everything is local and started by this module: the embedded flying-squid server, the
vLLM-dialect HTTP double (a double of vLLM, not a model) answering with a SCRIPTED rule-based
brain, Emil itself (the real loop, bridge, context manager and client, through the same startup
checks as ``live``), and a second mineflayer bot playing the player. The player greets Emil,
asks it to follow, walks away, hands it items and hits it. The run is bounded in time, writes a
recording and prints a summary. What Emil says in the demo is scripted, so it shows the
plumbing working, not a model's play.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import JsonValue

from emil.agent.session import Session, open_session
from emil.agent.startup import summary_line
from emil.config import LoadedSettings
from emil.sandbox.server import EmbeddedServer
from emil.testing.brains import DemoBrain
from emil.testing.vllm_double import VLLMDouble
from emil.world.actions import TOOLS
from emil.world.bridge import Bot
from emil.world.events import Chat
from emil.world.port import WorldPort
from emil.world.setup import ensure_js_deps
from emil.world.wire import BotSettings, ReflexSettings

__all__ = ["DEMO_PLAYER", "DemoResult", "play_demo", "run_demo"]

_log = logging.getLogger("emil.demo")

DEMO_PLAYER = "alex"
DEMO_GIFT = ("bread", 3)


@dataclass
class DemoResult:
    """What the demo did, for the summary and the integration test."""

    session: Session | None = None
    player_heard: list[str] = field(default_factory=list)
    emil_moved_blocks: float = 0.0
    steps: list[str] = field(default_factory=list)


class _Player:
    """The scripted player: a second mineflayer bot (no reflexes) run through the same bridge."""

    def __init__(self, bot: Bot, server: EmbeddedServer, emil: str, emil_world: WorldPort, result: DemoResult) -> None:
        self.bot, self.server, self.emil, self.emil_world, self.result = bot, server, emil, emil_world, result

    async def step(self, what: str, action: str, args: dict[str, JsonValue], *, then_wait: float) -> None:
        outcome = await self.bot.act(action, args, timeout=30, job=TOOLS[action].job)
        note = "ok" if outcome.ok else f"failed: {outcome.error}"
        self.result.steps.append(f"{what} ({note})")
        _log.info("scripted player: %s: %s", what, note)
        await anyio.sleep(then_wait)

    async def where_is_emil(self) -> tuple[float, float] | None:
        snap = await self.bot.snapshot()
        for p in snap.players:
            if p.get("name") == self.emil and isinstance(p.get("position"), dict):
                return float(p["position"]["x"]), float(p["position"]["z"])
        return None

    async def emil_near(self, x: float, z: float, *, within: float, limit_s: float) -> tuple[float, float] | None:
        """Where Emil is once it has come ``within`` blocks of (x, z), or after ``limit_s`` seconds
        (a follower on a loaded machine takes longer than a fixed wait: the demo waits for it)."""
        deadline = anyio.current_time() + limit_s
        while True:
            where = await self.where_is_emil()
            near = where is not None and ((where[0] - x) ** 2 + (where[1] - z) ** 2) ** 0.5 <= within
            if near or anyio.current_time() >= deadline:
                return where
            await anyio.sleep(0.5)

    async def play(self) -> None:
        await anyio.sleep(2.0)
        await self.step("greets Emil", "say", {"text": f"Hello {self.emil}!"}, then_wait=4.0)
        await self.step("asks Emil to follow", "say", {"text": f"{self.emil}, follow me"}, then_wait=3.0)
        start = await self.where_is_emil()
        snap = await self.bot.snapshot()
        here = snap.position or {"x": 0.0, "y": 0.0, "z": 0.0}
        await self.step("walks away", "go_to", {"x": here["x"] + 10, "y": here["y"], "z": here["z"] + 4}, then_wait=0.0)
        end = await self.emil_near(here["x"] + 10, here["z"] + 4, within=4.0, limit_s=20.0)
        if start is not None and end is not None:
            self.result.emil_moved_blocks = ((end[0] - start[0]) ** 2 + (end[1] - start[1]) ** 2) ** 0.5
        await self.step("tells Emil to stay", "say", {"text": f"{self.emil}, stop here"}, then_wait=3.0)
        item, count = DEMO_GIFT
        await self.server.command(f"give {DEMO_PLAYER} {item} {count}")
        await anyio.sleep(1.0)
        await self.step(f"hands Emil {count} {item}", "give", {"player": self.emil, "item": item, "count": count}, then_wait=3.0)
        inventory = (await self.emil_world.snapshot() or {}).get("inventory") or {}
        if not inventory.get(item):
            # The toss can land out of Emil's reach; the console give still shows Emil an item
            # arriving (the bot reports inventory gains from any cause).
            await self.server.command(f"give {self.emil} {item} {count}")
            self.result.steps.append(f"toss missed, gave {count} {item} by server command")
            await anyio.sleep(3.0)
        order: JsonValue = {"requesters": [DEMO_PLAYER], "attack": self.emil}  # its own order (docs/trust.md)
        await self.step("hits Emil", "attack", {"target": self.emil, "duration_s": 1, "authority": order}, then_wait=6.0)


async def play_demo(loaded: LoadedSettings, *, duration_s: float, recording: Path | None) -> DemoResult:
    """Start everything, run the scripted scenario for at most ``duration_s``, stop everything."""
    result = DemoResult()
    s = loaded.settings
    async with EmbeddedServer() as server, VLLMDouble(DemoBrain(), window=max(s.window or 0, 32768)) as llm:
        # The demo leaves the metrics port to a live Emil on this box unless asked for them.
        metrics = s.metrics_address if loaded.sources.get("metrics_address", "default") != "default" else "off"
        settings = s.model_copy(
            update={
                "endpoint": llm.base_url, "model": "auto", "mc_host": "127.0.0.1", "mc_port": server.port,
                "endpoint_wait_s": 30.0, "metrics_address": metrics,
                # The demo's world is not the live one: its notes never mix with the live Emil's.
                "data_dir": s.data_dir / "demo",
            }
        )
        async with open_session(settings, recording=recording) as session:
            result.session = session
            player_settings = BotSettings(
                host="127.0.0.1", port=server.port, username=DEMO_PLAYER, version=s.mc_version,
                reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False),
                # A person's stand-in on Emil's bridge: its own operator, so the bridge's own
                # check (docs/trust.md) lets it hit the player it names in its order.
                operators=frozenset({DEMO_PLAYER}),
            )
            async with Bot.connect(player_settings) as player_bot:
                player = _Player(player_bot, server, s.bot_name, session.agent.world, result)
                with anyio.move_on_after(duration_s):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_collect_chat, player_bot, s.bot_name, result)
                        tg.start_soon(session.agent.run)
                        await player.play()
                        session.agent.stop()
                        tg.cancel_scope.cancel()
    return result


async def _collect_chat(player: Bot, emil: str, result: DemoResult) -> None:
    async for event in player.events:
        if isinstance(event, Chat) and event.sender == emil:
            result.player_heard.append(f"<{emil}> {event.text}")


def _summary(result: DemoResult, started: float) -> str:
    session = result.session
    if session is None:
        return "demo did not start"
    stats = session.agent.stats
    lines = [
        "",
        "=== Emil demo (SCRIPTED brain served by the vLLM-dialect double: not a model) ===",
        f"ran {time.monotonic() - started:.0f} s on an embedded Minecraft server; player script: {', '.join(result.steps)}",
        summary_line(stats, session.recording_path),
        f"Emil moved {result.emil_moved_blocks:.1f} blocks while following",
        "the player heard:",
        *(f"  {m}" for m in result.player_heard[-8:]),
        "per turn:",
        *(f"  {t.log_line()}" for t in stats.turns),
    ]
    return "\n".join(lines)


def run_demo(loaded: LoadedSettings, *, duration_s: float = 60.0, recording: Path | None = None) -> str:
    """The ``demo`` command: installs the JS deps if needed, runs, returns the summary text."""
    ensure_js_deps(progress=True)
    started = time.monotonic()
    result = anyio.run(lambda: play_demo(loaded, duration_s=duration_s, recording=recording))
    return _summary(result, started)

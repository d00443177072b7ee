"""A live session: startup checks (emil.agent.startup), the Minecraft bot, and ``live``.

Startup check 6, the Minecraft server reachable and the version agreed, is the bridge's: it
raises a configuration error with the fix, or a world error when the server is down.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from emil.agent.loop import Agent
from emil.agent.startup import (
    build_agent,
    check_model,
    default_recording_path,
    new_client,
    summary_line,
)
from emil.agent.world_port import BotWorld
from emil.config import LoadedSettings, Settings
from emil.llm.client import OpenAIClient, ServedModel
from emil.memory.session import Memory, open_memory
from emil.metrics import MetricsServer, serve_metrics
from emil.recording import Recorder
from emil.world.actions import tool_specs, validate_tool_call
from emil.world.bridge import Bot, BotSettings, ReflexSettings

__all__ = ["Session", "bot_settings", "open_session", "run_live"]

_log = logging.getLogger("emil.session")


@dataclass
class Session:
    """A started session: the agent and what it was built from."""

    agent: Agent
    recorder: Recorder
    llm: OpenAIClient
    served: ServedModel
    window: int
    prompt_budget: int
    recording_path: Path
    metrics: MetricsServer | None = None
    """The /metrics endpoint of this session (None when metrics_address is off)."""
    memory: Memory | None = None
    """The session's notes (store, learner)."""


def bot_settings(settings: Settings) -> BotSettings:
    """The bridge's settings from Emil's."""
    on = set(settings.reflexes)
    return BotSettings(
        host=settings.mc_host, port=settings.mc_port, username=settings.bot_name, version=settings.mc_version,
        reflexes=ReflexSettings(defend="defend" in on, flee="flee" in on, eat="eat" in on, unstuck="unstuck" in on),
        allow_commands=settings.allow_commands, operators=frozenset(settings.operators),
    )


@asynccontextmanager
async def open_session(s: Settings, *, recording: Path | None = None) -> AsyncIterator[Session]:
    """Run every startup check and yield a ready :class:`Session`; the recording is closed on exit.

    First, before connecting to anything, the metrics port (in use) and the notes (``data_dir``:
    unwritable, or another Emil on it): each is a configuration error, found at once.
    """
    path = recording or default_recording_path(s)
    metrics = serve_metrics(s.metrics_address)
    try:
        with open_memory(s.data_dir, bot_name=s.bot_name) as memory:
            async with new_client(s, validate_tool_call) as llm:
                model = await check_model(s, llm)
                async with Bot.connect(bot_settings(s)) as bot:
                    recorder = Recorder(path)
                    if metrics is not None:
                        recorder.add_observer(metrics.metrics.observe)
                    try:
                        notes = memory.pinned(max_tokens=s.memory_tokens, tokens_of=model.counter.count)
                        summaries = memory.summariser(s, record=recorder.write)
                        world = memory.world(BotWorld(bot, s))
                        agent = build_agent(s, model, world, tool_specs(s), recorder, notes=notes, summaries=summaries)
                        yield Session(
                            agent, recorder, llm, model.served, model.window, model.budget.prompt_budget, path,
                            metrics, memory,
                        )
                    except BaseException as e:
                        recorder.close(f"error: {type(e).__name__}")
                        raise
                    finally:
                        recorder.close("stopped")
    finally:
        if metrics is not None:
            metrics.close()


async def _live(loaded: LoadedSettings, recording: Path | None) -> None:
    async with open_session(loaded.settings, recording=recording) as session:
        _log.info("playing as %s; recording to %s; Ctrl-C stops", loaded.settings.bot_name, session.recording_path)

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    _log.info("signal %s: shutting down", signum)
                    session.agent.stop()
                    return

        async with anyio.create_task_group() as tg:
            tg.start_soon(on_signal)
            await session.agent.run()
            tg.cancel_scope.cancel()
        _log.info("%s", summary_line(session.agent.stats, session.recording_path))


def run_live(loaded: LoadedSettings, *, recording: Path | None = None) -> int:
    """``run_emil.py live``: play until Ctrl-C. Configuration errors propagate (exit 2)."""
    anyio.run(_live, loaded, recording)
    return 0


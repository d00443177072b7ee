"""A live session: startup checks (emil.agent.startup), the Minecraft bot, ``live``, and how it ends.

A session ends in one of four ways (docs/reliability.md), each with one line on stderr, an
exit code, and the recording's last records saying the same:

======  ===================================================  ============================
 exit    cause                                                end record ``reason``
======  ===================================================  ============================
 0       a stop signal (SIGINT, SIGTERM) or the world's stream ended   ``stopped: ...``
 1       a bug outside any turn (the log has the traceback)  ``error: ...``
 2       a configuration error (the message says the fix)    ``configuration: ...``
 3       a service gone past its patience (world, endpoint)  ``gone: ...``
======  ===================================================  ============================

Before the end record comes an ``error`` record (``fatal``) with the cause, for exits 1-3.
Turn-level failures never end a session (emil.agent.loop). Startup check 6, the Minecraft
server reachable and the version agreed, is the bridge's.
"""

from __future__ import annotations

import logging
import signal
import sys
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from emil.agent.loop import Agent
from emil.agent.prometheus import MetricsServer, serve_metrics
from emil.agent.startup import (
    build_agent,
    build_context,
    check_model,
    default_recording_path,
    endpoint_patience,
    new_client,
    new_session_id,
    preflight,
    summary_line,
)
from emil.agent.world_port import action_policy, guard_for
from emil.backoff import OutageEvent
from emil.config import LoadedSettings, Settings
from emil.context.untrusted import Neutraliser, served_specials
from emil.exceptions import ConfigurationError, PatienceExhausted
from emil.llm.client import OpenAIClient, ServedModel
from emil.memory.wiring import Memory, open_memory
from emil.recording import ErrorRecord, Recorder, outage_record
from emil.world.actions import BotWorld, tool_specs, validate_tool_call
from emil.world.bridge import Bot
from emil.world.peers import PeerRegistry
from emil.world.wire import BotSettings, ReflexSettings

__all__ = [
    "EXIT_BUG",
    "EXIT_CONFIG",
    "EXIT_GONE",
    "EXIT_STOPPED",
    "Ending",
    "Session",
    "bot_settings",
    "ending_of",
    "open_session",
    "run_live",
]

_log = logging.getLogger("emil.session")

EXIT_STOPPED = 0
EXIT_BUG = 1
EXIT_CONFIG = 2
EXIT_GONE = 3


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
    body: BotWorld | None = None
    """Emil's body under the session's wrappers: the bot and its guard (``agent.world`` is
    the body with its memory)."""


@dataclass(frozen=True)
class Ending:
    """How a session ended: the exit code, the end record's reason, the one line for stderr."""

    exit_code: int
    reason: str
    line: str
    cause: BaseException | None = None


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside task-group exception groups, flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def ending_of(exc: BaseException | None, *, stop_reason: str = "") -> Ending:
    """Map what ended a session to its exit (see the module docstring).

    Exception groups from task groups are looked through: a configuration error anywhere in
    one wins, then a service gone past its patience, then a bug; cancellation alone is a stop.
    """
    if exc is None:
        reason = f"stopped: {stop_reason}" if stop_reason else "stopped"
        return Ending(EXIT_STOPPED, reason, f"emil: {reason}")
    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, ConfigurationError):
            text = " ".join(str(leaf).split())
            return Ending(EXIT_CONFIG, f"configuration: {text}", f"emil: configuration error: {text}", leaf)
    for leaf in leaves:
        if isinstance(leaf, PatienceExhausted):
            text = " ".join(str(leaf).split())
            return Ending(EXIT_GONE, f"gone: {text}", f"emil: gave up waiting: {text}", leaf)
    # cancellation (any backend's), KeyboardInterrupt and SystemExit are not Exceptions: a stop
    bugs = [leaf for leaf in leaves if isinstance(leaf, Exception)]
    if not bugs:
        reason = f"stopped: {stop_reason or 'interrupted'}"
        return Ending(EXIT_STOPPED, reason, f"emil: {reason}")
    bug = bugs[0]
    text = f"{type(bug).__name__}: {' '.join(str(bug).split())}"[:300]
    return Ending(EXIT_BUG, f"error: {text}", f"emil: internal error ({text}); details in the log and the recording", bug)


def bot_settings(settings: Settings) -> BotSettings:
    """The bridge's settings from Emil's."""
    on = set(settings.reflexes)
    return BotSettings(
        host=settings.mc_host, port=settings.mc_port, username=settings.bot_name, version=settings.mc_version,
        reflexes=ReflexSettings(defend="defend" in on, flee="flee" in on, eat="eat" in on, unstuck="unstuck" in on),
        allow_commands=settings.allow_commands, operators=frozenset(settings.operators),
        patience_s=settings.world_patience_s, restarts_per_hour=settings.world_restarts_per_hour,
    )


class _Outages:
    """Routes a service's outage events to the recording (to the agent once it exists)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.agent: Agent | None = None

    def __call__(self, event: OutageEvent) -> None:
        if self.agent is not None:
            self.agent.record_outage(event)
        else:
            self.recorder.write(outage_record(event))


def _close(recorder: Recorder, ending: Ending) -> None:
    if ending.exit_code != EXIT_STOPPED and ending.cause is not None:
        cause = ending.cause
        detail = "".join(traceback.format_exception(cause))[-4000:] if ending.exit_code == EXIT_BUG else ""
        recorder.write(ErrorRecord(error_type=type(cause).__name__, message=str(cause), fatal=True,
                                   where="session", detail=detail))
    recorder.close(ending.reason, exit_code=ending.exit_code)


@asynccontextmanager
async def open_session(
    s: Settings, *, recording: Path | None = None, why_stopped: Callable[[], str] | None = None
) -> AsyncIterator[Session]:
    """Run every startup check and yield a ready :class:`Session`.

    The recording is opened first (a path that exists is refused unless ``recording_append``)
    and always closed with an end record whose reason and exit code say how the session ended;
    a fatal error is recorded before it. Exceptions propagate to the caller unchanged.
    ``why_stopped`` says why, when the caller cancelled the session (a signal during startup).
    """
    path = recording or default_recording_path(s)
    tools = tool_specs(s.tools_off, must_call=s.tool_choice == "required")
    preflight(s, tools)
    # Before connecting to anything: a metrics port in use is a configuration error.
    metrics = serve_metrics(s.metrics_address, labels={"npc": s.bot_name})  # a fleet's NPCs apart (docs/fleet.md)
    try:
        recorder = Recorder(path, append=s.recording_append)
    except BaseException:
        if metrics is not None:
            metrics.close()
        raise
    if metrics is not None:
        recorder.add_observer(metrics.metrics.observe)
    outages = _Outages(recorder)
    agent: Agent | None = None
    try:
        # The notes first: data_dir unwritable, or another Emil on it, is found before connecting.
        with open_memory(s.data_dir, bot_name=s.bot_name, retention_days=s.archive_days) as memory:
            session_id = new_session_id()  # in the recording's header and every request's session key
            async with new_client(s, validate_tool_call, session_id=session_id) as llm:
                patience = endpoint_patience(s, limit_s=s.endpoint_wait_s, on_event=outages)
                model = await check_model(s, llm, patience)
                neutralise = Neutraliser(served_specials(model.counter))
                notes = memory.pinned(max_tokens=s.memory_tokens, tokens_of=model.counter.count, neutralise=neutralise)
                context = build_context(s, model.family, model.budget, tools, llm=llm, notes=notes,
                                        summaries=memory.summariser(s, record=recorder.write),
                                        notes_bound=s.memory_tokens, recall_bound=s.recall_tokens,
                                        warn_crowded=True)
                recall = memory.turn_recall(max_tokens=s.recall_tokens, tokens_of=model.counter.count,
                                            neutralise=neutralise, since=context.history_since,
                                            pinned=context.notes_text)
                memory_tools = memory.tools(tokens_of=model.counter.count, neutralise=neutralise)
                async with Bot.connect(bot_settings(s), on_outage=outages) as bot:
                    body = BotWorld(bot, action_policy(s), guard=guard_for(s), memory=memory_tools)
                    world = memory.world(body)
                    agent = build_agent(s, model, world, tools, recorder, context=context, patience=patience,
                                        recall=recall, session_id=session_id)
                    outages.agent = agent
                    # Other Emils on this server are NPCs without a list (docs/trust.md, "NPCs").
                    with PeerRegistry(s.mc_host, s.mc_port, s.bot_name) as peers:
                        if agent.perception.budget is not None:
                            agent.perception.budget.peers = peers.peers
                        yield Session(agent, recorder, llm, model.served, model.window, model.budget.prompt_budget,
                                      path, metrics, memory, body)
    except BaseException as e:
        _close(recorder, ending_of(e, stop_reason=_why(agent, why_stopped)))
        raise
    else:
        _close(recorder, ending_of(None, stop_reason=_why(agent, why_stopped)))
    finally:
        if metrics is not None:
            metrics.close()


def _why(agent: Agent | None, why_stopped: Callable[[], str] | None) -> str:
    if agent is not None and agent.stop_reason:
        return agent.stop_reason
    return why_stopped() if why_stopped is not None else ""


async def _live(loaded: LoadedSettings, recording: Path | None, ended: list[Ending]) -> None:
    stop_reason = ""
    session_scope = anyio.CancelScope()
    agent_box: list[Agent] = []

    async def on_signal() -> None:
        nonlocal stop_reason
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if stop_reason:  # a second signal: stop waiting for anything
                    session_scope.cancel()
                    continue
                stop_reason = f"signal {name}"
                _log.info("%s: stopping", name)
                if agent_box:
                    agent_box[0].stop(stop_reason)
                else:  # still starting: nothing to finish
                    session_scope.cancel()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_signal)
            with session_scope:
                async with open_session(loaded.settings, recording=recording,
                                        why_stopped=lambda: stop_reason) as session:
                    agent_box.append(session.agent)
                    if stop_reason:
                        session.agent.stop(stop_reason)
                    _log.info("playing as %s; recording to %s; Ctrl-C stops",
                              loaded.settings.bot_name, session.recording_path)
                    await session.agent.run()
                    _log.info("%s", summary_line(session.agent.stats, session.recording_path))
            tg.cancel_scope.cancel()
    except BaseException as e:
        ended.append(ending_of(e, stop_reason=stop_reason))
        return
    reason = agent_box[0].stop_reason if agent_box else stop_reason
    ended.append(ending_of(None, stop_reason=reason or stop_reason))


def run_live(loaded: LoadedSettings, *, recording: Path | None = None) -> int:
    """``run_emil.py live``: play until stopped; returns the exit code (see the module doc)."""
    ended: list[Ending] = []
    anyio.run(_live, loaded, recording, ended)
    ending = ended[0] if ended else ending_of(None)
    if ending.exit_code == EXIT_BUG and ending.cause is not None:
        _log.error("internal error", exc_info=ending.cause)
    print(ending.line, file=sys.stderr)  # noqa: T201 - the one line an operator reads
    return ending.exit_code

"""Startup checks and the wiring of the model side into an :class:`~emil.agent.Agent`.

The checks run in order, each with a message that says what to change:

0. Before connecting to anything: when the window is set and the family is known from the
   settings (``model_family``, or ``tokenizer`` / ``model``), the budget check of step 5 runs at
   once (:func:`preflight`), so a budget that cannot work stops Emil before it waits for any
   server.
1. LLM endpoint reachable: transient, so it is waited for with backoff (emil.backoff: one
   WARNING per outage) for ``endpoint_wait_s`` (unset = until stopped; past it, exit 3).
2. Model served: a configured model the server does not list is a configuration error that
   lists what it serves; "auto" takes the served one.
3. Window from the server (``max_model_len``); a configured window may only lower it.
4. Model family resolved once (emil.model.family): the ``model_family`` setting, else the
   tokenizer/chat_template settings, else the served model's root then id, else the server's
   /tokenize; then checked against the server's /tokenize of a probe prompt (a mismatch: exit
   2 for a family set by the operator, the server's counting for one guessed from the name).
   Logged with where it came from; never another family's template.
5. Budget: output reserve + pinned prompt (system prompt + tool specs + one observation) must
   fit the window (:func:`build_context`), before the Minecraft server is contacted.

(6., the Minecraft server, is the bridge's: see :mod:`emil.agent.session`.) Configuration
errors are never retried; they end the run with exit code 2.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from emil.agent.context_port import ManagedContext, session_context
from emil.agent.loop import Agent, AgentOptions
from emil.agent.persona import load_system_prompt
from emil.agent.ports import Completer, Recall
from emil.agent.turn import observation_cap
from emil.agent.turnstats import SessionStats
from emil.backoff import Backoff, OutageEvent, Patience, wait_out
from emil.config import Settings
from emil.context.budget import Budget
from emil.context.history import History
from emil.context.rungs import NotesSource, SummarySource
from emil.exceptions import ConfigurationError, ServerFault, TransientError
from emil.llm.client import OpenAIClient, ServedModel
from emil.llm.recovery import complete_with_recovery
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.tokenize import ServerCounting, ServerTokenizeCounter
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.model.family import ModelFamily, server_family
from emil.model.resolve import ResolvedFamily, resolve_family
from emil.model.tokens import TokenCounter
from emil.model.verify import verify_family
from emil.recording import HeaderRecord, Recorder
from emil.senses.perception import Perception
from emil.world.actions import TOOLS
from emil.world.port import WorldPort

__all__ = [
    "ModelSetup",
    "agent_options",
    "build_agent",
    "build_context",
    "check_model",
    "default_recording_path",
    "endpoint_patience",
    "header_record",
    "live_perception",
    "new_client",
    "new_session_id",
    "preflight",
    "recovering_completer",
    "session_headers",
    "session_key",
    "summary_line",
    "wait_for_endpoint",
]

_log = logging.getLogger("emil.startup")


def default_recording_path(settings: Settings) -> Path:
    """recording_dir/emil-<UTC time>-<bot>.jsonl (with -2, -3... if that name is taken)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    path = settings.recording_dir / f"emil-{stamp}-{settings.bot_name}.jsonl"
    n = 1
    while path.exists():
        n += 1
        path = settings.recording_dir / f"emil-{stamp}-{settings.bot_name}-{n}.jsonl"
    return path


def endpoint_patience(
    settings: Settings, *, limit_s: float | None, on_event: Callable[[OutageEvent], None] | None = None
) -> Patience:
    """The LLM endpoint's Patience: one per session, shared by startup and every turn."""
    return Patience(
        "llm endpoint", backoff=Backoff(0.5, 10.0), limit_s=limit_s, on_event=on_event,
        fix=f"start vLLM at {settings.endpoint}, or set endpoint to where it listens "
            "(endpoint_wait_s sets how long Emil waits at start)",
    )


async def wait_for_endpoint(llm: OpenAIClient, patience: Patience) -> ServedModel:
    """Discover the served model, waiting out an unreachable (or garbling) endpoint."""
    return await wait_out(llm.discover, patience, transient=(TransientError, ServerFault))


def _window(served: ServedModel, settings: Settings) -> int:
    if served.max_model_len is None:
        if settings.window is None:
            raise ConfigurationError(
                f"the server does not report max_model_len for {served.id}; set window to the served context length"
            )
        return settings.window
    if settings.window is not None and settings.window > served.max_model_len:
        raise ConfigurationError(
            f"window {settings.window} is larger than the served max_model_len {served.max_model_len} of {served.id}; "
            "lower window or leave it on auto"
        )
    return settings.window or served.max_model_len


def recovering_completer(
    llm: OpenAIClient, context: ManagedContext, settings: Settings, window: int, patience: Patience
) -> Completer:
    """The loop's completer: overflow recovery, server-fault resends and outage waits, with the
    endpoint's shared ``patience`` (mid-session it waits until stopped: reflexes keep acting)."""

    def calibrate(predicted: int, server: int, lower_bound: bool) -> None:
        if not lower_bound:
            context.observe_usage(predicted, server)

    async def count_exact(request: ChatRequest) -> int | None:
        return await llm.count_prompt_tokens(request)

    async def complete(assemble: Assembler, on_event: Callable[[RecoveryEvent], None]) -> Completion:
        return await complete_with_recovery(
            llm, assemble, window=window, max_overflow_retries=settings.max_overflow_retries,
            max_fault_retries=settings.max_server_fault_retries, on_event=on_event,
            calibrate=calibrate, count_exact=count_exact, patience=patience,
        )

    return complete


@dataclass
class ModelSetup:
    """The LLM side after startup checks 1-5: client, served model, window, counting, budget."""

    llm: OpenAIClient
    served: ServedModel
    window: int
    counter: TokenCounter
    family: ModelFamily
    family_source: str
    """Where the family came from (setting, served root/id, local files, server fallback)."""
    budget: Budget


def _budget(s: Settings, window: int, window_from: str) -> Budget:
    """The session's budget, built once: a configured prompt_budget must leave the default margin."""
    return Budget.of(
        window, s.output_reserve, s.prompt_budget, min_margin=Budget(window).margin,
        sources={
            "window": window_from,
            "output reserve": "setting output_reserve",
            "prompt budget": "setting prompt_budget" if s.prompt_budget is not None else "auto",
        },
    )


def build_context(
    s: Settings, family: ModelFamily, budget: Budget, tools: list[dict[str, Any]],
    *, history: History | None = None, llm: OpenAIClient | None = None,
    notes: NotesSource | None = None, summaries: SummarySource | None = None, notes_bound: int = 0,
    recall_bound: int = 0, warn_crowded: bool = False,
) -> ManagedContext:
    """The session's context (:func:`~emil.agent.context_port.session_context`, with the system
    prompt rendered from prompts/), after checking that the pinned prompt fits (BudgetError).

    ``notes``: the pinned notes block (emil.memory), after the system prompt from the first
    request on, brought up to date at trims by the ``refresh_notes`` rung (``trim_rungs``
    without it: the block as it was at start, for the whole session). ``summaries``: the
    ``summarise`` rung's summariser (emil.memory.summariser). ``notes_bound``: the tokens the
    fit check keeps for the notes block (it grows as Emil learns, up to ``memory_tokens``);
    ``recall_bound``: the tokens it keeps for the lines recalled into an observation
    (``recall_tokens``). ``warn_crowded``: log the fit check's warning when the pinned parts
    leave the conversation little room (once per session: not in the preflight)."""
    tool_names = [t["function"]["name"] for t in tools]
    system_prompt = load_system_prompt(
        s.prompts_dir, name=s.bot_name, tools=tool_names, operators=s.operators, allow_commands=s.allow_commands,
        persona=s.persona,
    )
    context = session_context(s, family=family, budget=budget, system_prompt=system_prompt, tools=tools,
                              history=history, llm=llm, notes=notes, summaries=summaries)
    crowded = context.check_fits(notes_bound=notes_bound, recall_bound=recall_bound)
    if crowded is not None and warn_crowded:
        _log.warning("%s", crowded)
    return context


def preflight(s: Settings, tools: list[dict[str, Any]]) -> None:
    """Check 0: the budget check before connecting to anything, when nothing needs a server.

    It needs the window and a family known from the settings alone (``model_family``, or
    ``tokenizer`` / ``model`` naming one); otherwise it waits for check 5, right after the
    endpoint answers and still before the Minecraft server is contacted.
    """
    if s.window is None:
        return
    try:
        resolved: ResolvedFamily = resolve_family(
            setting=s.model_family, served=(None, None if s.model == "auto" else s.model),
            tokenizer=s.tokenizer, chat_template=str(s.chat_template) if s.chat_template else None,
        )
    except ConfigurationError:
        return  # the served model decides (or the same error comes, worded for it, at check 4)
    build_context(s, resolved.family, _budget(s, s.window, "setting window"), tools,
                  notes_bound=s.memory_tokens)


async def check_model(s: Settings, llm: OpenAIClient, patience: Patience | None = None) -> ModelSetup:
    """Startup checks 1-4 (see the module docstring) against an open client."""
    served = await wait_for_endpoint(llm, patience or endpoint_patience(s, limit_s=s.endpoint_wait_s))
    window = _window(served, s)
    def counted_by_server() -> ModelFamily:
        return server_family(
            ServerCounting(s.endpoint, served.id, api_key=s.api_key, timeout=min(30.0, s.request_timeout_s),
                           headers=llm.headers)
        )

    resolved = resolve_family(
        setting=s.model_family,
        served=(served.root, served.id),
        tokenizer=s.tokenizer,
        chat_template=str(s.chat_template) if s.chat_template else None,
        server=counted_by_server,
    )
    resolved = await verify_family(
        resolved, ServerTokenizeCounter(s.endpoint, served.id, api_key=s.api_key, headers=llm.headers),
        enable_thinking=s.enable_thinking, preserve_thinking=s.preserve_thinking, server=counted_by_server,
    )
    family = resolved.family
    counter = family.tokenizer()
    window_from = "setting window" if s.window is not None else "server max_model_len"
    budget = _budget(s, window, window_from)
    _log.info("llm %s: model %s, model family %s (%s; from %s), tokenizer %s, %s", s.endpoint, served.id,
              family.name, family.label, resolved.source, counter.name, budget.explain())
    return ModelSetup(llm, served, window, counter, family, resolved.source, budget)


def new_session_id() -> str:
    """A new session's id (the recording header's ``session_id``, part of its session key)."""
    return uuid.uuid4().hex[:12]


def session_key(s: Settings, session_id: str) -> str:
    """``<bot_name>-<session_id>``, the name reduced to what a header value may hold (a
    Minecraft name already is)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", s.bot_name) or "emil"
    return f"{name}-{session_id}"


def session_headers(s: Settings, session_id: str) -> dict[str, str]:
    """``{session_header: session_key}``, sent with every request of the session (none when
    ``session_header`` is off): a router hashing it keeps the session on one replica, where its
    prefix is cached (docs/scale-out.md)."""
    if s.session_header == "off":
        return {}
    return {s.session_header: session_key(s, session_id)}


def new_client(
    s: Settings, tool_validator: Callable[[ToolCall], ToolCall] | None = None, *, session_id: str | None = None
) -> OpenAIClient:
    """The live client for the configured endpoint; ``tool_validator`` checks calls against the
    tools; every request carries the session key of ``session_id`` (a new one when None), and
    every chat request an ``X-Request-Id`` starting with it."""
    session_id = session_id or new_session_id()
    headers = session_headers(s, session_id)
    for name, value in headers.items():
        _log.info("llm: every request carries %s: %s (the session key a router routes on)", name, value)
    return OpenAIClient(
        s.endpoint, model=None if s.model == "auto" else s.model, api_key=s.api_key,
        timeout=s.request_timeout_s, first_token_timeout=s.first_token_timeout_s, tool_validator=tool_validator,
        headers=headers, request_id_prefix=session_key(s, session_id), caps=s,
    )


def agent_options(s: Settings, prompt_budget: int | None = None, family: ModelFamily | None = None) -> AgentOptions:
    """What the loop needs beyond the settings: the observation cap (``prompt_budget`` sizes
    it when the setting is on auto) and whether ``preserve_thinking`` is sent (``family``:
    only when its template reads it). Replay derives the same from a recording's settings
    (emil.replay.engine)."""
    preserve = None if family is None else family.sends_preserve_thinking(
        enable_thinking=s.enable_thinking, preserve_thinking=s.preserve_thinking)
    return AgentOptions(observation_cap_tokens=observation_cap(s.observation_cap_tokens, prompt_budget),
                        preserve_thinking=preserve)


def live_perception(s: Settings) -> Perception:
    """Perception as a live session runs it: the settings' thresholds, the turn-rate cap and
    the NPC chat budget, and the tools that are Emil speaking."""
    return Perception(s, budgeted=True,
                      speech_actions=frozenset(name for name, cls in TOOLS.items() if cls.speaks is not None))


def header_record(
    s: Settings, model: ModelSetup, context: ManagedContext, session_id: str | None = None
) -> HeaderRecord:
    """The recording's first record: versions, effective settings, the pinned prompt parts, the
    session key the client sends (``session_id``: the one it was made with; None: a new id)."""
    return HeaderRecord(
        session_id=session_id or new_session_id(),
        session_key=model.llm.headers.get(s.session_header),
        settings=s.public_dump(), model=model.served.id, tokenizer=model.counter.name,
        chat_template=_local_template(model.family), model_family=model.family.name, window=model.window,
        output_reserve=s.output_reserve, prompt_budget=model.budget.prompt_budget,
        enable_thinking=s.enable_thinking, preserve_thinking=model.family.sends_preserve_thinking(enable_thinking=s.enable_thinking, preserve_thinking=s.preserve_thinking),
        system_prompt=context.system_prompt, tools=context.tools, bot_name=s.bot_name,
    )


def build_agent(
    s: Settings,
    model: ModelSetup,
    world: WorldPort,
    tools: list[dict[str, Any]],
    recorder: Recorder,
    *,
    history: History | None = None,
    context: ManagedContext | None = None,
    patience: Patience | None = None,
    notes: NotesSource | None = None,
    summaries: SummarySource | None = None,
    recall: Recall | None = None,
    session_id: str | None = None,
) -> Agent:
    """Check the pinned prompt fits (BudgetError otherwise), write the header, build the agent.

    ``context`` is one :func:`build_context` already checked (else one is built here with
    ``notes`` and ``summaries``, see there); ``patience`` the endpoint's (a new one, waiting
    until stopped, when not given). Its outage events go to the recording.
    """
    if context is None:
        context = build_context(s, model.family, model.budget, tools, history=history, llm=model.llm,
                                notes=notes, summaries=summaries,
                                notes_bound=s.memory_tokens if notes is not None else 0, warn_crowded=True)
    recorder.write(header_record(s, model, context, session_id))
    if history is not None:
        for message in history.messages():
            recorder.message(message)
    patience = patience or endpoint_patience(s, limit_s=None)
    options = agent_options(s, model.budget.prompt_budget, model.family)
    agent = Agent(
        world=world, context=context,
        completer=recovering_completer(model.llm, context, s, model.window, patience),
        recorder=recorder, settings=s, options=options, perception=live_perception(s), name=s.bot_name,
        recall=recall,
    )
    patience.limit_s = None  # mid-session the endpoint is waited for until stopped
    patience.on_event = agent.record_outage
    return agent


def _local_template(family: ModelFamily) -> str | None:
    # Recorded only when it came from local files: a shipped family's is named by the family.
    return family.template().source if family.name == "model-dir" and family.template else None


def summary_line(stats: SessionStats, recording: Path) -> str:
    """Turns, actions, trims, recoveries and latency of a session, in one line."""
    lat = sorted(stats.latencies_ms())
    median = f"{lat[len(lat) // 2]:.0f} ms" if lat else "-"
    return (
        f"{len(stats.turns)} turns, {stats.actions} actions, {stats.trims} trims, "
        f"{stats.overflow_recoveries} overflow recoveries, {stats.events} events, "
        f"median latency event->first action {median}; recording {recording}"
    )



"""Startup checks and the wiring of the model side into an :class:`~emil.agent.Agent`.

The checks run in order, each with a message that says what to change:

1. LLM endpoint reachable: transient, so it is waited for with backoff (and said so in the log)
   for ``endpoint_wait_s`` (unset = until stopped).
2. Model served: a configured model the server does not list is a configuration error that
   lists what it serves; "auto" takes the served one.
3. Window from the server (``max_model_len``); a configured window may only lower it.
4. Model family resolved once (emil.context.family): the ``model_family`` setting, else the
   tokenizer/chat_template settings, else the served model's root then id, else the server's
   /tokenize; then checked against the server's /tokenize of a probe prompt (a mismatch: exit
   2 for a family set by the operator, the server's counting for one guessed from the name).
   Logged with where it came from; never another family's template.
5. Budget: output reserve + pinned prompt (system prompt + tool specs) must fit the window.

(6., the Minecraft server, is the bridge's: see :mod:`emil.agent.session`.) Configuration
errors are never retried; they end the run with exit code 2.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from emil.agent.context_port import ManagedContext
from emil.agent.loop import Agent, AgentOptions
from emil.agent.model_family import resolve_family, verify_family
from emil.agent.persona import load_system_prompt
from emil.agent.ports import Completer, WorldPort
from emil.agent.turnstats import SessionStats
from emil.config import Settings
from emil.context.budget import Budget
from emil.context.family import ModelFamily, server_family
from emil.context.history import History, Message
from emil.context.ladder import LadderConfig
from emil.context.manager import ContextManager
from emil.context.rungs import NotesSource, RefreshNotes, Summarise, SummarySource
from emil.context.tokens import ServerCounting, ServerTokenizeCounter, TokenCounter
from emil.exceptions import ConfigurationError, EndpointUnavailable
from emil.llm.client import OpenAIClient, ServedModel
from emil.llm.retry import Backoff, RecoveryEvent, complete_with_recovery
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.perception import PerceptionPolicy
from emil.recording import HeaderRecord, Recorder

__all__ = [
    "ModelSetup",
    "agent_options",
    "build_agent",
    "check_model",
    "default_recording_path",
    "new_client",
    "summary_line",
    "wait_for_endpoint",
]

_log = logging.getLogger("emil.startup")


def default_recording_path(settings: Settings) -> Path:
    """recording_dir/emil-<UTC time>-<bot>.jsonl"""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return settings.recording_dir / f"emil-{stamp}-{settings.bot_name}.jsonl"


async def wait_for_endpoint(llm: OpenAIClient, settings: Settings) -> ServedModel:
    """Discover the served model, waiting out an unreachable endpoint with backoff."""
    backoff = Backoff(base=0.5, cap=10.0)
    started = time.monotonic()
    while True:
        try:
            return await llm.discover()
        except EndpointUnavailable as e:
            waited = time.monotonic() - started
            if settings.endpoint_wait_s is not None and waited >= settings.endpoint_wait_s:
                raise EndpointUnavailable(
                    f"LLM endpoint {settings.endpoint} still unreachable after {waited:.0f} s ({e}); "
                    "start vLLM there or set endpoint to where it listens"
                ) from e
            _log.warning("LLM endpoint %s unreachable (%s); waiting for it (%.0f s so far)", settings.endpoint, e, waited)
            limit = None if settings.endpoint_wait_s is None else max(0.0, settings.endpoint_wait_s - waited)
            await backoff.wait(f"endpoint {settings.endpoint} unreachable", max_delay=limit)


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


def _completer(llm: OpenAIClient, context: ManagedContext, settings: Settings, window: int) -> Completer:
    async def complete(assemble: Any, on_event: Any) -> Completion:
        def notify(event: RecoveryEvent) -> None:
            on_event(event)

        def calibrate(predicted: int, server: int, lower_bound: bool) -> None:
            if not lower_bound:
                context.observe_usage(predicted, server)

        async def count_exact(request: ChatRequest) -> int | None:
            return await llm.count_prompt_tokens(request)

        return await complete_with_recovery(
            llm, assemble, window=window, max_overflow_retries=settings.max_overflow_retries,
            on_event=notify, calibrate=calibrate, count_exact=count_exact,
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


async def check_model(s: Settings, llm: OpenAIClient) -> ModelSetup:
    """Startup checks 1-5 (see the module docstring) against an open client."""
    served = await wait_for_endpoint(llm, s)
    window = _window(served, s)
    def counted_by_server() -> ModelFamily:
        return server_family(
            ServerCounting(s.endpoint, served.id, api_key=s.api_key, timeout=min(30.0, s.request_timeout_s))
        )

    resolved = resolve_family(
        setting=s.model_family,
        served=(served.root, served.id),
        tokenizer=s.tokenizer,
        chat_template=str(s.chat_template) if s.chat_template else None,
        server=counted_by_server,
    )
    resolved = await verify_family(
        resolved, ServerTokenizeCounter(s.endpoint, served.id, api_key=s.api_key),
        enable_thinking=s.enable_thinking, preserve_thinking=s.preserve_thinking, server=counted_by_server,
    )
    family = resolved.family
    counter = family.tokenizer()
    budget = Budget(window, output_reserve=s.output_reserve)
    if s.prompt_budget is not None:
        if s.prompt_budget > budget.prompt_budget:
            raise ConfigurationError(
                f"prompt_budget {s.prompt_budget} > window {window} - output_reserve {s.output_reserve} - margin "
                f"{budget.margin} = {budget.prompt_budget}; lower prompt_budget or leave it on auto"
            )
        # A smaller budget is a larger margin: the manager keeps the slack unused.
        budget = Budget(window, output_reserve=s.output_reserve, margin=window - s.output_reserve - s.prompt_budget)
    _log.info("llm %s: model %s, window %d, model family %s (%s; from %s), tokenizer %s, "
              "prompt budget %d, output reserve %d", s.endpoint, served.id, window, family.name,
              family.label, resolved.source, counter.name, budget.prompt_budget, s.output_reserve)
    return ModelSetup(llm, served, window, counter, family, resolved.source, budget)


def new_client(s: Settings, tool_validator: Callable[[ToolCall], ToolCall] | None = None) -> OpenAIClient:
    """The live client for the configured endpoint; ``tool_validator`` checks calls against the tools."""
    return OpenAIClient(
        s.endpoint, model=None if s.model == "auto" else s.model, api_key=s.api_key,
        timeout=s.request_timeout_s, tool_validator=tool_validator,
    )


def agent_options(s: Settings) -> AgentOptions:
    """Loop options from settings."""
    return AgentOptions(
        perception=PerceptionPolicy(
            bot_name=s.bot_name, low_health=s.low_health,
            hostile_urgent_distance=s.hostile_urgent_distance, chat_debounce_s=s.chat_debounce_s,
        ),
        step_limit=s.step_limit, action_timeout_s=s.action_timeout_s, output_reserve=s.output_reserve,
        enable_thinking=s.enable_thinking, preserve_thinking=s.preserve_thinking, temperature=s.temperature,
    )


def build_agent(
    s: Settings,
    model: ModelSetup,
    world: WorldPort,
    tools: list[dict[str, Any]],
    recorder: Recorder,
    *,
    history: History | None = None,
    notes: NotesSource | None = None,
    summaries: SummarySource | None = None,
) -> Agent:
    """Check the pinned prompt fits (BudgetError otherwise), write the header, build the agent.

    ``notes``: the pinned notes block (emil.memory), after the system prompt from the first
    request on, brought up to date at trims by the ``refresh_notes`` rung (``trim_rungs``
    without it: the block as it was at start, for the whole session). ``summaries``: the
    ``summarise`` rung's summariser (emil.memory.summariser)."""
    tool_names = [t["function"]["name"] for t in tools]
    system_prompt = load_system_prompt(
        s.prompts_dir, name=s.bot_name, tools=tool_names, operators=s.operators, allow_commands=s.allow_commands
    )
    # A kwarg the family's template does not read is neither counted with nor sent.
    preserve = bool(model.family.template_kwargs(enable_thinking=s.enable_thinking,
                                                 preserve_thinking=s.preserve_thinking).get("preserve_thinking"))
    manager = ContextManager(
        model.counter, model.budget, system_prompt, tools, s.enable_thinking,
        family=model.family, preserve_thinking=preserve, ladder=LadderConfig(rungs=s.trim_rungs),
        rungs=[RefreshNotes(notes), Summarise(summaries)],
    )
    start = history if history is not None else History()
    if notes is not None and (text := notes.text()):
        start = dataclasses.replace(start, notes=Message.memory(text))
    context = ManagedContext(manager, system_prompt, tools, history=start, llm=model.llm)
    context.check_fits(notes_bound=s.memory_tokens if notes is not None else 0)
    recorder.write(
        HeaderRecord(
            session_id=uuid.uuid4().hex[:12],
            settings=s.public_dump(), model=model.served.id, tokenizer=model.counter.name,
            chat_template=_local_template(model.family), model_family=model.family.name, window=model.window,
            output_reserve=s.output_reserve, prompt_budget=model.budget.prompt_budget,
            enable_thinking=s.enable_thinking, preserve_thinking=preserve, system_prompt=system_prompt, tools=tools, bot_name=s.bot_name,
        )
    )
    if history is not None:
        for message in history.messages():
            recorder.message(message)
    return Agent(
        world=world, context=context, completer=_completer(model.llm, context, s, model.window),
        recorder=recorder, options=dataclasses.replace(agent_options(s), preserve_thinking=preserve), name=s.bot_name,
    )


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



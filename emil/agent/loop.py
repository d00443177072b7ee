"""The async turn loop: game events in, tool-calling turns out.

One :class:`Agent` runs two tasks. The *pump* reads game events, lets perception triage them,
records them, and interrupts a running action when something urgent happens. The *turn loop*
waits until perception says a turn should start, then runs it with the turn engine
(:mod:`emil.agent.turn`: the rules of a turn's messages, shared with replay and the synthetic
day), giving it the live parts: the recovering completer inside the interrupt's cancel scope,
the world with the action's time limit and abort, the session's recording.

Model mistakes (bad JSON, unknown tools, invalid arguments, failed actions) are tool results
the model reads next step. The failure policy is per turn (docs/reliability.md): an endpoint
outage is waited out by the completer (reflexes keep acting in the JS module meanwhile); a
server fault past its retries, a prompt that cannot be made to fit, a world error or a bug
fails *this turn* (an error record, the next event starts a new one). Only a configuration
error or a service gone past its patience leave ``run()``, and :meth:`Agent.stop` ends it.

Urgent events interrupt: a running action at once, a model call in flight after a short grace
(a hit, a hostile close by, low health, death, or "stop" from an operator or a requester), and
one player's urgent lines at most once per ``urgent_interval_s``. A stop cancels whatever is in
flight within the same event-loop tick; no action starts after it.
"""

from __future__ import annotations

import logging
import math
import time
import traceback
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from emil.agent.between_turns import BetweenTurns
from emil.agent.interrupts import Interrupts
from emil.agent.ports import Completer, ContextPort, Interrupted, Recall
from emil.agent.request_shape import RequestShape
from emil.agent.turn import TurnEngine
from emil.agent.turnstats import SessionStats, TurnStats
from emil.backoff import OutageEvent
from emil.config import Settings
from emil.exceptions import (
    ConfigurationError,
    ContextOverflowError,
    EndpointConfigError,
    EndpointUnavailable,
    PatienceExhausted,
    RequestRejected,
    ServerFault,
    WorldError,
)
from emil.llm.classify import config_hint
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.types import Completion, ToolCall
from emil.recording import (
    ErrorRecord,
    EventRecord,
    Recorder,
    outage_record,
)
from emil.senses.perception import Perception, Triaged
from emil.world.events import Death, GameEvent
from emil.world.port import TurnContext, WorldPort
from emil.world.tool import Outcome

__all__ = ["Agent", "AgentOptions"]

_log = logging.getLogger("emil.agent")

ABORT_LIMIT_S = 5.0
"""How long the world gets to abort an action that timed out or was interrupted."""

REJECTED_TURNS_LIMIT = 3
"""Turns in a row whose request the server refuses as invalid before Emil stops (exit 2): one
refused request is that turn's content; every request refused is the setup."""


@dataclass(frozen=True)
class AgentOptions:
    """What the loop needs beyond the settings (which it reads itself): values found at start,
    and two timings the tests shorten."""

    observation_cap_tokens: int | None = None
    """Token cap of one observation (None: no cap); floods are coalesced to fit. The setting, or
    a share of the prompt budget when it is on auto (emil.agent.turn.observation_cap)."""
    preserve_thinking: bool | None = None
    """Whether ``preserve_thinking`` is sent (None: the setting): only when the served family's
    template reads it (emil.model.family.ModelFamily.sends_preserve_thinking)."""
    snapshot_timeout_s: float = 5.0
    stop_abort_s: float = 1.0
    """On a stop, how long the world gets to abort a running action."""


class Agent:
    """Emil's mind for one bot: perception, turns, dispatch, recording.

    ``run()`` returns when :meth:`stop` is called, ``max_turns`` turns ran, or the world's event
    stream ends; it raises only :class:`ConfigurationError` (the operator must act) and
    :class:`PatienceExhausted` (a service gone past its patience). A turn that fails for any
    other reason is recorded and the session goes on.
    """

    def __init__(
        self,
        *,
        world: WorldPort,
        context: ContextPort,
        completer: Completer,
        recorder: Recorder,
        settings: Settings | None = None,
        options: AgentOptions | None = None,
        perception: Perception | None = None,
        name: str = "Emil",
        recall: Recall | None = None,
    ) -> None:
        self.world = world
        self.context = context
        self.completer = completer
        self.recorder = recorder
        self.settings = s = settings or Settings()
        """What the loop reads: step_limit, action_timeout_s, interrupt_grace_s, urgent_interval_s,
        operators, the request's shape (emil.agent.request_shape)."""
        self.options = options or AgentOptions()
        self.name = name
        self.perception = perception or Perception(s)
        self.stats = SessionStats()
        self._turn_no = 0
        self._turn_limit: int | None = None
        """No turn starts past this number (:meth:`limit_turns`)."""
        self._wake = anyio.Event()
        self._stop = anyio.Event()
        self._world_ended = False
        self._action_scope: anyio.CancelScope | None = None
        self._interrupt_reason: str | None = None
        self.interrupts = Interrupts(s)
        """Which urgent event interrupts what, and the turn's requesters."""
        self._in_turn = False
        self._current: TurnStats | None = None
        self._rejected_in_a_row = 0
        """Turns in a row whose request the server rejected as invalid (RequestRejected)."""
        self._turn_scope: anyio.CancelScope | None = None
        self._call_scope: anyio.CancelScope | None = None
        self._call_interrupted_by = ""
        self.stop_reason = ""
        self._log = _log.getChild(name) if name != "Emil" else _log
        self._between = BetweenTurns(lambda: self.context.prepare())
        o = self.options
        self.engine = TurnEngine(
            context=context, model=self._call_model, world=_LiveWorld(world, self), recorder=recorder,
            shape=RequestShape.of(
                s, tools=context.tools or None,
                preserve_thinking=s.preserve_thinking if o.preserve_thinking is None else o.preserve_thinking,
            ),
            step_limit=s.step_limit, observation_cap=o.observation_cap_tokens, recall=recall, log=self._log,
        )
        """The turn's rules (emil.agent.turn), with this loop's parts."""

    # --- public -------------------------------------------------------------------------

    def stop(self, reason: str = "stop requested") -> None:
        """End the run now: a model call or action in flight is cancelled, none starts after."""
        if not self._stop.is_set():
            self.stop_reason = reason
        self._stop.set()
        self._wake.set()
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    def limit_turns(self, more: int) -> None:
        """Start at most ``more`` turns from now on, a turn in progress counted among them; then
        :meth:`run` returns once the last of them is over (the bench's turn cap counts from the
        player's first line, whatever turns came before it)."""
        self._turn_limit = self._turn_no + more - (1 if self._in_turn else 0)
        self._wake.set()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called (or the world's event stream ended)."""
        return self._stop.is_set()

    def record_outage(self, event: OutageEvent) -> None:
        """Record a service's retry or state change, placed in the current turn and step."""
        current = self._current if self._in_turn else None
        self.recorder.write(outage_record(event, turn=current.turn if current else None,
                                          step=current.steps if current else None))

    async def run(self, *, max_turns: int | None = None) -> SessionStats:
        """Play until stopped; see the class docstring."""
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump)
            tg.start_soon(self._between.run)
            try:
                await self._turns(max_turns)
            except Exception as e:  # re-raised below, unwrapped from the task group
                failure = e
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return self.stats

    # --- events -------------------------------------------------------------------------

    async def _pump(self) -> None:
        async for event in self.world.events():
            if self.perception.echo(event):
                # The bot reports every action's end; for the ones this loop awaited, the model
                # already has the result as a tool result, so the echo must not start a turn.
                self.recorder.write(EventRecord(event=event.model_dump(mode="json"), priority="echo", turn=self._turn_no if self._in_turn else None))
                continue
            triaged = self.perception.add(event, time.monotonic())
            self.stats.events += 1
            self.recorder.write(
                EventRecord(
                    event=event.model_dump(mode="json"),
                    priority=triaged.priority,
                    turn=self._turn_no if self._in_turn else None,
                    npc=triaged.npc,
                )
            )
            if triaged.priority == "urgent":
                self._maybe_interrupt(triaged)
            if triaged.priority != "ambient":
                self._wake.set()
        self._world_ended = True
        self._log.warning("the world's event stream ended; stopping")
        self.stop("the world's event stream ended")

    def _maybe_interrupt(self, triaged: Triaged) -> None:
        if isinstance(triaged.event, Death):
            self.perception.clear_actions()
        why = triaged.why or triaged.event.kind
        if self._action_scope is not None:
            if self.interrupts.claim(triaged):
                self._interrupt_reason = why
                self._action_scope.cancel()
        elif self._call_scope is not None and self.interrupts.cancels_call(triaged) and self.interrupts.claim(triaged):
            # Give an answer about to arrive a moment to land; then start over with the news.
            self._call_interrupted_by = why
            grace = anyio.current_time() + self.settings.interrupt_grace_s
            self._call_scope.deadline = min(self._call_scope.deadline, grace)

    # --- turns --------------------------------------------------------------------------

    async def _turns(self, max_turns: int | None) -> None:
        while not self._stop.is_set():
            if any(n is not None and self._turn_no >= n for n in (max_turns, self._turn_limit)):
                return
            wait = self.perception.wait_s()
            if wait is None or wait > 0:
                self._wake = anyio.Event()
                self._between.idle()  # the context may prepare the next trim meanwhile
                with anyio.move_on_after(math.inf if wait is None else wait):
                    await self._wake.wait()
                self._between.busy()
                continue
            await self._turn(self.perception.take())

    async def _turn(self, triaged: list[Triaged]) -> None:
        self._turn_no += 1
        turn = self._turn_no
        urgent = [t for t in triaged if t.priority == "urgent"]
        reasons = [t.why for t in (urgent or triaged) if t.why]
        reason = "; ".join(dict.fromkeys(reasons)) or "events"
        stats = TurnStats(turn=turn, reason=reason, started=time.monotonic(), event_at=min((t.at for t in triaged), default=None))
        self.stats.turns.append(stats)
        self.interrupts.begin_turn(triaged)
        self._in_turn = True
        self._current = stats
        scope = anyio.CancelScope()
        self._turn_scope = scope
        if self._stop.is_set():
            scope.cancel()
        try:
            with scope:
                try:
                    await self.engine.run(
                        stats, triaged, ambient=self.perception.ambient, reason=reason,
                        interruption=lambda call: self.interrupts.pending(self.perception),
                        stopping=lambda call: self._stop.is_set(), limit_s=self.settings.action_timeout_s,
                    )
                    self._rejected_in_a_row = 0
                except Interrupted as e:
                    self._interrupted(stats, e.reason)
                except (ConfigurationError, PatienceExhausted):
                    raise
                except RequestRejected as e:
                    self._rejected(stats, e)
                except (ContextOverflowError, ServerFault, EndpointUnavailable) as e:
                    self._fail_turn(stats, e, where="llm")
                except WorldError as e:
                    self._fail_turn(stats, e, where="world")
                except Exception as e:  # a bug: this turn fails, the session goes on (and says so)
                    self._fail_turn(stats, e, where="turn", bug=True)
            if scope.cancelled_caught or (self._stop.is_set() and not stats.interrupted):
                self._interrupted(stats, self.stop_reason or "stop")
                await self._abort(self.options.stop_abort_s)
        finally:
            self._turn_scope = None
            self._in_turn = False
            self.interrupts.end_turn()
            stats.ended = time.monotonic()
            self.recorder.write(stats.record())
            self._log.info("%s", stats.log_line())

    def _interrupted(self, stats: TurnStats, why: str) -> None:
        stats.interrupted = True
        stats.interrupted_by = why
        self._log.info("turn %d interrupted: %s", stats.turn, why)

    def _rejected(self, stats: TurnStats, error: RequestRejected) -> None:
        """A request the server refused as invalid fails its turn; when every request of
        REJECTED_TURNS_LIMIT turns in a row is refused, it is the setup (a sampling option the
        server does not take, say), not one turn's content: a configuration error."""
        self._rejected_in_a_row += 1
        if self._rejected_in_a_row >= REJECTED_TURNS_LIMIT:
            raise EndpointConfigError(
                f"the server rejected the request of {self._rejected_in_a_row} turns in a row: "
                + config_hint(error.status, error.server_message),
                status=error.status, server_message=error.server_message,
            ) from error
        self._fail_turn(stats, error, where="llm")

    def _fail_turn(self, stats: TurnStats, error: Exception, *, where: str, bug: bool = False) -> None:
        stats.failed = f"{type(error).__name__}: {error}"[:200]
        self.stats.errors += 1
        if bug:
            detail = "".join(traceback.format_exception(error))[-4000:]
            self._log.error("turn %d failed on a bug, the session goes on: %s: %s", stats.turn,
                            type(error).__name__, error, exc_info=error)
        else:
            detail = error.body if isinstance(error, ServerFault) else ""
            self._log.warning("turn %d failed, the session goes on: %s", stats.turn, error)
        self.recorder.write(ErrorRecord(turn=stats.turn, error_type=type(error).__name__, message=str(error),
                                        where=where, detail=detail))

    async def _abort(self, limit_s: float = ABORT_LIMIT_S) -> None:
        # One shielded scope with the deadline on it: a shield inside a caller's deadline would
        # make that deadline wait for this one (a stop's stop_abort_s waited the whole 5 s).
        with anyio.move_on_after(limit_s, shield=True):
            try:
                await self.world.abort()
            except Exception as e:  # the action is being dropped anyway; say so and go on
                self._log.warning("abort failed: %s", e)

    # --- the model ----------------------------------------------------------------------

    @property
    def waiting_for_model(self) -> bool:
        """A model call is in flight (what an urgent event would cancel after the grace)."""
        return self._call_scope is not None

    async def _call_model(self, assemble: Assembler, on_event: Callable[[RecoveryEvent], None]) -> Completion:
        """One model call with recovery (the completer waits out outages). An urgent event
        cancels it after the grace (:class:`Interrupted`); failures propagate to the turn."""
        call = anyio.CancelScope()
        self._call_scope = call
        self._call_interrupted_by = ""
        try:
            with call:
                completion = await self.completer(assemble, on_event)
        finally:
            self._call_scope = None
        if call.cancelled_caught:
            raise Interrupted(f"{self._call_interrupted_by} (model call cancelled)")
        return completion


class _LiveWorld:
    """The world as the turn engine sees it, live: a :class:`~emil.world.port.WorldPort` wrapped
    around the session's (``world``), adding what the loop owns: the snapshot within its time
    limit, and each call in the loop's action scope, within the turn's time limit
    (``turn.limit_s``, with a backstop past it: the bridge has each tool's own). An urgent event
    cancels the call (the world aborts the job) and the turn hears :class:`Interrupted`."""

    def __init__(self, world: WorldPort, agent: Agent) -> None:
        self.world = world
        self.agent = agent

    def events(self) -> AsyncIterator[GameEvent]:
        return self.world.events()

    async def snapshot(self) -> Mapping[str, Any] | None:
        with anyio.fail_after(self.agent.options.snapshot_timeout_s):
            snap = await self.world.snapshot()
        return None if snap is None else dict(snap)

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return await self.world.begin_turn(turn)

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        agent = self.agent
        agent._interrupt_reason = None
        agent.perception.dispatched(call.name)
        timeout = turn.limit_s
        with anyio.CancelScope() as scope:
            agent._action_scope = scope
            try:
                with anyio.fail_after(timeout + min(5.0, timeout)):  # backstop: the bridge has its own
                    outcome = await self.world.run_tool(call, turn)
            except TimeoutError:
                outcome = Outcome(False, f"error: {call.name} timed out after {timeout:g} s and was aborted",
                                  fate="timed_out")
                await agent._abort()
            finally:
                agent._action_scope = None
        if scope.cancelled_caught:
            await agent._abort()
            raise Interrupted(agent._interrupt_reason or "interrupted")
        return outcome

    async def abort(self) -> None:
        await self.world.abort()

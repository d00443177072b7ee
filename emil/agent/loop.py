"""The async turn loop: game events in, tool-calling turns out.

One :class:`Agent` runs two tasks. The *pump* reads game events, lets perception triage them,
records them, and interrupts a running action when something urgent happens. The *turn loop*
waits until perception says a turn should start, then runs it:

    snapshot + new events -> observation message -> history
    repeat up to step_limit: assemble (budgeted) -> complete (with overflow recovery)
                             -> assistant message -> each tool call dispatched with a timeout
                             -> tool result messages
    until the model answers without tools

Model mistakes (bad JSON, unknown tools, invalid arguments, failed actions) are tool results
the model reads next step. An unreachable endpoint is waited out with backoff (reflexes keep
acting in the JS module meanwhile); a configuration error ends the run; a prompt that cannot be
made to fit ends the turn, not the session. Bugs propagate.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from emil.agent.between_turns import BetweenTurns
from emil.agent.ports import Completer, ContextPort, Message, Outcome, WorldPort
from emil.agent.turnstats import SessionStats, TurnStats
from emil.events import ActionFinished, Chat, Damage, Death, GameEvent, HostileNearby
from emil.exceptions import ContextOverflowError, EndpointUnavailable
from emil.llm.retry import Backoff
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.perception import Perception, PerceptionPolicy, Triaged, format_events, format_status_line
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    EventRecord,
    ObservationRecord,
    OverflowRecord,
    Recorder,
    RecoveryRecord,
    RequestRecord,
    ToolResultRecord,
)

__all__ = ["Agent", "AgentOptions"]

_log = logging.getLogger("emil.agent")


@dataclass(frozen=True)
class AgentOptions:
    """Loop settings (from :class:`emil.config.Settings`)."""

    perception: PerceptionPolicy = field(default_factory=PerceptionPolicy)
    step_limit: int = 8
    action_timeout_s: float = 240.0
    output_reserve: int = 6144
    enable_thinking: bool = False
    preserve_thinking: bool = False
    temperature: float | None = None
    snapshot_timeout_s: float = 5.0
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 10.0


def _urgent_key(event: GameEvent) -> str:
    """Same key = same emergency: a second hit by the same attacker does not abort the response."""
    match event:
        case Damage():
            return f"damage:{event.attacker}"
        case HostileNearby():
            return f"hostile:{event.name}"
        case Chat():
            return f"chat:{event.sender}:{event.text}"
        case _:
            return event.kind


class _Interrupted(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Agent:
    """Emil's mind for one bot: perception, turns, dispatch, recording.

    ``run()`` returns when ``stop`` is set, ``max_turns`` turns ran, or the world's event stream
    ends; it raises configuration errors (the operator must act) and bugs.
    """

    def __init__(
        self,
        *,
        world: WorldPort,
        context: ContextPort,
        completer: Completer,
        recorder: Recorder,
        options: AgentOptions | None = None,
        name: str = "Emil",
    ) -> None:
        self.world = world
        self.context = context
        self.completer = completer
        self.recorder = recorder
        self.options = options or AgentOptions()
        self.name = name
        self.perception = Perception(self.options.perception)
        self.stats = SessionStats()
        self._turn_no = 0
        self._wake = anyio.Event()
        self._stop = anyio.Event()
        self._world_ended = False
        self._action_scope: anyio.CancelScope | None = None
        self._interrupt_reason: str | None = None
        self._turn_keys: set[str] = set()
        self._requesters: frozenset[str] = frozenset()
        """Every player whose words are in this turn (operator-only acts need all of them)."""
        self._in_turn = False
        self._dispatched: Counter[str] = Counter()
        """Actions this loop dispatched whose action_finished echo has not arrived yet."""
        self._log = _log.getChild(name) if name != "Emil" else _log
        self._between = BetweenTurns(lambda: self.context.prepare())

    # --- public -------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish the current step and return."""
        self._stop.set()
        self._wake.set()

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
            if isinstance(event, ActionFinished) and self._dispatched[event.action] > 0:
                # The bot reports every action's end; for the ones this loop awaited, the model
                # already has the result as a tool result, so the echo must not start a turn.
                self._dispatched[event.action] -= 1
                self.recorder.write(EventRecord(event=event.model_dump(mode="json"), priority="echo", turn=self._turn_no if self._in_turn else None))
                continue
            triaged = self.perception.add(event, time.monotonic())
            self.stats.events += 1
            self.recorder.write(
                EventRecord(
                    event=event.model_dump(mode="json"),
                    priority=triaged.priority,
                    turn=self._turn_no if self._in_turn else None,
                )
            )
            if triaged.priority == "urgent":
                self._maybe_interrupt(triaged)
            if triaged.priority != "ambient":
                self._wake.set()
        self._world_ended = True
        self._log.warning("the world's event stream ended; stopping")
        self.stop()

    def _interrupt_for(self, triaged: Triaged) -> bool:
        return isinstance(triaged.event, Death) or _urgent_key(triaged.event) not in self._turn_keys

    def _maybe_interrupt(self, triaged: Triaged) -> None:
        if isinstance(triaged.event, Death):
            self.perception.clear_actions()
        if self._action_scope is not None and self._interrupt_for(triaged):
            self._interrupt_reason = triaged.why or triaged.event.kind
            self._action_scope.cancel()

    def _pending_interrupt(self) -> str | None:
        for t in self.perception.pending:
            if t.priority == "urgent" and self._interrupt_for(t):
                return t.why or t.event.kind
        return None

    # --- turns --------------------------------------------------------------------------

    async def _turns(self, max_turns: int | None) -> None:
        while not self._stop.is_set():
            if max_turns is not None and self._turn_no >= max_turns:
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

    async def _snapshot(self) -> dict[str, Any] | None:
        try:
            with anyio.fail_after(self.options.snapshot_timeout_s):
                return dict(await self.world.snapshot())
        except Exception as e:  # a missing status must not cost the turn
            self.recorder.write(ErrorRecord(turn=self._turn_no, error_type=type(e).__name__, message=str(e), where="snapshot"))
            self._log.warning("snapshot failed (%s); observing without status", e)
            return None

    async def _turn(self, triaged: list[Triaged]) -> None:
        self._turn_no += 1
        turn = self._turn_no
        urgent = [t for t in triaged if t.priority == "urgent"]
        reasons = [t.why for t in (urgent or triaged) if t.why]
        reason = "; ".join(dict.fromkeys(reasons)) or "events"
        stats = TurnStats(turn=turn, reason=reason, started=time.monotonic(), event_at=min((t.at for t in triaged), default=None))
        self.stats.turns.append(stats)
        self._turn_keys = {_urgent_key(t.event) for t in urgent}
        self._requesters = frozenset(t.event.sender for t in triaged if isinstance(t.event, Chat))
        self._in_turn = True
        try:
            snapshot = await self._snapshot()
            event_times = [t.event.t for t in triaged]
            stored = self.context.add(
                Message(
                    role="user",
                    kind="observation",
                    content=format_events(triaged),
                    status=format_status_line(snapshot, self.perception.ambient),
                    event_time=min(event_times, default=time.time()),
                ),
                new_turn=True,
            )
            ref = self.recorder.message(stored, turn=turn)
            self.recorder.write(
                ObservationRecord(turn=turn, ref=ref, reason=reason, events=len(triaged), urgent=bool(urgent), snapshot=snapshot)
            )
            await self._steps(stats)
        finally:
            self._in_turn = False
            self._turn_keys = set()
            stats.ended = time.monotonic()
            self.recorder.write(stats.record())
            self._log.info("%s", stats.log_line())

    async def _steps(self, stats: TurnStats) -> None:
        for step in range(1, self.options.step_limit + 1):
            stats.steps = step
            completion = await self._complete(stats, step)
            if completion is None:
                return
            calls = completion.tool_calls
            stored = self.context.add(
                Message(
                    role="assistant",
                    kind="assistant",
                    content=completion.content,
                    tool_calls=tuple(_history_call(c) for c in calls),
                    reasoning=completion.reasoning,
                )
            )
            ref = self.recorder.message(stored, turn=stats.turn)
            self.recorder.write(CompletionRecord.from_completion(completion, turn=stats.turn, step=step, assistant_ref=ref))
            if not calls:
                return
            if await self._run_calls(stats, step, calls):
                return
        self._log.info("turn %d reached the step limit (%d)", stats.turn, self.options.step_limit)

    async def _run_calls(self, stats: TurnStats, step: int, calls: list[ToolCall]) -> bool:
        """Dispatch a completion's calls in order; True when the turn was interrupted."""
        interrupted: str | None = None
        for call in calls:
            if interrupted is None:
                interrupted = self._pending_interrupt()
            if interrupted is not None:
                outcome = Outcome(False, f"not run: interrupted ({interrupted})")
            else:
                if stats.first_action_at is None:
                    stats.first_action_at = time.monotonic()
                stats.actions += 1
                try:
                    outcome = await self._dispatch(call)
                except _Interrupted as e:
                    interrupted = e.reason
                    outcome = Outcome(False, f"aborted: interrupted ({e.reason})")
            self._add_result(stats.turn, step, call, outcome)
        if interrupted is not None:
            stats.interrupted = True
            self._log.info("turn %d interrupted: %s", stats.turn, interrupted)
            return True
        return False

    async def _dispatch(self, call: ToolCall) -> Outcome:
        if call.error is not None or call.arguments is None:
            why = call.error or f"arguments are not a JSON object: {call.raw_arguments!r}"
            return Outcome(False, f"error: {why}")
        self._interrupt_reason = None
        self._dispatched[call.name] += 1
        started = time.monotonic()
        timeout = self.options.action_timeout_s
        with anyio.CancelScope() as scope:
            self._action_scope = scope
            try:
                with anyio.fail_after(timeout + min(5.0, timeout)):  # backstop: the bridge has its own
                    outcome = await self.world.run_tool(call, limit_s=timeout, requesters=self._requesters)
            except TimeoutError:
                outcome = Outcome(False, f"error: {call.name} timed out after {timeout:g} s and was aborted")
                await self._abort()
            finally:
                self._action_scope = None
        if scope.cancelled_caught:
            await self._abort()
            raise _Interrupted(self._interrupt_reason or "interrupted")
        if outcome.elapsed_ms is None:
            outcome = Outcome(outcome.ok, outcome.text, outcome.data, (time.monotonic() - started) * 1000)
        return outcome

    async def _abort(self) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
            try:
                await self.world.abort()
            except Exception as e:  # the action is being dropped anyway; say so and go on
                self._log.warning("abort failed: %s", e)

    def _add_result(self, turn: int, step: int, call: ToolCall, outcome: Outcome) -> None:
        stored = self.context.add(
            Message(role="tool", kind="tool_result", content=outcome.text, tool_call_id=call.id, name=call.name)
        )
        ref = self.recorder.message(stored, turn=turn)
        self.recorder.write(
            ToolResultRecord(
                turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments,
                ok=outcome.ok, text=outcome.text, data=_jsonable(outcome.data), elapsed_ms=outcome.elapsed_ms, ref=ref,
            )
        )

    # --- the model ----------------------------------------------------------------------

    async def _complete(self, stats: TurnStats, step: int) -> Completion | None:
        """One model call with recovery; waits out endpoint outages. None = give up the turn."""
        backoff = Backoff(self.options.backoff_base_s, self.options.backoff_cap_s)
        outage_since: float | None = None
        while True:
            try:
                completion = await self.completer(self._assembler(stats, step), self._on_recovery(stats))
            except EndpointUnavailable as e:
                if outage_since is None:
                    outage_since = time.monotonic()
                    self.recorder.write(ErrorRecord(turn=stats.turn, error_type=type(e).__name__, message=str(e), where="llm"))
                delay = backoff.next_delay()
                self._log.warning(
                    "LLM endpoint unavailable (%s); retry %d in %.1f s, down for %.0f s; reflexes keep acting",
                    e, backoff.attempt, delay, time.monotonic() - outage_since,
                )
                with anyio.move_on_after(delay):
                    await self._stop.wait()
                if self._stop.is_set():
                    return None
                continue
            except ContextOverflowError as e:
                self.recorder.write(ErrorRecord(turn=stats.turn, error_type=type(e).__name__, message=str(e), where="llm"))
                self._log.error("turn %d: the prompt could not be made to fit: %s", stats.turn, e)
                return None
            break
        if outage_since is not None:
            self._log.warning("LLM endpoint back after %.1f s", time.monotonic() - outage_since)
        now = time.monotonic()
        if stats.first_completion_at is None:
            stats.first_completion_at = now
        usage = completion.usage
        if usage is not None:
            stats.actual_prompt_tokens = usage.prompt_tokens
            stats.cached_tokens = usage.cached_tokens
            stats.completion_tokens += usage.completion_tokens
            if stats.predicted_prompt_tokens is not None:
                self.context.observe_usage(stats.predicted_prompt_tokens, usage.prompt_tokens)
        if completion.timings is not None:
            stats.model_seconds += completion.timings.total_s
        return completion

    def _assembler(self, stats: TurnStats, step: int) -> Callable[[int | None], ChatRequest]:
        attempt = -1

        def assemble(limit: int | None) -> ChatRequest:
            nonlocal attempt
            attempt += 1
            assembly = self.context.assemble(limit)
            for trim in assembly.trims:
                stats.trims += 1
                self.recorder.write(trim.model_copy(update={"turn": stats.turn}))
            refs = self.recorder.request_refs(assembly.messages, turn=stats.turn, ids=assembly.message_ids)
            request = ChatRequest(
                messages=assembly.messages,
                tools=self.context.tools or None,
                max_completion_tokens=self.options.output_reserve,
                temperature=self.options.temperature,
                enable_thinking=self.options.enable_thinking,
                preserve_thinking=self.options.preserve_thinking,
                predicted_prompt_tokens=assembly.predicted_tokens,
            )
            self.recorder.write(
                RequestRecord(
                    turn=stats.turn, step=step, attempt=attempt, refs=refs,
                    predicted_tokens=assembly.predicted_tokens, shared_prefix_tokens=assembly.shared_prefix_tokens,
                    limit=limit, max_completion_tokens=request.max_completion_tokens,
                    enable_thinking=request.enable_thinking, horizon_s=assembly.horizon_s,
                )
            )
            stats.predicted_prompt_tokens = assembly.predicted_tokens
            if stats.shared_prefix_tokens is None or step == 1:
                stats.shared_prefix_tokens = assembly.shared_prefix_tokens
            if stats.first_request_at is None:
                stats.first_request_at = time.monotonic()
            return request

        return assemble

    def _on_recovery(self, stats: TurnStats) -> Callable[[Any], None]:
        def on_event(ev: Any) -> None:
            kind = getattr(ev, "kind", "")
            if kind == "overflow":
                self.recorder.write(
                    OverflowRecord(
                        turn=stats.turn, window=ev.window, requested_output=ev.requested_output,
                        prompt_tokens=ev.server_prompt_tokens, prompt_is_lower_bound=bool(ev.prompt_is_lower_bound),
                        predicted_tokens=ev.predicted_prompt_tokens, message=ev.message or str(ev.family or ""),
                    )
                )
            elif kind == "retry":
                self.recorder.write(
                    RecoveryRecord(
                        turn=stats.turn, attempt=ev.attempt, limit=ev.next_limit,
                        predicted_tokens=ev.predicted_prompt_tokens, detail=f"server said {ev.server_prompt_tokens}",
                    )
                )
            elif kind == "recovered":
                stats.overflow_recoveries += 1
            elif kind == "gave_up":
                self.recorder.write(ErrorRecord(turn=stats.turn, error_type="overflow_gave_up", message=str(ev.message)))

        return on_event


def _history_call(call: ToolCall) -> dict[str, Any]:
    # Arguments that are not JSON would make the server's template (or vLLM) reject every later
    # prompt, so history keeps "{}" and the tool result tells the model what was wrong.
    args = call.raw_arguments if call.arguments is not None else "{}"
    return {"id": call.id, "name": call.name, "arguments": args}


def _jsonable(data: Any) -> Any:
    try:
        json.dumps(data)
    except (TypeError, ValueError):
        return repr(data)
    return data

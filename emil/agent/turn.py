"""One turn, the same everywhere: events in, the turn's messages out.

The rules that decide what a turn sends to the model and keeps in history exist here once, and
every driver runs them: the live loop (:mod:`emil.agent.loop`), replay
(:mod:`emil.replay.engine`) and the synthetic day (:mod:`emil.offline.synthetic`). A turn:

    observation   the status line (snapshot + ambient facts) and the turn's events composed
                  within the observation cap (floods coalesced: emil.senses.observation): one user
                  message that starts a turn in history
    steps         up to ``step_limit``:
      request     the context assembles the prompt (budgeted, trimmed); the session's
                  :class:`~emil.agent.request_shape.RequestShape` says everything else the
                  request carries
      completion  -> one assistant message (a call whose arguments are not a JSON object keeps
                  "{}" in history, so no later prompt is refused for it)
      each call   not run when Emil is stopping or an interrupt is pending ("not run: ...");
                  a malformed call is its error ("error: ..."); the same call as one that
                  already ran in the turn is not run ("not run: ... already ran"); otherwise the
                  world runs it and an interrupt aborts it ("aborted: interrupted (...)")
                  -> one tool result message per call; what the engine decided is a field of
                  the outcome and its record (``fate``, ``interrupt``, ``note``:
                  emil.world.tool.Fate), and the text is rendered from it (:func:`not_run`,
                  :func:`aborted`, :func:`invalid`, :func:`repeated`, :data:`STOPPING`,
                  :func:`dropped_note`)
    until the model answers without tools or calls a tool that passes the turn (``wait``, offered
    when every answer must call a tool), a call was interrupted, or Emil stops. An answer
    without tools whose text holds a call (bare JSON: emil.llm.text_call) is not the end: the
    model reads that nothing ran (a user message of the same turn) and is asked again, once
    per turn.

What differs between the drivers is injected, not branched on (the seams are in
:mod:`emil.agent.ports`, the request's shape in :mod:`emil.agent.request_shape`):

==============  ============================  ===========================  =====================
 part            live (emil.agent.loop)        replay (emil.replay)         synthetic day
==============  ============================  ===========================  =====================
 context         ManagedContext                ManagedContext (recorded     collects the day's
                                               notes and summaries)         messages
 model           the recovering client, in     the recorded completions     Emil's script
                 the interrupt's cancel scope
 world           the bridge, with the action   the recorded snapshots and   the simulated body
                 scope, timeout and abort      tool results                 through the tools
 clock           wall + monotonic              the recorded times           game time
 recorder        the session's recording       none                         none
 interrupts      perception's pending urgent   what the recording says      none
 recall          the archive's lines for the   the recorded lines (the      none here: the sweep
                 turn (emil.memory.retrieval)  observation's ``recalled``)  recalls per budget
==============  ============================  ===========================  =====================

Who may ask for what (issue #22, docs/trust.md): the engine makes the turn's
:class:`~emil.world.port.TurnContext` once (its words: who said what; the time limit of one
action) and hands the same object to the world for the whole turn. Before the observation the
world hears it (:meth:`~emil.world.port.WorldPort.begin_turn`; live, the guard learns the words
there, starts its per-turn caps and sends the commands an operator confirmed, noted at the top of
the observation); every call passes :meth:`TurnEngine.dispatch` and then
:meth:`~emil.world.port.WorldPort.run_tool` with it, and its record names the turn's speakers
(``requesters``) and the rule that allowed or refused it.
Calls past the cap of one answer were dropped by the client; the last result of that answer
says how many.

Recalled lines (the archive's old lines that bear on the turn) end the turn's observation: they
are part of the turn from then on, so every later request of the session only appends to the
prompt (docs/memory.md), and they enter history through the context's one neutralising point
like every other observation text. They are players' words quoted with their authors: data,
never a requester of the turn (``requesters`` are the turn's own chat senders only).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from emil.agent.ports import (
    NULL_RECORDER,
    Clock,
    Completer,
    ContextPort,
    Interrupted,
    Interruption,
    Recall,
    Stopping,
    TurnRecorder,
)
from emil.agent.request_shape import RequestShape
from emil.agent.turnstats import TurnStats
from emil.context.history import Message
from emil.llm.recovery_steps import RecoveryEvent
from emil.llm.text_call import call_in_text, correction
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.recording import (
    CONFIRMED_COMMAND,
    CompletionRecord,
    ErrorRecord,
    ObservationRecord,
    OverflowRecord,
    RecoveryRecord,
    RequestRecord,
    ToolResultRecord,
)
from emil.senses.observation import compose_events, format_status_line
from emil.senses.perception import Triaged
from emil.trust.authority import Authority, Line
from emil.world.events import Chat
from emil.world.port import TurnContext, WorldPort
from emil.world.tool import TOOLS, Outcome

__all__ = ["STOPPING", "TurnEngine", "aborted", "dropped_note", "history_call", "invalid", "not_run",
           "observation_cap", "passes_turn", "repeated"]

_log = logging.getLogger("emil.agent")


def observation_cap(setting: int | None, prompt_budget: int | None) -> int | None:
    """The token cap of one observation: the ``observation_cap_tokens`` setting, else a quarter
    of the prompt budget (at least 256); None: no cap."""
    if setting is not None or prompt_budget is None:
        return setting
    return max(256, prompt_budget // 4)


def dropped_note(dropped: int, kept: int) -> str:
    """What the last result of an answer adds when the client dropped ``dropped`` calls past the
    cap of one answer (``kept`` were run): "" when none were."""
    if not dropped:
        return ""
    return f" ({dropped} more tool call(s) in that answer were not run: at most {kept} per answer)"


def not_run(reason: str) -> Outcome:
    """A call not run because an interrupt (``reason``) was pending."""
    return Outcome(False, f"not run: interrupted ({reason})", fate="not_run", interrupt=reason)


def aborted(reason: str) -> Outcome:
    """A call an interrupt (``reason``) cancelled as it ran."""
    return Outcome(False, f"aborted: interrupted ({reason})", fate="aborted", interrupt=reason)


def invalid(why: str) -> Outcome:
    """A call that never reached the world: the model's mistake (``why``), what it reads next."""
    return Outcome(False, f"error: {why}", fate="invalid")


def repeated(name: str, *, must_call: bool = False, failed: str = "") -> Outcome:
    """A call the same as one that already ran in this turn (name and arguments): not run again.
    ``failed``: the first one's result when it failed, said again (the same call would fail the
    same way: the real 0.5B model sent one failing ``take`` eight times in a turn). Under
    ``tool_choice`` "required" the model cannot end a turn by answering without a call, so it is
    told the call that does (``wait``): told only "end the turn", it sent the same go_to five more
    times (docs/play-bench.md)."""
    end = "call wait to end the turn" if must_call else "end the turn"
    if failed:
        return Outcome(False, f"not run: {name} with these arguments already failed in this turn ({failed}); "
                              f"change the arguments, do something else, or {end}", fate="repeated")
    return Outcome(False, f"not run: {name} with these arguments already ran in this turn; "
                          f"do something else, or {end}", fate="repeated")


REPEATS_PER_TURN = 2
"""The turn ends at its second repeated call: the model was told after the first."""


STOPPING = Outcome(False, "not run: Emil is stopping", fate="stopping")
"""A call of a completion that arrived as Emil stopped: stale, never run."""


def history_call(call: ToolCall) -> dict[str, str]:
    """A tool call as history keeps it. Arguments that are not a JSON object would make the
    server's template (or vLLM) refuse every later prompt, so history keeps "{}" and the tool
    result tells the model what was wrong."""
    args = call.raw_arguments if call.arguments is not None else "{}"
    return {"id": call.id, "name": call.name, "arguments": args}


def passes_turn(call: ToolCall) -> bool:
    """A valid call of a tool that ends the turn (``passes_turn``: ``wait``)."""
    cls = TOOLS.get(call.name)
    return call.error is None and call.arguments is not None and cls is not None and cls.passes_turn


def _call_key(call: ToolCall) -> tuple[str, str] | None:
    """What makes two calls the same call (None: a malformed call, or one that passes the turn)."""
    if call.error is not None or call.arguments is None or passes_turn(call):
        return None
    return call.name, json.dumps(call.arguments, sort_keys=True)


def _never_interrupted(call: ToolCall) -> str | None:
    return None


def _never_stopping(call: ToolCall | None) -> bool:
    return False


def _noted(outcome: Outcome, note: str) -> Outcome:
    """``outcome`` with the engine's ``note`` at the end of its text (and as its field)."""
    return replace(outcome, text=outcome.text + note, note=note) if note else outcome


def _jsonable(data: Any) -> Any:
    try:
        json.dumps(data)
    except (TypeError, ValueError):
        return repr(data)
    return data


class TurnEngine:
    """Runs turns by the rules of the module docstring, with the parts a driver injects."""

    def __init__(
        self,
        *,
        context: ContextPort,
        model: Completer,
        world: WorldPort,
        shape: RequestShape,
        step_limit: int,
        observation_cap: int | None,
        recorder: TurnRecorder = NULL_RECORDER,
        clock: Clock | None = None,
        recall: Recall | None = None,
        log: logging.Logger = _log,
    ) -> None:
        self.context = context
        self.model = model
        self.world = world
        self.shape = shape
        self.step_limit = step_limit
        self.observation_cap = observation_cap
        self.recorder = recorder
        self.clock = clock or Clock()
        self.recall = recall
        """Old lines of the archive for the turn's observation (None: no retrieval)."""
        self._ran: dict[tuple[str, str], Outcome] = {}
        """The calls (name, arguments) the world ran in this turn, with how they went: one again
        is not run (a success would be done twice; a failure, with no other call run since,
        would fail the same way)."""
        self._repeats = 0
        self.log = log

    async def run(
        self,
        stats: TurnStats,
        triaged: list[Triaged],
        *,
        ambient: Mapping[str, Any],
        reason: str = "events",
        interruption: Interruption = _never_interrupted,
        stopping: Stopping = _never_stopping,
        limit_s: float = math.inf,
    ) -> None:
        """One turn: its observation, then its steps (see the module docstring). ``limit_s``:
        the time limit of one action (the driver's world applies it).

        Returns when the turn is over (``stats`` says how: interrupted, steps, actions);
        :class:`Interrupted` from the model, and every failure, propagate to the driver.
        """
        lines = tuple(Line(t.event.sender, t.event.text, t.event.whisper) for t in triaged if isinstance(t.event, Chat))
        turn = TurnContext(Authority(lines), limit_s, stats.turn)
        notes = await self.hear(stats, turn)
        await self.observe(stats, triaged, ambient=ambient, reason=reason, notes=notes)
        corrected = False
        self._ran.clear()
        self._repeats = 0
        for step in range(1, self.step_limit + 1):
            stats.steps = step
            completion = await self.complete(stats, step)
            calls = completion.tool_calls
            stored = self.context.add(
                Message(role="assistant", kind="assistant", content=completion.content,
                        tool_calls=tuple(history_call(c) for c in calls), reasoning=completion.reasoning)
            )
            ref = self.recorder.message(stored, turn=stats.turn)
            self.recorder.write(CompletionRecord.from_completion(completion, turn=stats.turn, step=step, assistant_ref=ref))
            if not calls:
                written = call_in_text(completion.content)
                if written is None or corrected or step == self.step_limit:
                    return
                # A call written as text (bare JSON, no tool-call format): nothing ran; the model
                # is told so once in the turn and asked again (docs/llm.md, "Tool choice").
                corrected = True
                self.recorder.message(self.context.add(Message(
                    role="user", kind="observation", content=correction(written), event_time=self.clock.wall(),
                )), turn=stats.turn)
                self.log.info("turn %d: a call to %s written as text; the model is told", stats.turn, written.name)
                continue
            if await self.run_calls(stats, step, calls, turn, interruption, stopping,
                                    dropped=completion.dropped_tool_calls):
                return
            if any(passes_turn(c) for c in calls):
                return
        self.log.info("turn %d reached the step limit (%d)", stats.turn, self.step_limit)

    # -- the observation ----------------------------------------------------------------------

    async def hear(self, stats: TurnStats, turn: TurnContext) -> list[str]:
        """The world hears the turn's words; what it did on them (a command an operator
        confirmed) is recorded as a result of step 0 and returned as notes for the observation."""
        notes = []
        for i, outcome in enumerate(await self.world.begin_turn(turn)):
            # what it is: a command an operator confirmed (not a say the model wrote), the
            # operator who confirmed it as its requester, the confirmation code it answered
            data = outcome.data if isinstance(outcome.data, dict) else {}
            who = data.get("confirmed_by")
            self.recorder.write(ToolResultRecord(
                turn=stats.turn, step=0, call_id=f"confirmed-{i}", name=CONFIRMED_COMMAND,
                arguments={"command": data.get("command"), "confirmation": data.get("code")},
                ok=outcome.ok, text=outcome.text, data=_jsonable(outcome.data),
                requested_by=[who] if isinstance(who, str) else [], rule=outcome.rule,
            ))
            notes.append(outcome.text)
        return notes

    async def _snapshot(self, turn: int) -> Mapping[str, Any] | None:
        try:
            snap = await self.world.snapshot()
        except Exception as e:  # a missing status must not cost the turn
            self.recorder.write(ErrorRecord(turn=turn, error_type=type(e).__name__, message=str(e), where="snapshot"))
            self.log.warning("snapshot failed (%s); observing without status", e)
            return None
        return None if snap is None else dict(snap)

    async def observe(self, stats: TurnStats, triaged: list[Triaged], *, ambient: Mapping[str, Any], reason: str,
                      notes: Sequence[str] = ()) -> Message:
        """The turn's observation message: what the world did on the turn's words before the
        model (``notes``), its events within the cap, then the status."""
        snapshot = await self._snapshot(stats.turn)
        status = format_status_line(snapshot, ambient)
        cap = self.observation_cap
        if cap is not None:
            cap = max(1, cap - self.context.count_text(status))
        composed = compose_events(triaged, cap_tokens=cap, count=self.context.count_text)
        if composed.shown < composed.events:
            self.log.info("turn %d: %d events coalesced to fit the observation cap (%d shown)",
                          stats.turn, composed.events, composed.shown)
        event_times = [t.event.t for t in triaged]
        recalled = self._recall(stats.turn, triaged, snapshot)
        text = "".join(f"[note] {n}\n" for n in notes) + composed.text
        stored = self.context.add(
            Message(role="user", kind="observation", content=f"{text}\n\n{recalled}" if recalled else text,
                    status=status,
                    event_time=min(event_times) if event_times else self.clock.wall()),
            new_turn=True,
        )
        ref = self.recorder.message(stored, turn=stats.turn)
        urgent = any(t.priority == "urgent" for t in triaged)
        self.recorder.write(
            ObservationRecord(turn=stats.turn, ref=ref, reason=reason, events=len(triaged), urgent=urgent,
                              snapshot=None if snapshot is None else dict(snapshot), shown=composed.shown,
                              notes=list(notes), recalled=recalled)
        )
        return stored

    def _recall(self, turn: int, triaged: list[Triaged], snapshot: Mapping[str, Any] | None) -> str | None:
        if self.recall is None:
            return None
        try:
            return self.recall([t.event for t in triaged], snapshot)
        except Exception as e:  # a memory that cannot answer must not cost the turn
            self.recorder.write(ErrorRecord(turn=turn, error_type=type(e).__name__, message=str(e), where="recall"))
            self.log.warning("recall failed (%s); observing without recalled lines", e)
            return None

    # -- the tool calls -----------------------------------------------------------------------

    async def run_calls(
        self, stats: TurnStats, step: int, calls: list[ToolCall], turn: TurnContext,
        interruption: Interruption, stopping: Stopping, *, dropped: int = 0,
    ) -> bool:
        """Run a completion's calls in order; True when the turn ends here (interrupted, Emil is
        stopping, or the model repeated a call it was told already ran). The last result says how many calls past the cap of one answer were
        dropped (``dropped``)."""
        interrupted: str | None = None
        stopped = False
        requesters = turn.requesters
        for i, call in enumerate(calls):
            tail = dropped_note(dropped, len(calls)) if i == len(calls) - 1 else ""
            if stopping(call):
                # A completion that arrived as Emil stopped: its actions are stale, none runs.
                stopped = True
                self.add_result(stats.turn, step, call, _noted(STOPPING, tail), requesters)
                continue
            if interrupted is None:
                interrupted = interruption(call)
            if interrupted is not None:
                outcome = not_run(interrupted)
            elif (key := _call_key(call)) is not None and key in self._ran:
                # The same call again in the same turn (a small model's loop: the same say three
                # times, the same failing take eight): not run, and the model told so.
                first = self._ran[key]
                outcome = repeated(call.name, must_call=self.shape.tool_choice == "required",
                                   failed="" if first.ok else first.text)
                self._repeats += 1
            else:
                # Another call may change what a failed one met (a go_to before the attack that
                # was out of reach): failures are held against a repeat only until then.
                self._ran = {k: o for k, o in self._ran.items() if o.ok}
                if stats.first_action_at is None:
                    stats.first_action_at = self.clock.monotonic()
                stats.actions += 1
                try:
                    outcome = await self.dispatch(call, turn)
                except Interrupted as e:
                    interrupted = e.reason
                    outcome = aborted(e.reason)
                if outcome.fate == "ran" and key is not None:
                    self._ran[key] = outcome
            self.add_result(stats.turn, step, call, _noted(outcome, tail), requesters)
        if interrupted is not None:
            stats.interrupted = True
            stats.interrupted_by = interrupted
            self.log.info("turn %d interrupted: %s", stats.turn, interrupted)
            return True
        if self._repeats >= REPEATS_PER_TURN:
            self.log.info("turn %d ended: %d repeated calls", stats.turn, self._repeats)
            return True
        return stopped or stopping(None)

    async def dispatch(self, call: ToolCall, turn: TurnContext) -> Outcome:
        """One call: a malformed one is its error (what the model reads next); a valid one runs
        in the world (with the turn's context), timed. The one place every call passes before it
        acts."""
        if call.error is not None or call.arguments is None:
            return invalid(call.error or f"arguments are not a JSON object: {call.raw_arguments!r}")
        started = self.clock.monotonic()
        outcome = await self.world.run_tool(call, turn)
        if outcome.elapsed_ms is None:
            outcome = replace(outcome, elapsed_ms=(self.clock.monotonic() - started) * 1000)
        return outcome

    def add_result(self, turn: int, step: int, call: ToolCall, outcome: Outcome,
                   requesters: frozenset[str] = frozenset()) -> Message:
        """The tool result message of one call, into history and the recording (with the
        players whose words were in the turn and the rule that allowed or refused it)."""
        stored = self.context.add(
            Message(role="tool", kind="tool_result", content=outcome.text, tool_call_id=call.id, name=call.name)
        )
        ref = self.recorder.message(stored, turn=turn)
        self.recorder.write(
            ToolResultRecord(
                turn=turn, step=step, call_id=call.id, name=call.name, arguments=call.arguments,
                ok=outcome.ok, text=outcome.text, data=_jsonable(outcome.data), elapsed_ms=outcome.elapsed_ms, ref=ref,
                requested_by=sorted(requesters), rule=outcome.rule, fate=outcome.fate, interrupt=outcome.interrupt,
                note=outcome.note,
            )
        )
        return stored

    # -- the model ----------------------------------------------------------------------------

    async def complete(self, stats: TurnStats, step: int) -> Completion:
        """One model call (the driver's model waits out outages and recovers from overflows);
        the server's count of the prompt calibrates the context's margin."""
        completion = await self.model(self.assembler(stats, step), self.on_recovery(stats))
        if stats.first_completion_at is None:
            stats.first_completion_at = self.clock.monotonic()
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

    def assembler(self, stats: TurnStats, step: int) -> Callable[[int | None], ChatRequest]:
        """``assemble(limit)`` for this step: the context's prompt within ``limit`` as a request
        of this session's shape (recorded with its trims)."""
        attempt = -1

        def assemble(limit: int | None) -> ChatRequest:
            nonlocal attempt
            attempt += 1
            assembly = self.context.assemble(limit)
            for trim in assembly.trims:
                stats.trims += 1
                self.recorder.write(trim.model_copy(update={"turn": stats.turn}))
            refs = self.recorder.request_refs(assembly.messages, turn=stats.turn, ids=assembly.message_ids)
            request = self.shape.request(assembly.messages, assembly.predicted_tokens)
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
                stats.first_request_at = self.clock.monotonic()
            return request

        return assemble

    def on_recovery(self, stats: TurnStats) -> Callable[[RecoveryEvent], None]:
        """Where the recovery's events go. Failed attempts of the same request are recorded by
        the endpoint's Patience; a turn that gives up is recorded when its error reaches the
        driver."""

        def on_event(ev: RecoveryEvent) -> None:
            if ev.kind == "overflow":
                self.recorder.write(
                    OverflowRecord(
                        turn=stats.turn, window=ev.window, requested_output=ev.requested_output,
                        prompt_tokens=ev.server_prompt_tokens, prompt_is_lower_bound=bool(ev.prompt_is_lower_bound),
                        predicted_tokens=ev.predicted_prompt_tokens, message=ev.message or str(ev.family or ""),
                    )
                )
            elif ev.kind == "retry":
                self.recorder.write(
                    RecoveryRecord(
                        turn=stats.turn, attempt=ev.attempt, limit=ev.next_limit,
                        predicted_tokens=ev.predicted_prompt_tokens, detail=f"server said {ev.server_prompt_tokens}",
                    )
                )
            elif ev.kind == "recovered":
                stats.overflow_recoveries += 1

        return on_event


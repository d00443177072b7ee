"""Offline, deterministic replay: a recorded session's turns run again through the turn engine.

Each recorded turn runs through :class:`emil.agent.turn.TurnEngine`, the same rules the live
loop runs, with the recording as the model and the world: today's perception triages the
recorded events, the engine writes the observation (capped as live), today's context manager
(built by :func:`emil.agent.context_port.session_context` from the recorded settings, as live)
assembles every request, the request is set beside the recorded one, and the recorded
completion and tool results carry the turn on. The recording's interrupts and stops decide
when the engine's interrupt rules apply (a call the session did not run is not run again).

Where a request differs from the recorded one, the report says which messages and how many
tokens; where today's code fails where the session did not (a prompt that no longer fits, a
turn that ends sooner or later), it says so in ``errors``. An optional live model (``live``)
is asked the same question at every step, the request built exactly as the session built it,
and its answer is set beside the recorded one; the history still continues with the recorded
answer and tool results (the world's answers only exist for the recorded actions).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from emil.agent.context_port import ContextAssembly, ManagedContext, session_context
from emil.agent.ports import Interrupted
from emil.agent.request_shape import RequestShape
from emil.agent.turn import TurnEngine, observation_cap
from emil.agent.turnstats import TurnStats
from emil.config import Settings, load_recorded_settings
from emil.context.budget import Budget
from emil.context.history import Message
from emil.exceptions import ConfigurationError, ContextOverflowError, EmilError
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.types import LLM, ChatRequest, Completion, ToolCall
from emil.memory.summary import load_summary_prompt
from emil.model.resolve import family_for_recording
from emil.model.template import TemplateError
from emil.recording import EventRecord, HeaderRecord, ToolResultRecord
from emil.replay.compare import RequestDiff, diff_messages
from emil.replay.live import LiveStep, compare_live
from emil.replay.recorded_notes import RecordedNotes
from emil.replay.recorded_summaries import RecordedSummaries, SummaryJudge
from emil.replay.recorded_turns import RecordedSession, RecordedStep, RecordedTurn
from emil.replay.report import ObservationDiff, ReplayOptions, ReplayReport
from emil.senses.perception import Perception
from emil.world.events import Death, GameEvent, parse_event
from emil.world.port import TurnContext
from emil.world.tool import Outcome

__all__ = ["Replayer"]

_DEFAULT_WINDOW = 65536


def _recorded_family_name(header: HeaderRecord | None) -> str | None:
    """The family the recording was counted with, when its header says."""
    try:
        return family_for_recording(header).name
    except ConfigurationError:
        return None


class _TurnOver(Exception):
    """The recorded turn ends here (no answer to its request, or no further step)."""


class _Damaged(EmilError):
    """The recording lacks what the replay needs to go on (a request, a tool result)."""


class _ReplayContext(ManagedContext):
    """The session's context, plus what replay watches: the observation today's code writes,
    the trims, and whether the server's count of a prompt may calibrate today's margin."""

    def __init__(self, base: ManagedContext, replayer: Replayer) -> None:
        super().__init__(base.manager, base.system_prompt, base.tools, history=base.history, llm=base.llm,
                         clock=base.clock)
        self.replayer = replayer
        self.calibrate = False
        """True while the request in flight is the recorded one, counted by the recorded family."""

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        stored = super().add(message, new_turn=new_turn)
        if new_turn:
            self.replayer.observed(stored)
        return stored

    def assemble(self, limit: int | None = None) -> ContextAssembly:
        assembly = super().assemble(limit)
        self.replayer.report.trims_today += len(assembly.trims)
        return assembly

    def observe_usage(self, predicted: int, actual: int) -> None:
        if self.calibrate:
            super().observe_usage(predicted, actual)


class _RecordedWorld:
    """The recorded snapshots and tool results as the turn engine's world (the one protocol of
    Emil's body, :class:`~emil.world.port.WorldPort`: the recording's events come through
    perception, not from here, and nothing runs that could be aborted)."""

    def __init__(self, replayer: Replayer) -> None:
        self.replayer = replayer

    async def events(self) -> AsyncIterator[GameEvent]:
        return
        yield

    async def abort(self) -> None:
        """Nothing runs: the recording answers."""

    async def snapshot(self) -> Mapping[str, Any] | None:
        turn = self.replayer.turn
        return None if turn is None else turn.observation.snapshot

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        """What the world did on the turn's words, as the observation noted it."""
        recorded = self.replayer.turn
        return () if recorded is None else tuple(Outcome(True, note) for note in recorded.observation.notes)

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        """The world's recorded answer (the engine adds its note again); the interrupt that
        aborted the call, when one did."""
        result = self.replayer.result_for(call)
        if result.fate == "aborted":
            raise Interrupted(result.interrupt)
        return Outcome(result.ok, result.answer, result.data, result.elapsed_ms, fate=result.fate)


class Replayer:
    """Replays one recorded session; see the module docstring.

    ``live`` is an optional second model asked every step (``--endpoint``); ``progress`` is
    called after each step with (steps done, steps total).
    """

    def __init__(
        self,
        session: RecordedSession,
        *,
        path: str = "",
        options: ReplayOptions | None = None,
        live: LLM | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.session = session
        self.options = o = options or ReplayOptions()
        self.live = live
        self.progress = progress
        header = session.header or HeaderRecord()
        self.header = header
        self.family = o.family or family_for_recording(session.header, o.tokenizer)
        # The recorded usage counts the recording's own tokens: it calibrates today's margin
        # only when replay counts as the recording did (--tokenizer naming another family
        # would read, say, Qwen3.6 counts as Qwen3 ones: 159-204 tokens "missing" a request).
        self._recorded_counts_apply = o.family is None and (
            o.tokenizer is None or _recorded_family_name(session.header) == self.family.name
        )
        self.settings = self._settings(header)
        self.budget = self._budget(header, self.settings)
        self.tools = list(header.tools)
        # The notes as the recorded requests carried them, never today's database.
        first = next((s.messages for t in session.turns for s in t.steps if s.messages), [])
        self.notes = RecordedNotes(first)
        self._now = 0.0
        self.context = _ReplayContext(
            session_context(
                self.settings, family=self.family, budget=self.budget, system_prompt=header.system_prompt,
                tools=self.tools, notes=self.notes, summaries=RecordedSummaries(session.summaries),
                clock=lambda: self._now,
            ),
            self,
        )
        self.manager = self.context.manager
        self.counter = self.manager.counter
        self.preserve_thinking = self.family.sends_preserve_thinking(
            enable_thinking=self.settings.enable_thinking, preserve_thinking=self.settings.preserve_thinking
        )
        self.shape = RequestShape.of(self.settings, preserve_thinking=self.preserve_thinking,
                                     tools=self.tools or None)
        self.engine = TurnEngine(
            context=self.context, model=self._complete, world=_RecordedWorld(self), shape=self.shape,
            step_limit=self.settings.step_limit,
            observation_cap=observation_cap(self.settings.observation_cap_tokens, self.budget.prompt_budget),
            recall=self._recalled,
        )
        # Triaged as live (the recorded NPC lines as NPC lines), without live's turn budget:
        # the recording says when each turn started.
        self.perception = Perception(self.settings)
        self.judge = None if live is None else SummaryJudge(
            session.summaries, live, name=self.settings.bot_name,
            prompt=load_summary_prompt(None, name=self.settings.bot_name, max_tokens=self.settings.summary_max_tokens),
            max_tokens=self.settings.summary_max_tokens,
        )
        self.turn: RecordedTurn | None = None
        self._step_index = 0
        self._cursor = 0
        self.report = ReplayReport(
            path=path,
            turns_total=len(session.turns),
            steps_total=session.steps,
            trims_recorded=session.trims,
            settings={
                "tokenizer": self.counter.name,
                "window": self.budget.window,
                "output_reserve": self.budget.output_reserve,
                "prompt_budget": self.budget.prompt_budget,
            },
        )

    def _settings(self, header: HeaderRecord) -> Settings:
        """The settings the session ran with (the header's), with this replay's flags: loaded
        as live loads them (emil.config.load_recorded_settings)."""
        recorded: dict[str, Any] = dict(header.settings)
        # What the header says beside its settings, and what headers written before a setting
        # existed did.
        recorded["enable_thinking"] = header.enable_thinking
        recorded.setdefault("preserve_thinking", header.preserve_thinking)
        if header.bot_name:
            recorded.setdefault("bot_name", header.bot_name)
        if header.output_reserve is not None:
            recorded["output_reserve"] = header.output_reserve
        return load_recorded_settings(recorded, {"output_reserve": self.options.output_reserve}).settings

    def _budget(self, header: HeaderRecord, settings: Settings) -> Budget:
        o = self.options
        window = o.window or header.window or _DEFAULT_WINDOW
        return Budget.of(
            window, settings.output_reserve, o.prompt_budget or header.prompt_budget,
            sources={
                "window": "--window" if o.window else ("the recording" if header.window else "default"),
                "prompt budget": "--prompt-budget" if o.prompt_budget else (
                    "the recording" if header.prompt_budget else "auto"),
            },
        )

    @property
    def history(self) -> Any:
        """Today's history as it stands (the context's)."""
        return self.context.history

    async def run(self) -> ReplayReport:
        """Replay every turn; stops early (and says why) at damage or missing data."""
        started = time.perf_counter()
        try:
            for index, turn in enumerate(self.session.turns):
                if not await self._turn(turn, last=index == len(self.session.turns) - 1):
                    break
        finally:
            self.report.seconds = time.perf_counter() - started
            if self.judge is not None:
                self.report.summaries = self.judge.verdicts
        if self.session.problem:
            damage = (
                f"the recording is damaged at line {self.session.stopped_at_line} "
                f"({self.session.problem}); replayed everything before it"
            )
            self.report.stopped = damage if self.report.stopped is None else f"{self.report.stopped}: {damage}"
        return self.report

    # -- events, as the live pump saw them --------------------------------------------------------

    def _feed(self, until: int, *, turn: int | None = None) -> list[EventRecord]:
        """Events and dispatches up to a timeline position, as the agent loop's pump saw them.

        Events recorded during ``turn`` arrived after that turn took the pending events (while
        it fetched the status); they are returned, to be fed once the turn has started.
        """
        timeline = self.session.timeline
        later: list[EventRecord] = []
        while self._cursor < min(until, len(timeline)):
            item = timeline[self._cursor]
            self._cursor += 1
            if isinstance(item, str):
                self.perception.dispatched(item)
            elif turn is not None and item.turn == turn:
                later.append(item)
            else:
                self._event(item)
        return later

    def _event(self, item: EventRecord) -> None:
        event = parse_event(item.event)
        if self.perception.echo(event):  # the loop's rule: the end of an awaited action is a tool result
            return
        self.perception.add(event, item.t, npc=item.npc or None)
        if isinstance(event, Death):
            self.perception.clear_actions()

    # -- one turn ---------------------------------------------------------------------------------

    async def _turn(self, turn: RecordedTurn, *, last: bool) -> bool:
        if self.judge is not None:  # between turns, as live: the recorded summary requests, asked again
            await self.judge.between_turns(self.context.history)
        later = self._feed(turn.timeline_index, turn=turn.turn)
        triaged = self.perception.take()
        for item in later:
            self._event(item)
        self.turn, self._step_index = turn, 0
        self._now = turn.observation.t
        self.report.turns_replayed += 1
        stats = TurnStats(turn=turn.turn, reason=turn.observation.reason, started=0.0)
        try:
            await self.engine.run(
                stats, triaged, ambient=self.perception.ambient, reason=turn.observation.reason,
                interruption=self._interruption, stopping=self._stopping,
            )
        except _TurnOver:
            return True
        except Interrupted:
            pass  # the model call was cancelled live: the recording's turn ends unanswered
        except _Damaged as e:
            if last:
                return True  # the session ended inside its last turn (a stop, a kill)
            self.report.stopped = str(e)
            return False
        except ContextOverflowError as e:
            self.report.errors.append(f"turn {turn.turn} step {self._step_index}: today's code fails the turn: {e}")
            return True
        if self._step_index < len(turn.steps):
            self.report.errors.append(
                f"turn {turn.turn}: today's code ends the turn after step {self._step_index} where the "
                f"recorded session went on to step {turn.steps[-1].step}"
            )
        return True

    def _recalled(self, events: list[GameEvent], snapshot: Mapping[str, Any] | None) -> str | None:
        """The lines the session recalled into this turn's observation (the archive is not
        replayed: what it answered is part of the recording, like a snapshot)."""
        return None if self.turn is None else self.turn.observation.recalled

    def observed(self, message: Message) -> None:
        """Today's observation of the current turn, beside the recorded one."""
        recorded = self.turn.observation_text if self.turn is not None else None
        if recorded is not None and self.turn is not None and recorded != message.text:
            self.report.observation_diffs.append(ObservationDiff(self.turn.turn, recorded, message.text))

    # -- the recorded model -----------------------------------------------------------------------

    async def _complete(self, assemble: Assembler, on_event: Callable[[RecoveryEvent], None]) -> Completion:
        """The recorded answer to this step, after building its request as the session did."""
        turn = self.turn
        assert turn is not None
        if self._step_index >= len(turn.steps):
            if self._step_index < self.settings.step_limit and not _ended_by_recording(turn):
                self.report.errors.append(
                    f"turn {turn.turn} step {self._step_index + 1}: today's code asks the model again "
                    "where the recorded session ended the turn"
                )
            raise _TurnOver
        step = turn.steps[self._step_index]
        self._step_index += 1
        if step.request is None:
            raise _Damaged(f"turn {turn.turn} step {step.step} has no request in the recording")
        request = self._requests(turn, step, assemble)
        self.report.steps_replayed += 1
        if self.progress is not None:
            self.progress(self.report.steps_replayed, self.report.steps_total)
        if step.completion is None:
            # Sent, never answered (interrupted, failed, or the session's end): compared; the
            # turn ended there, and so does its replay.
            self.report.unanswered += 1
            raise _TurnOver
        completion = step.completion.to_completion()
        if self.live is not None:
            self.report.live.append(await self._ask_live(turn, step, request, completion))
        return completion

    def _requests(self, turn: RecordedTurn, step: RecordedStep, assemble: Assembler) -> ChatRequest:
        """Every attempt of the step's request built again and set beside the recorded one; an
        overflow's count calibrates as it did live. The last request built (what a live model is
        asked), or the recorded one when today's manager cannot build it."""
        assert step.request is not None
        request: ChatRequest | None = None
        attempts = step.attempts or [(step.request, step.messages)]
        for index, (recorded, messages) in enumerate(attempts):
            self.notes.messages = messages  # the block as sent, should a trim refresh it
            self._now = recorded.t
            try:
                request = assemble(None if index == 0 else recorded.limit)
            except ContextOverflowError as e:
                self.report.errors.append(
                    f"turn {turn.turn} step {step.step}: today's manager cannot fit the prompt: {e}"
                )
                request = None
                break
            diff = self._diff(turn, step, recorded.predicted_tokens, messages, request)
            if index == 0 or not diff.identical:
                self.report.diffs.append(diff)
            same = diff.identical and self._recorded_counts_apply
            if index + 1 < len(attempts) and index < len(step.overflows):
                overflow = step.overflows[index]
                if same and not overflow.prompt_is_lower_bound and overflow.prompt_tokens is not None:
                    # the recovery's calibration: the server's count of the prompt that overflowed
                    self.manager.observe_usage(request.predicted_prompt_tokens or 0, overflow.prompt_tokens)
            # Same prompt as the session sent, counted by the same family: the server's count of
            # it (the completion's usage) calibrates today's margin as it did live.
            self.context.calibrate = same
        if request is None:
            return self.shape.request(step.messages, step.request.predicted_tokens)
        return request

    def _diff(
        self, turn: RecordedTurn, step: RecordedStep, recorded_predicted: int | None,
        recorded: list[dict[str, Any]], request: ChatRequest,
    ) -> RequestDiff:
        today = request.messages
        changes: tuple[Any, ...] = ()
        if _wire(recorded) != _wire(today):
            changes = diff_messages(
                recorded, today, recorded_tokens=self._blocks(recorded), today_tokens=self._blocks(today),
            )
        return RequestDiff(
            turn=turn.turn, step=step.step,
            recorded_messages=len(recorded), today_messages=len(today),
            recorded_predicted=recorded_predicted,
            recorded_actual=step.completion.prompt_tokens if step.completion is not None else None,
            today_tokens=request.predicted_prompt_tokens or 0,
            changes=changes,
        )

    def _blocks(self, messages: list[dict[str, Any]]) -> list[int]:
        try:
            return self.manager.incremental.block_counts(messages, self.tools or None)
        except TemplateError:  # a request the template refuses: count text, not blocks
            return [self.counter.count(json.dumps(m, ensure_ascii=False)) for m in messages]

    async def _ask_live(
        self, turn: RecordedTurn, step: RecordedStep, request: ChatRequest, recorded: Completion
    ) -> LiveStep:
        assert self.live is not None
        started = time.perf_counter()
        try:
            answer: Completion | None = await self.live.complete(request)
            error = None
        except EmilError as e:
            answer, error = None, f"{type(e).__name__}: {e}"
        elapsed = time.perf_counter() - started
        return compare_live(
            turn.turn, step.step, recorded, answer, elapsed_s=elapsed, error=error,
            predicted=request.predicted_prompt_tokens,
        )

    # -- the recorded world -----------------------------------------------------------------------

    def _step(self) -> RecordedStep:
        assert self.turn is not None and self._step_index > 0
        return self.turn.steps[self._step_index - 1]

    def result_for(self, call: ToolCall) -> ToolResultRecord:
        """The recorded result of ``call`` in the current step (:class:`_Damaged` if missing)."""
        step = self._step()
        result = step.result_for(call.id)
        if result is None:
            raise _Damaged(
                f"turn {step.turn} step {step.step}: no recorded result for tool call {call.id} ({call.name})"
            )
        return result

    def _interruption(self, call: ToolCall) -> str | None:
        """The interrupt the session had pending before ``call``, as its record says."""
        result = self._step().result_for(call.id)
        return result.interrupt if result is not None and result.fate == "not_run" else None

    def _stopping(self, call: ToolCall | None) -> bool:
        """The session was stopping when ``call`` came, as its record says."""
        result = None if call is None else self._step().result_for(call.id)
        return result is not None and result.fate == "stopping"


def _wire(messages: list[dict[str, Any]]) -> str:
    """The messages as their JSON bytes (key order included): what went on the wire."""
    return json.dumps(messages, ensure_ascii=False)


def _ended_by_recording(turn: RecordedTurn) -> bool:
    """The recorded turn ended early for a reason replay cannot see (it failed, or the session
    stopped in it)."""
    summary = turn.summary
    return summary is None or bool(summary.failed) or summary.interrupted


"""Offline, deterministic replay: recorded events through today's perception and context
manager, recorded completions as the model, recorded tool results as the world.

The replay keeps the recorded session's shape (the same turns, the same steps, in order) and
rebuilds everything today's code derives: the observation text, the history, the trims and the
request. Where the request differs from the recorded one, it says which messages and how many
tokens. An optional live model (``live``) is asked the same question at every step and its
answer is set beside the recorded one; the history still continues with the recorded answer and
tool results (the world's answers only exist for the recorded actions).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.manager import Assembly, ContextManager
from emil.context.rungs import RefreshNotes, Summarise
from emil.events import ActionFinished, Death, parse_event
from emil.exceptions import BudgetError, ConfigurationError, EmilError
from emil.llm.types import LLM, ChatRequest, Completion, ToolCall
from emil.memory.summary import load_summary_prompt
from emil.model.family import ModelFamily
from emil.model.resolve import family_for_recording
from emil.model.template import TemplateError
from emil.model.tokens import TokenCounter
from emil.perception import Perception, PerceptionPolicy, format_events, format_status_line
from emil.recording import EventRecord, HeaderRecord
from emil.replay.compare import RequestDiff, diff_messages
from emil.replay.live import LiveStep, compare_live
from emil.replay.notes import RecordedNotes
from emil.replay.recorded_llm import RecordedLLM, ReplayExhausted
from emil.replay.session import RecordedSession, RecordedStep, RecordedTurn
from emil.replay.summaries import RecordedSummaries, SummaryJudge, SummaryVerdict

__all__ = ["ObservationDiff", "ReplayOptions", "ReplayReport", "Replayer"]

_DEFAULT_WINDOW = 65536
_DEFAULT_RESERVE = 6144


@dataclass(frozen=True)
class ReplayOptions:
    """What to replay with; ``None`` = what the recording's header says."""

    tokenizer: str | None = None
    window: int | None = None
    output_reserve: int | None = None
    prompt_budget: int | None = None
    family: ModelFamily | None = None
    """Count as this model family (e.g. the one a live endpoint serves), not the recording's."""


@dataclass(frozen=True)
class ObservationDiff:
    """A turn whose observation text today's perception writes differently."""

    turn: int
    recorded: str
    today: str


@dataclass
class ReplayReport:
    """What a replay found."""

    path: str
    turns_total: int
    steps_total: int
    turns_replayed: int = 0
    steps_replayed: int = 0
    diffs: list[RequestDiff] = field(default_factory=list)
    observation_diffs: list[ObservationDiff] = field(default_factory=list)
    trims_recorded: int = 0
    trims_today: int = 0
    errors: list[str] = field(default_factory=list)
    """Today's code failing where the recording did not (e.g. a prompt that no longer fits)."""
    live: list[LiveStep] = field(default_factory=list)
    summaries: list[SummaryVerdict] = field(default_factory=list)
    """With a live model: each recorded summary request asked again (facts kept, dropped, new)."""
    unanswered: int = 0
    """Requests the recording has no answer to: the turn was interrupted (an urgent event, a
    stop) or failed during the model call, or the session ended in it. Each is compared like
    any request, and its turn ends there, as it did live."""
    stopped: str | None = None
    """Why replay stopped before the end (damage: a missing request or tool result)."""
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    session: int = 1
    """Which session of the file was replayed (1-based); ``recording_append`` makes several."""
    sessions: int = 1
    """How many sessions the file holds."""

    @property
    def identical(self) -> int:
        return sum(1 for d in self.diffs if d.identical)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "session": self.session,
            "sessions": self.sessions,
            "settings": self.settings,
            "turns_total": self.turns_total,
            "steps_total": self.steps_total,
            "turns_replayed": self.turns_replayed,
            "steps_replayed": self.steps_replayed,
            "identical_requests": self.identical,
            "differing_requests": len(self.diffs) - self.identical,
            "trims_recorded": self.trims_recorded,
            "trims_today": self.trims_today,
            "unanswered_requests": self.unanswered,
            "stopped": self.stopped,
            "errors": self.errors,
            "observation_diffs": [vars(o) for o in self.observation_diffs],
            "requests": [d.to_json() for d in self.diffs if not d.identical],
            "live": [s.to_json() for s in self.live],
            "summaries": [v.to_json() for v in self.summaries],
            "seconds": round(self.seconds, 3),
        }


def _recorded_family_name(header: HeaderRecord | None) -> str | None:
    """The family the recording was counted with, when its header says."""
    try:
        return family_for_recording(header).name
    except ConfigurationError:
        return None


def _history_call(call: ToolCall) -> dict[str, str]:
    # Same rule as the agent loop: arguments that are not a JSON object are kept as "{}".
    args = call.raw_arguments if call.arguments is not None else "{}"
    return {"id": call.id, "name": call.name, "arguments": args}


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
        self.options = options or ReplayOptions()
        self.live = live
        self.progress = progress
        header = session.header or HeaderRecord()
        self.header = header
        o = self.options
        self.family = o.family or family_for_recording(session.header, o.tokenizer)
        # The recorded usage counts the recording's own tokens: it calibrates today's margin
        # only when replay counts as the recording did (--tokenizer naming another family
        # would read, say, Qwen3.6 counts as Qwen3 ones: 159-204 tokens "missing" a request).
        self._recorded_counts_apply = o.family is None and (
            o.tokenizer is None or _recorded_family_name(session.header) == self.family.name
        )
        self.counter: TokenCounter = self.family.tokenizer()
        window = o.window or header.window or _DEFAULT_WINDOW
        reserve = o.output_reserve if o.output_reserve is not None else (
            header.output_reserve if header.output_reserve is not None else _DEFAULT_RESERVE
        )
        prompt_budget = o.prompt_budget or header.prompt_budget
        budget = (
            Budget(window=window, output_reserve=reserve, margin=window - reserve - prompt_budget)
            if prompt_budget
            else Budget(window=window, output_reserve=reserve)
        )
        self.tools = list(header.tools)
        # A kwarg the family's template does not read is neither counted with nor sent.
        self.preserve_thinking = bool(self.family.template_kwargs(
            enable_thinking=header.enable_thinking, preserve_thinking=header.preserve_thinking,
        ).get("preserve_thinking"))
        # The notes as the recorded requests carried them, never today's database.
        first = next((s.messages for t in session.turns for s in t.steps if s.messages), [])
        self.notes = RecordedNotes(first)
        self.manager = ContextManager(
            self.counter, budget, header.system_prompt, self.tools, header.enable_thinking,
            family=self.family, preserve_thinking=self.preserve_thinking,
            rungs=[RefreshNotes(self.notes), Summarise(RecordedSummaries(session.summaries))],
        )
        self.perception = Perception(PerceptionPolicy(bot_name=header.bot_name or "Emil"))
        self.llm = RecordedLLM(
            s.completion for t in session.turns for s in t.steps if s.completion is not None
        )
        self.history = History(notes=Message.memory(text) if (text := self.notes.text()) else None)
        self.judge = None if live is None else SummaryJudge(
            session.summaries, live, name=header.bot_name or "Emil",
            prompt=load_summary_prompt(None, name=header.bot_name or "Emil", max_tokens=int(header.settings.get("summary_max_tokens", 512))),
            max_tokens=int(header.settings.get("summary_max_tokens", 512)),
        )
        self._cursor = 0
        self._dispatched: Counter[str] = Counter()
        self.report = ReplayReport(
            path=path,
            turns_total=len(session.turns),
            steps_total=session.steps,
            trims_recorded=session.trims,
            settings={
                "tokenizer": self.counter.name,
                "window": budget.window,
                "output_reserve": budget.output_reserve,
                "prompt_budget": budget.prompt_budget,
            },
        )

    async def run(self) -> ReplayReport:
        """Replay every turn; stops early (and says why) at damage or missing data."""
        started = time.perf_counter()
        try:
            for turn in self.session.turns:
                if not await self._turn(turn):
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

    # -- one turn ---------------------------------------------------------------------------------

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
                self._dispatched[item] += 1
            elif turn is not None and item.turn == turn:
                later.append(item)
            else:
                self._event(item)
        return later

    def _event(self, item: EventRecord) -> None:
        event = parse_event(item.event)
        if isinstance(event, ActionFinished) and self._dispatched[event.action] > 0:
            # The loop's rule: the end of an action it awaited is already a tool result.
            self._dispatched[event.action] -= 1
            return
        self.perception.add(event, item.t)
        if isinstance(event, Death):
            self.perception.clear_actions()

    def _observe(self, turn: RecordedTurn) -> Message:
        later = self._feed(turn.timeline_index, turn=turn.turn)
        triaged = self.perception.take()
        for item in later:
            self._event(item)
        content = format_events(triaged)
        status = format_status_line(turn.observation.snapshot, self.perception.ambient)
        times = [t.event.t for t in triaged]
        message = Message(
            role="user", content=content, kind="observation", status=status,
            event_time=min(times, default=turn.observation.t),
        )
        recorded = turn.observation_text
        if recorded is not None and recorded != message.text:
            self.report.observation_diffs.append(ObservationDiff(turn.turn, recorded, message.text))
        return message

    async def _turn(self, turn: RecordedTurn) -> bool:
        if self.judge is not None:  # between turns, as live: the recorded summary requests, asked again
            await self.judge.between_turns(self.history)
        self.history = self.history.start_turn(self._observe(turn))
        self.report.turns_replayed += 1
        for step in turn.steps:
            if step.request is None:
                self.report.stopped = f"turn {turn.turn} step {step.step} has no request in the recording"
                return False
            if step.completion is None:
                # Sent, never answered (interrupted, failed, or the session's end): compare the
                # request; the turn ended there, and so does its replay.
                if (assembly := self._assemble(turn, step)) is not None:
                    self.report.diffs.append(self._diff(turn, step, assembly))
                self.report.unanswered += 1
                self.report.steps_replayed += 1
                return True
            if not await self._step(turn, step):
                return False
            self.report.steps_replayed += 1
            if self.progress is not None:
                self.progress(self.report.steps_replayed, self.report.steps_total)
        return True

    def _assemble(self, turn: RecordedTurn, step: RecordedStep) -> Assembly | None:
        assert step.request is not None
        self.notes.messages = step.messages  # the block as sent, should a trim refresh it
        try:
            assembly = self.manager.assemble(self.history, now=step.request.t)
        except BudgetError as e:
            self.report.errors.append(f"turn {turn.turn} step {step.step}: today's manager cannot fit the prompt: {e}")
            return None
        self.history = assembly.history
        self.report.trims_today += len(assembly.trims)
        return assembly

    def _diff(self, turn: RecordedTurn, step: RecordedStep, assembly: Assembly) -> RequestDiff:
        assert step.request is not None
        recorded = step.messages
        today = assembly.messages
        changes: tuple[Any, ...] = ()
        if recorded != today:
            changes = diff_messages(
                recorded, today,
                recorded_tokens=self._blocks(recorded),
                today_tokens=assembly.block_tokens or self._blocks(today),
            )
        return RequestDiff(
            turn=turn.turn, step=step.step,
            recorded_messages=len(recorded), today_messages=len(today),
            recorded_predicted=step.request.predicted_tokens,
            recorded_actual=step.completion.prompt_tokens if step.completion is not None else None,
            today_tokens=assembly.predicted_tokens,
            changes=changes,
        )

    def _blocks(self, messages: list[dict[str, Any]]) -> list[int]:
        try:
            return self.manager.incremental.block_counts(messages, self.tools or None)
        except TemplateError:  # a request the template refuses: count text, not blocks
            return [self.counter.count(json.dumps(m, ensure_ascii=False)) for m in messages]

    async def _step(self, turn: RecordedTurn, step: RecordedStep) -> bool:
        assert step.request is not None and step.completion is not None
        assembly = self._assemble(turn, step)
        if assembly is not None:
            diff = self._diff(turn, step, assembly)
            self.report.diffs.append(diff)
            actual = step.completion.prompt_tokens
            if diff.identical and actual is not None and self._recorded_counts_apply:
                # Same prompt as the session sent, counted by the same family: the server's
                # count calibrates today's margin.
                self.manager.observe_usage(assembly.predicted_tokens, actual)
            messages = assembly.messages
            predicted: int | None = assembly.predicted_tokens
        else:
            messages, predicted = step.messages, step.request.predicted_tokens
        request = ChatRequest(
            messages=messages,
            tools=self.tools or None,
            max_completion_tokens=step.request.max_completion_tokens or self.manager.budget.output_reserve,
            enable_thinking=self.header.enable_thinking,
            preserve_thinking=self.preserve_thinking,
            predicted_prompt_tokens=predicted,
        )
        try:
            completion = await self.llm.complete(request)
        except ReplayExhausted as e:
            self.report.stopped = f"turn {turn.turn} step {step.step}: {e}"
            return False
        if self.live is not None:
            self.report.live.append(await self._ask_live(turn, step, request, completion))
        return self._continue(turn, step, completion)

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
            turn.turn, step.step, recorded, answer, self.tools, elapsed_s=elapsed, error=error,
            predicted=request.predicted_prompt_tokens,
        )

    def _continue(self, turn: RecordedTurn, step: RecordedStep, completion: Completion) -> bool:
        calls = completion.tool_calls
        self.history = self.history.append(
            Message(
                role="assistant", content=completion.content, kind="assistant",
                tool_calls=tuple(_history_call(c) for c in calls), reasoning=completion.reasoning,
            )
        )
        for call in calls:
            result = step.result_for(call.id)
            if result is None:
                self.report.stopped = (
                    f"turn {turn.turn} step {step.step}: no recorded result for tool call "
                    f"{call.id} ({call.name})"
                )
                return False
            self.history = self.history.append(
                Message(role="tool", content=result.text, kind="tool_result", tool_call_id=call.id, name=call.name)
            )
        return True

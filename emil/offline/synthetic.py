"""A synthetic day of Emil's play, built from Emil's real parts, for sweeps, benchmarks and tests.

Seeded and deterministic: the same seed gives the same day. A small world simulation (players
joining and leaving over the day, their chat, requests, gifts and hits, mobs at night, time and
weather, Emil's hunger and jobs: :mod:`emil.offline.sim_world`, :mod:`emil.offline.sim_people`)
produces typed game events (:mod:`emil.world.events`). Emil's own :class:`~emil.senses.perception.Perception`
classifies them and decides when a turn starts, and every turn runs through the live turn
engine (:mod:`emil.agent.turn`): the same observation (status line, events within the cap),
the same assistant and tool result messages, the same call rules. What differs is injected: the
model is a script (:mod:`emil.offline.sim_policy`, rules, not a model), the world is the
simulated body behind the same world port and tool classes as live
(:class:`~emil.world.actions.BotWorld`; with notes, wrapped by the same
:class:`~emil.memory.world.RememberingWorld` that feeds the learner live), the clock is game
time, and the context only collects the day's messages (neutralised as live): a sweep assembles
them later, per budget. The system prompt is rendered from prompts/ and the tool specs come
from the tool classes, so the pinned notes block evolves as it would live. The same
RememberingWorld feeds the archivist (:class:`~emil.memory.archivist.Archivist`), so the
archive grows as live too, and the engine's recall hook keeps what each turn is about (its
:class:`~emil.memory.retrieval.Topic`, from the same events and snapshot live retrieval reads):
the lines recalled depend on what the history still holds verbatim, so a sweep recalls them
per budget, by the same :class:`~emil.memory.retrieval.Recollection` (emil.offline.simulate).

Facts said in conversation are planted at random times (:class:`PlantedFact`, worded by
:mod:`emil.offline.facts`, a generator the memory code never imports); their probes say which
strings must share one line of a prompt for the fact to count as there
(:mod:`emil.offline.recall`). ``plant=False`` is the null run: the same facts and probes,
never said.

Facts are planted at known times (:class:`PlantedFact`: who gave what, who asked for what,
where the chest is, a promise made in the morning); their probes say which strings must share
one line of a prompt for the fact to count as recoverable (:mod:`emil.offline.recall`).
"""

from __future__ import annotations

import heapq
import json
import math
import random
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emil.agent.persona import load_system_prompt
from emil.agent.ports import AssemblyView, Clock
from emil.agent.request_shape import RequestShape
from emil.agent.turn import TurnEngine, observation_cap
from emil.agent.turnstats import TurnStats
from emil.config import Settings
from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.untrusted import Neutraliser, served_specials
from emil.llm.recovery_steps import Assembler, RecoveryEvent
from emil.llm.types import Completion, ToolCall
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.archivist import Archivist
from emil.memory.learn import Learner
from emil.memory.pinned import PinnedNotes
from emil.memory.retrieval import Topic, topic_of
from emil.memory.store import MemoryStore
from emil.memory.tools import MemoryTools
from emil.memory.world import RememberingWorld
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.model.tokens import TokenCounter
from emil.offline.content import Piece, message_pieces
from emil.offline.facts import Wordings, said_facts
from emil.offline.recall import PlantedFact
from emil.offline.sim_people import ROSTER, Happenings
from emil.offline.sim_policy import ScriptedEmil, Step
from emil.offline.sim_world import BOT, DURATIONS, SimBody, SimWorld, resolve
from emil.offline.trace import SessionTrace
from emil.senses.perception import Perception
from emil.world.actions import BotWorld, tool_specs, validate_tool_call
from emil.world.events import GameEvent
from emil.world.port import TurnContext, WorldPort
from emil.world.tool import ActionPolicy, Outcome

__all__ = [
    "BOT",
    "DAY_START",
    "SYSTEM_PROMPT",
    "SyntheticDay",
    "SyntheticTurn",
    "day_trace",
    "emil_tool_specs",
    "grow",
    "history_of",
    "request_steps",
    "synthetic_day",
    "synthetic_pieces",
    "synthetic_trace",
    "synthetic_turns",
]

DAY_START = 1_779_948_000.0
"""06:00 UTC on a fixed date: the synthetic day's first second (unix time)."""
_DEFAULTS = Settings()


def emil_tool_specs() -> list[dict[str, Any]]:
    """Emil's tool specs as sent: derived from the tool classes."""
    return tool_specs()


SYSTEM_PROMPT = load_system_prompt(None, name=BOT, tools=[t["function"]["name"] for t in emil_tool_specs()])
"""Emil's system prompt as a default session renders it from prompts/."""


@dataclass(frozen=True)
class SyntheticTurn:
    """One turn: its messages and the game time it started."""

    t: float
    messages: tuple[Message, ...]
    topic: Topic | None = None
    """What the turn is about (for a sweep's retrieval)."""


@dataclass(frozen=True)
class SyntheticDay:
    """A generated day: the turns, the facts planted in it, and the pinned notes block as it
    changed (``(game time, text)``, rendered between turns when the notes changed)."""

    turns: tuple[SyntheticTurn, ...]
    planted: tuple[PlantedFact, ...]
    notes: tuple[tuple[float, str | None], ...]
    system_prompt: str
    tools: list[dict[str, Any]]
    seed: int
    hours: float
    data_dir: Path | None = None
    """Where the day's notes and archive stay (None: a scratch directory, gone)."""
    planted_said: bool = True
    """False for the null run (the facts were never said)."""


_NOMINAL_WINDOW = 65536
"""The window the day's observations are capped for (the cap is a quarter of its prompt budget,
as live on auto): the day is generated once per sweep, whatever budgets the sweep tries."""


class _DayContext:
    """The turn engine's context for the synthetic day: it collects the turn's messages as they
    enter history, admitted as live (the served vocabulary's neutraliser); it assembles nothing,
    since the sweep assembles the day's requests later, per budget."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.neutraliser = Neutraliser(served_specials(counter))
        self.system_prompt = SYSTEM_PROMPT
        self.tools = emil_tool_specs()
        self.messages: list[Message] = []

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        stored = self.neutraliser.message(message)
        self.messages.append(stored)
        return stored

    def count_text(self, text: str) -> int:
        return self.counter.count(self.neutraliser(text))

    def assemble(self, limit: int | None = None) -> AssemblyView:
        raise NotImplementedError("the synthetic day assembles no prompts: a sweep does, per budget")

    def observe_usage(self, predicted: int, actual: int) -> None:
        """No server: nothing to calibrate."""

    async def prepare(self) -> None:
        """Nothing between turns."""


class _TimedWorld:
    """The simulated body's world port, each call taking the game time its job takes: a wrapper
    around the body (:class:`~emil.world.actions.BotWorld` over the simulated body, no guard:
    the day's people are scripted, so nothing happens on their words)."""

    def __init__(self, day: _Day, memory: MemoryTools | None = None) -> None:
        self.day = day
        self.inner = BotWorld(day.body, ActionPolicy(), memory=memory)
        self.last_snapshot: Mapping[str, Any] = {}

    def events(self) -> AsyncIterator[GameEvent]:
        return self.inner.events()

    async def snapshot(self) -> Mapping[str, Any]:
        self.last_snapshot = await self.inner.snapshot()
        return self.last_snapshot

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return await self.inner.begin_turn(turn)

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        outcome = await self.inner.run_tool(call, turn)
        lo, hi = DURATIONS.get(call.name, (0.1, 0.3))
        self.day.world.t += self.day.rng.uniform(lo, hi)
        return outcome

    async def abort(self) -> None:
        await self.inner.abort()


class _ScriptedModel:
    """Emil's script as the turn engine's model: the steps decided for the turn's events and
    status, one completion per request, each after the game time an answer takes."""

    def __init__(self, day: _Day) -> None:
        self.day = day
        self.events: list[GameEvent] = []
        self.steps: Iterator[Step] | None = None
        self.calls = 0

    def begin(self, events: list[GameEvent]) -> None:
        self.events, self.steps = events, None

    async def __call__(self, assemble: Assembler, on_event: Callable[[RecoveryEvent], None]) -> Completion:
        day = self.day
        if self.steps is None:  # the first step: decide, seeing the status the observation shows
            self.steps = iter(day.emil.decide(self.events, dict(day.world_port.last_snapshot)))
        step = next(self.steps)
        day.world.t += day.rng.uniform(0.8, 2.5)  # the model's answer
        reasoning = day.emil.thought(self.events, step) if day.reasoning else None
        calls = []
        for name, args in step.calls:
            self.calls += 1
            raw = json.dumps(args, ensure_ascii=False)
            # as the live client does: every call checked by the one validation
            calls.append(validate_tool_call(ToolCall(id=f"call_{self.calls}", name=name, raw_arguments=raw, arguments=args)))
        return Completion(content=None if calls else step.text, tool_calls=calls, reasoning=reasoning)


class _Day:
    """One run of the simulation (see the module doc)."""

    def __init__(self, seed: int, hours: float, *, start: float, reasoning: bool,
                 store: MemoryStore | None, notes: PinnedNotes | None, notes_every_s: float,
                 counter: TokenCounter, archive: Archive | None = None, plant: bool = True,
                 per_kind: int = 0, wordings: Wordings = "main") -> None:
        self.rng = random.Random(seed)
        self.start, self.end = start, start + hours * 3600.0
        self.world = SimWorld(random.Random(seed + 1), start)
        self.body = SimBody(self.world)
        said = said_facts(seed=seed, speakers=[p.name for p in ROSTER], per_kind=per_kind, bot_name=BOT,
                          wordings=wordings) if per_kind else ()
        self.people = Happenings(self.rng, self.world, start=start, end=self.end, said=said, plant=plant, seed=seed)
        self.archivist = Archivist(archive, bot_name=BOT, clock=lambda: self.world.t) if archive is not None else None
        self.emil = ScriptedEmil(self.rng, self.world)
        self.perception = Perception(Settings(bot_name=BOT))
        self.learner = Learner(store, bot_name=BOT, clock=lambda: self.world.t) if store is not None else None
        self.pinned, self.notes_every_s = notes, notes_every_s
        self.reasoning = reasoning
        self.turns: list[SyntheticTurn] = []
        self.notes: list[tuple[float, str | None]] = []
        self.context = _DayContext(counter)
        tools = None
        if archive is not None and store is not None and self.archivist is not None:
            tools = MemoryTools(archive, self.archivist, store, tokens_of=counter.count, bot_name=BOT,
                                neutralise=self.context.neutraliser, clock=lambda: self.world.t)
        self.world_port = _TimedWorld(self, tools)
        port: WorldPort = (self.world_port if self.learner is None
                           else RememberingWorld(self.world_port, self.learner, self.archivist))
        self.topic: Topic | None = None
        self.model = _ScriptedModel(self)
        settings = _DEFAULTS.model_copy(update={"enable_thinking": reasoning})
        budget = Budget.of(_NOMINAL_WINDOW, settings.output_reserve, sources={"window": "the day's nominal window"})
        self.engine = TurnEngine(
            context=self.context, model=self.model, world=port,
            shape=RequestShape.of(settings, preserve_thinking=settings.preserve_thinking, tools=self.context.tools),
            step_limit=settings.step_limit,
            observation_cap=observation_cap(settings.observation_cap_tokens, budget.prompt_budget),
            clock=Clock(wall=lambda: self.world.t, monotonic=lambda: self.world.t),
            recall=self._topic,
        )

    def _topic(self, events: list[GameEvent], snapshot: Mapping[str, Any] | None) -> str | None:
        """The engine's recall hook: what the turn is about is kept; the lines come per budget
        in the sweep (see the module doc), so none is added here."""
        self.topic = topic_of(events, snapshot, bot_name=BOT)
        return None

    def turn(self) -> None:
        """One turn through the turn engine (it never waits on anything real)."""
        triaged = self.perception.take()
        start = self.world.t
        self.context.messages = []
        self.topic = None
        self.model.begin([t.event for t in triaged])
        stats = TurnStats(turn=len(self.turns) + 1, reason="events", started=start)
        resolve(self.engine.run(stats, triaged, ambient=self.perception.ambient))
        self.turns.append(SyntheticTurn(start, tuple(self.context.messages), self.topic))

    def run(self) -> Iterator[SyntheticTurn]:
        """The turns as they happen, until ``end`` (game time)."""
        self.people.schedule()
        next_notes = self.start
        while True:
            wait = self.perception.wait_s(self.world.t)
            if wait == 0:
                self.turn()
                yield self.turns[-1]
                if self.pinned is not None and self.world.t >= next_notes:
                    before = self.pinned.text()
                    self.pinned.prepare()
                    if self.pinned.text() != before:
                        self.notes.append((self.world.t, self.pinned.text()))
                    next_notes = self.world.t + self.notes_every_s
                continue
            due = self.people.queue[0][0] if self.people.queue else math.inf
            if wait is not None:
                due = min(due, self.world.t + wait)
            if due >= self.end:
                return
            self.world.t = max(self.world.t, due)
            while self.people.queue and self.people.queue[0][0] <= self.world.t:
                _, _, what = heapq.heappop(self.people.queue)
                for event in self.people.happen(what):
                    if self.learner is not None:
                        self.learner.observe(event)
                    if self.archivist is not None:
                        self.archivist.observe(event)
                    self.perception.add(event, now=self.world.t)


def synthetic_day(
    hours: float = 24.0,
    *,
    seed: int = 7,
    reasoning: bool = _DEFAULTS.enable_thinking,
    data_dir: Path | None = None,
    memory_tokens: int = _DEFAULTS.memory_tokens,
    tokenizer: str = DEFAULT_FAMILY,
    notes_every_s: float = 300.0,
    start: float = DAY_START,
    per_kind: int = 3,
    plant: bool = True,
    wordings: Wordings = "main",
) -> SyntheticDay:
    """``hours`` of seeded play (see the module doc).

    The notes learned and the lines archived go to ``data_dir`` (a fresh temporary one when
    None, deleted after; scratch databases: no disk syncs); the pinned block is rendered within
    ``memory_tokens`` of ``tokenizer`` at most every ``notes_every_s`` game seconds, when the
    notes changed (live renders between turns; a sweep only needs the block a trim would take).
    ``per_kind`` facts of each kind are said in conversation (0: none); ``plant=False`` is the
    null run; ``wordings``: which of :data:`emil.offline.facts.WORDINGS` they are said in."""
    if hours <= 0:
        raise ValueError(f"--synthetic-hours must be positive, got {hours}")
    with tempfile.TemporaryDirectory(prefix="emil-day-") as scratch:
        folder = data_dir or Path(scratch)
        store = MemoryStore.open(folder, durable=False)
        archive = Archive.open(folder, retention_days=0, durable=False)
        try:
            counter = get_token_counter(tokenizer)
            pinned = PinnedNotes(store, max_tokens=memory_tokens, tokens_of=counter.count) if memory_tokens > 0 else None
            day = _Day(seed, hours, start=start, reasoning=reasoning, store=store, notes=pinned,
                       notes_every_s=notes_every_s, counter=counter, archive=archive, plant=plant, per_kind=per_kind,
                       wordings=wordings)
            if pinned is not None and day.learner is not None:
                learner = day.learner
                pinned.present = lambda: learner.present
                day.notes.append((start, pinned.text()))
            for _turn in day.run():
                pass
        finally:
            archive.close()
            store.close()
    return SyntheticDay(
        turns=tuple(day.turns), planted=tuple(day.people.planted), notes=tuple(day.notes),
        system_prompt=SYSTEM_PROMPT, tools=emil_tool_specs(), seed=seed, hours=hours,
        data_dir=data_dir, planted_said=plant,
    )


def synthetic_turns(seed: int = 0, *, start_time: float = DAY_START, reasoning: bool = True) -> Iterator[SyntheticTurn]:
    """The turns of a seeded synthetic day (see :func:`synthetic_day`), without notes; a
    stream for tests and benchmarks that take as many turns as they need."""
    day = _Day(seed, math.inf, start=start_time, reasoning=reasoning, store=None, notes=None,
               notes_every_s=math.inf, counter=get_token_counter(DEFAULT_FAMILY))
    yield from day.run()


def history_of(turns: list[SyntheticTurn]) -> History:
    """A History holding these turns."""
    return History(tuple(turn.messages for turn in turns))


def request_steps(turn: SyntheticTurn) -> Iterator[tuple[bool, list[Message]]]:
    """How the agent loop grows history within one turn, request by request: the opening starts
    the turn (``True``); each assistant message with its tool results is appended (``False``)
    before the next request."""
    yield True, [turn.messages[0]]
    group: list[Message] = []
    for message in turn.messages[1:]:
        if message.role == "assistant" and group:
            yield False, group
            group = []
        group.append(message)
    if group:
        yield False, group


def grow(history: History, new_turn: bool, messages: list[Message]) -> History:
    """Apply one :func:`request_steps` step to a history."""
    if new_turn:
        history = history.start_turn(messages[0])
        messages = messages[1:]
    return history.extend(messages)


def synthetic_trace(
    hours: float,
    *,
    seed: int = 7,
    reasoning: bool = _DEFAULTS.enable_thinking,
    preserve_thinking: bool = _DEFAULTS.preserve_thinking,
    model_family: str = DEFAULT_FAMILY,
    memory_tokens: int = _DEFAULTS.memory_tokens,
    data_dir: Path | None = None,
) -> SessionTrace:
    """``hours`` of the synthetic day as a trace the budget sweep replays: the turns, the
    pinned notes block as it changed, and the planted facts (see :func:`synthetic_day`);
    with ``data_dir`` (kept by the caller) also its archive, for retrieval in the sweep."""
    day = synthetic_day(hours, seed=seed, reasoning=reasoning, memory_tokens=memory_tokens, tokenizer=model_family,
                        data_dir=data_dir)
    return day_trace(day, preserve_thinking=preserve_thinking, model_family=model_family)


def day_trace(day: SyntheticDay, *, preserve_thinking: bool = _DEFAULTS.preserve_thinking,
              model_family: str = DEFAULT_FAMILY) -> SessionTrace:
    """A generated day as a :class:`SessionTrace`."""
    return SessionTrace.from_turns(
        (t.messages for t in day.turns),
        name=f"synthetic {day.hours:g} h (seed {day.seed})",
        system_prompt=day.system_prompt,
        tools=day.tools,
        preserve_thinking=preserve_thinking,
        model_family=model_family,
        notes=day.notes,
        planted=day.planted,
        topics=[t.topic for t in day.turns],
        archive=day.data_dir / ARCHIVE_FILE if day.data_dir is not None else None,
    )


def synthetic_pieces(hours: float, *, seed: int = 7) -> Iterator[Piece]:
    """The synthetic day's text by content category (for chars_per_token)."""
    trace = synthetic_trace(hours, seed=seed)
    messages = (s.message for s in trace.steps if s.message is not None)
    return message_pieces(messages, system_prompt=trace.system_prompt, tools=trace.tools)


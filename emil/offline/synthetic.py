"""A synthetic day of Emil's play, built from Emil's real parts, for sweeps, benchmarks and tests.

Seeded and deterministic: the same seed gives the same day. A small world simulation (players
joining and leaving over the day, their chat, requests, gifts and hits, mobs at night, time and
weather, Emil's hunger and jobs) produces typed game events (:mod:`emil.events`). Emil's own
:class:`~emil.perception.Perception` classifies them and decides when a turn starts, and its
formatters write the observation (:func:`~emil.perception.format_events`,
:func:`~emil.perception.format_status_line`). A scripted policy (rules, not a model) answers
with tool calls; the tool classes (:mod:`emil.world.actions`) validate them, run them against the
simulated body and word the results exactly as live. The system prompt is rendered from
prompts/ and the tool specs come from the tool classes. The notes learner
(:class:`~emil.memory.learn.Learner`) and the archivist (:class:`~emil.memory.archivist.Archivist`)
are fed the same events, snapshots and outcomes, so the pinned notes block and the archive grow
as they would live; each turn keeps what it is about (its :class:`~emil.memory.retrieval.Topic`),
so a sweep can recall old lines into it as the agent loop does.

Facts said in conversation are planted at random times (:class:`PlantedFact`, worded by
:mod:`emil.offline.facts`, a generator the memory code never imports); their probes say which
strings must share one line of a prompt for the fact to count as there
(:mod:`emil.offline.recall`). ``plant=False`` is the null run: the same facts and probes,
never said.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emil.agent.persona import load_system_prompt
from emil.config import Settings
from emil.context.history import History, Message
from emil.events import (
    Chat,
)
from emil.llm.types import ToolCall
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.archivist import Archivist
from emil.memory.learn import Learner
from emil.memory.pinned import PinnedNotes
from emil.memory.retrieval import Topic, topic_of
from emil.memory.store import MemoryStore
from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.offline.content import Piece, message_pieces
from emil.offline.facts import said_facts
from emil.offline.recall import PlantedFact
from emil.offline.sim_people import ROSTER, Happenings
from emil.offline.sim_policy import ScriptedEmil
from emil.offline.sim_world import BOT, DURATIONS, SimBody, SimWorld, resolve
from emil.offline.trace import SessionTrace
from emil.perception import (
    Perception,
    PerceptionPolicy,
    format_events,
    format_status_line,
)
from emil.world.actions import parse_tool, tool_specs
from emil.world.tool import ActionPolicy, ToolContext

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
    """One turn: its messages, the game time it started, and what it is about."""

    t: float
    messages: tuple[Message, ...]
    topic: Topic | None = None


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


class _Day:
    """One run of the simulation (see the module doc)."""

    def __init__(self, seed: int, hours: float, *, start: float, reasoning: bool,
                 store: MemoryStore | None, notes: PinnedNotes | None, notes_every_s: float,
                 archive: Archive | None = None, plant: bool = True, per_kind: int = 0) -> None:
        self.rng = random.Random(seed)
        self.start, self.end = start, start + hours * 3600.0
        self.world = SimWorld(random.Random(seed + 1), start)
        self.body = SimBody(self.world)
        said = said_facts(seed=seed, speakers=[p.name for p in ROSTER], per_kind=per_kind, bot_name=BOT) if per_kind else ()
        self.people = Happenings(self.rng, self.world, start=start, end=self.end, said=said, plant=plant, seed=seed)
        self.archivist = Archivist(archive, bot_name=BOT, clock=lambda: self.world.t) if archive is not None else None
        self.emil = ScriptedEmil(self.rng, self.world)
        self.perception = Perception(PerceptionPolicy(bot_name=BOT))
        self.learner = Learner(store, bot_name=BOT, clock=lambda: self.world.t) if store is not None else None
        self.pinned, self.notes_every_s = notes, notes_every_s
        self.reasoning = reasoning
        self.turns: list[SyntheticTurn] = []
        self.notes: list[tuple[float, str | None]] = []
        self._calls = 0


    def run_call(self, name: str, args: dict[str, Any], requesters: frozenset[str]) -> tuple[dict[str, str], Message]:
        """One tool call through the real tool class against the simulated body."""
        self._calls += 1
        call_id = f"call_{self._calls}"
        raw = json.dumps(args, ensure_ascii=False)
        call = ToolCall(id=call_id, name=name, raw_arguments=raw, arguments=args)
        goal = self.learner.job_started(name, args, requesters) if self.learner else None
        tool = parse_tool(call)
        if isinstance(tool, str):
            text, ok = f"error: {tool}", False
        else:
            outcome = resolve(tool.run(ToolContext(self.body, ActionPolicy(requesters=requesters))))
            text, ok = outcome.text, outcome.ok
        lo, hi = DURATIONS.get(name, (0.1, 0.3))
        self.world.t += self.rng.uniform(lo, hi)
        if self.learner is not None:
            self.learner.job_ended(goal, "done" if ok else "failed")
            self.learner.tool_done(name, args, ok, requesters)
        if self.archivist is not None:
            self.archivist.tool_done(name, args, ok, text)
        return {"id": call_id, "name": name, "arguments": raw}, Message.tool_result(call_id, text, event_time=self.world.t)

    def turn(self) -> None:
        triaged = self.perception.take()
        events = [x.event for x in triaged]
        start = self.world.t
        snapshot = self.world.snapshot()
        if self.learner is not None:
            self.learner.observe_snapshot(snapshot)
        opening = Message(
            role="user", kind="observation", content=format_events(triaged),
            status=format_status_line(snapshot, self.perception.ambient),
            event_time=min((e.t for e in events), default=start),
        )
        messages = [opening]
        requesters = frozenset(e.sender for e in events if isinstance(e, Chat))
        for step in self.emil.decide(events, snapshot):
            self.world.t += self.rng.uniform(0.8, 2.5)  # the model's answer
            reasoning = self.emil.thought(events, step) if self.reasoning else None
            if not step.calls:
                messages.append(Message.assistant(step.text, reasoning=reasoning, event_time=opening.event_time))
                break
            done = [self.run_call(name, args, requesters) for name, args in step.calls]
            messages.append(Message.assistant(None, tool_calls=[c for c, _ in done], reasoning=reasoning,
                                              event_time=opening.event_time))
            messages.extend(m for _, m in done)
        self.turns.append(SyntheticTurn(start, tuple(messages), topic_of(events, snapshot, bot_name=BOT)))

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
) -> SyntheticDay:
    """``hours`` of seeded play (see the module doc).

    The notes learned and the lines archived go to ``data_dir`` (a fresh temporary one when
    None, deleted after; scratch databases: no disk syncs); the pinned block is rendered within
    ``memory_tokens`` of ``tokenizer`` at most every ``notes_every_s`` game seconds, when the
    notes changed (live renders between turns; a sweep only needs the block a trim would take).
    ``per_kind`` facts of each kind are said in conversation (0: none); ``plant=False`` is the
    null run."""
    if hours <= 0:
        raise ValueError(f"--synthetic-hours must be positive, got {hours}")
    with tempfile.TemporaryDirectory(prefix="emil-day-") as scratch:
        folder = data_dir or Path(scratch)
        store = MemoryStore.open(folder, durable=False)
        archive = Archive.open(folder, retention_days=0, durable=False)
        try:
            counter = get_token_counter(tokenizer)
            pinned = (PinnedNotes(store, max_tokens=memory_tokens, tokens_of=counter.count) if memory_tokens > 0
                      else None)
            day = _Day(seed, hours, start=start, reasoning=reasoning, store=store, notes=pinned,
                       notes_every_s=notes_every_s, archive=archive, plant=plant, per_kind=per_kind)
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
    day = _Day(seed, math.inf, start=start_time, reasoning=reasoning, store=None, notes=None, notes_every_s=math.inf)
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


"""The trim ladder is data: an ordered list of rung objects that an operator can reorder or
switch off, checked at start, and that a new rung joins as one class plus registering it.

``PreparedSummary`` is a test rung with the shape of issue #13's model-written summary: its
``prepare`` (between turns) asks the served model (``Preparation.llm``; here an in-process
stand-in, ``SummaryLLM``) for summary lines of the oldest turns; its ``apply`` (inside
``assemble``, synchronous) folds a turn with its prepared line and leaves any turn without one
to the ``fold`` rung after it (the deterministic digest).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from emil.agent import Agent
from emil.agent.context_port import ManagedContext
from emil.config import Settings, load_settings
from emil.context.budget import Budget
from emil.context.history import History
from emil.context.ladder import DEFAULT_RUNGS, LadderConfig, Preparation, Rung, Trim
from emil.context.manager import ContextManager
from emil.context.rungs import RUNGS, build_rungs, check_rungs, fold_note, register_rung
from emil.exceptions import ConfigurationError, EndpointUnavailable
from emil.llm.types import ChatRequest, Completion
from emil.offline.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_turns,
)
from emil.recording import Recorder, TrimRecord, read_recording
from emil.world.events import Chat
from tests.unit.agent.doubles import WorldDouble, answer, scripted_completer, tool

WITH_SUMMARY = ("drop_reasoning", "collapse_status", "elide_results", "prepared_summary", "fold", "evict", "cut_newest")


class SummaryLLM:
    """An in-process stand-in for the served model (a test double): it answers a summary
    request with a numbered line, or fails like a busy endpoint."""

    def __init__(self) -> None:
        self.asked = 0
        self.busy = False

    async def complete(self, request: ChatRequest) -> Completion:
        await anyio.lowlevel.checkpoint()
        if self.busy:
            raise EndpointUnavailable("503 busy")
        self.asked += 1
        return Completion(content=f"(summary {self.asked}) {str(request.messages[-1]['content'])[:30]}")


class PreparedSummary(Rung):
    """Folds the oldest turns with summary lines the model wrote between turns (a test rung)."""

    name = "prepared_summary"

    def __init__(self) -> None:
        self.ready: dict[tuple[float | None, str | None], str] = {}
        """Summary line per turn, by its opening's time and events (the cheap rungs change its
        status, never them)."""
        self.idle = anyio.Event()
        """Set at the end of each preparation (the loop test waits for it)."""

    async def prepare(self, p: Preparation) -> None:
        # The turns the next trim would fold first: the oldest, up to what a trim frees.
        room = p.budget - p.target
        for turn in p.history.turns[:-1]:
            if room <= 0 or p.llm is None:  # no model offline: those turns get the digest
                break
            room -= sum(p.tokens_of(m.text) for m in turn)
            key = (turn[0].event_time, turn[0].content)
            if key not in self.ready:
                request = ChatRequest(messages=[{"role": "user", "content": turn[0].content or ""}], max_completion_tokens=60)
                try:
                    self.ready[key] = "- " + ((await p.llm.complete(request)).content or "")
                except EndpointUnavailable:
                    break  # busy: those turns get the digest
        self.idle.set()

    def apply(self, trim: Trim) -> None:
        while trim.over and len(trim.history.turns) > 1:
            oldest = trim.history.turns[0]
            line = self.ready.get((oldest[0].event_time, oldest[0].content))
            if line is None:
                return  # not prepared in time: the fold rung digests it
            if not trim.try_fold(fold_note(trim.history.memory, line, oldest, trim)):
                return  # it would not fit: the same


@pytest.fixture
def summary_rung() -> Iterator[type[Rung]]:
    register_rung(PreparedSummary)
    yield PreparedSummary
    RUNGS.pop(PreparedSummary.name)


def test_the_default_ladder_is_todays_order() -> None:
    # refresh_notes first (the pinned notes change only at a trim, before anything is measured
    # away), summarise before fold (a model's summary where one is ready, the digest for the
    # rest); both do nothing without a session's notes and summariser.
    assert [type(r).name for r in build_rungs(LadderConfig())] == list(DEFAULT_RUNGS) == [
        "refresh_notes", "drop_reasoning", "collapse_status", "elide_results", "summarise", "fold", "evict",
        "cut_newest",
    ]


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (("drop_reasoning", "elide_result", "evict", "cut_newest"), "unknown trim rung 'elide_result': did you mean 'elide_results'?"),
        (("fold", "fold", "evict", "cut_newest"), "'fold' is listed twice"),
        (("fold", "cut_newest"), "must include 'evict' (the only rung that can remove every old turn and the memory note; without it a prompt may never fit): add it before 'cut_newest'"),
        (("fold", "evict"), "must include 'cut_newest' (the only rung that can shrink the turn in progress; without it a prompt may never fit): add it at the end"),
        (("cut_newest", "evict"), "'cut_newest' must be the last one: move it to the end"),
    ],
)
def test_an_order_that_cannot_work_is_refused_with_the_fix(order: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        check_rungs(order)


def test_the_setting_is_checked_at_start(tmp_path: Path) -> None:
    toml = tmp_path / "emil.toml"
    toml.write_text('[context]\ntrim_rungs = ["collapse_status", "evict", "cut_newest"]\n')
    loaded = load_settings({}, env={}, config_file=toml)
    assert loaded.settings.trim_rungs == ("collapse_status", "evict", "cut_newest")
    env = load_settings({}, env={"EMIL_TRIM_RUNGS": "fold, evict, cut_newest"}, config_file=toml)
    assert env.settings.trim_rungs == ("fold", "evict", "cut_newest")
    toml.write_text('trim_rungs = ["drop_reasonin", "evict", "cut_newest"]\n')
    with pytest.raises(ConfigurationError, match=r"bad setting trim_rungs=.* \(file .*emil.toml\): .*did you mean 'drop_reasoning'\?"):
        load_settings({}, env={}, config_file=toml)


def _play(manager: ContextManager, turns: int, *, seed: int = 4) -> tuple[History, list[list[str]]]:
    """Synthetic play through ``manager``; the rungs that fired, trim by trim."""
    history, trims = History(), []
    for index, turn in enumerate(itertools.islice(synthetic_turns(seed), turns)):
        for new_turn, messages in request_steps(turn):
            assembly = manager.assemble(grow(history, new_turn, messages), now=2e9 + index)
            history = assembly.history
            trims += [[t.rung for t in assembly.trims]] if assembly.trims else []
    return history, trims


def test_a_reordered_ladder_runs_in_that_order_and_a_rung_left_out_never_runs() -> None:
    budget = Budget(16000, output_reserve=4096)
    order = ("collapse_status", "drop_reasoning", "evict", "cut_newest")  # the default runs them the other way
    manager = ContextManager(
        "qwen3.6", budget, SYSTEM_PROMPT, emil_tool_specs(), preserve_thinking=True,  # reasoning costs
        ladder=LadderConfig(rungs=order),
    )
    history, trims = _play(manager, 60)
    fired = {rung for trim in trims for rung in trim}
    assert "evict" in fired and fired <= set(order)
    assert "fold" not in fired and history.memory is None  # switched off: no memory note
    for trim in trims:  # within one trim, rungs fire in the configured order
        assert trim == sorted(trim, key=order.index)
    assert any(trim[:2] == ["collapse_status", "drop_reasoning"] for trim in trims)


async def test_a_new_rung_is_one_class_plus_registering_it(summary_rung: type[Rung]) -> None:
    assert load_settings({"trim_rungs": ",".join(WITH_SUMMARY)}, env={}).settings.trim_rungs == WITH_SUMMARY
    budget = Budget(16000, output_reserve=4096)
    manager = ContextManager(
        "qwen3.6", budget, SYSTEM_PROMPT, emil_tool_specs(), preserve_thinking=True,
        ladder=LadderConfig(rungs=WITH_SUMMARY, memory_max_tokens=3000),
    )
    llm = SummaryLLM()
    context = ManagedContext(manager, SYSTEM_PROMPT, emil_tool_specs(), llm=llm)
    records: list[TrimRecord] = []
    notes: list[list[str]] = []
    requests = 0
    for index, turn in enumerate(itertools.islice(synthetic_turns(5), 120)):
        llm.busy = index >= 70  # later the endpoint is busy: nothing gets prepared
        await context.prepare()  # between turns
        asked = llm.asked
        for new_turn, messages in request_steps(turn):
            for n, message in enumerate(messages):
                context.add(message, new_turn=new_turn and n == 0)
            assemblies = [context.assemble().assembly]
            if requests % 25 == 24:  # an overflow recovery asks again, smaller
                assemblies.append(context.assemble(limit=assemblies[0].predicted_tokens - 300).assembly)
            requests += 1
            assert llm.asked == asked  # nothing in assemble asks the model
            for assembly in assemblies:
                records += assembly.trims
                if assembly.trims and assembly.history.memory is not None:
                    notes.append((assembly.history.memory.content or "").split("\n")[1:])
                # Summaries land only at trims: between them each prompt extends the last one.
                assert assembly.trims or assembly.extends_previous or requests == 1
    fired = [r.rung for r in records]
    assert "prepared_summary" in fired and "fold" in fired
    assert fired.index("prepared_summary") < fired.index("fold")  # prepared first, digest later
    # Prepared lines, then digest lines for the turns folded after the model went "busy".
    assert any(
        lines[0].startswith("- (summary ") and lines[-1].startswith("- ") and "(summary" not in lines[-1]
        for lines in notes
    )


async def test_the_loop_prepares_the_real_ladder_between_turns(tmp_path: Path, summary_rung: type[Rung]) -> None:
    # The agent loop, the real context manager and the test rung: summaries are written while
    # the loop idles between turns and used at the next trim, which the recording shows.
    system = "You are Emil."
    manager = ContextManager(
        "qwen3.6", Budget(2400, output_reserve=1024, margin=0), system, [],
        ladder=LadderConfig(rungs=WITH_SUMMARY),
    )
    rung = next(r for r in manager.rungs if isinstance(r, PreparedSummary))
    llm = SummaryLLM()
    context = ManagedContext(manager, system, [], llm=llm)
    world = WorldDouble()

    def brain(req: ChatRequest) -> Completion:
        if req.messages[-1]["role"] == "user":
            return answer(tool("say", json.dumps({"text": "hello again, " * 8})))
        return answer(content="done")

    completer, _ = scripted_completer(brain)
    rec = Recorder(tmp_path / "rec.jsonl")
    agent = Agent(world=world, context=context, completer=completer, recorder=rec,
                  settings=Settings(chat_debounce_s=0.0, stream=False, preserve_thinking=False))
    turns = 16

    async def player() -> None:
        for i in range(turns):
            rung.idle = anyio.Event()
            await world.send.send(Chat(sender="alex", text=f"line {i}: " + "tell me about the river " * 4))
            if i < turns - 1:
                await rung.idle.wait()  # the turn ended and the loop prepared while idle

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(player)
                await agent.run(max_turns=turns)
    finally:
        world.close()
        rec.close()
    assert llm.asked > 0
    trims = [r for r in read_recording(tmp_path / "rec.jsonl").records if isinstance(r, TrimRecord)]
    assert any(r.rung == "prepared_summary" and r.turn is not None for r in trims)
    assert context.history.memory is not None and "(summary " in (context.history.memory.content or "")


async def test_preparing_costs_nothing_when_no_rung_prepares(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loop prepares whenever it idles; with the built-in rungs there is nothing to prepare,
    # so not even the history is counted (synchronous work would delay a turn that starts).
    manager = ContextManager("qwen3.6", Budget(16000, output_reserve=4096), SYSTEM_PROMPT, emil_tool_specs())
    history = History().start_turn(next(synthetic_turns(1)).messages[0])

    def no_count(_: History) -> int:
        raise AssertionError("counted while preparing")

    monkeypatch.setattr(manager, "count", no_count)
    await manager.prepare(history)

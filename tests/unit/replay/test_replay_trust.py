"""The trust parts of a turn hold live and replay byte for byte (issue #22, docs/trust.md).

A session played by the real agent loop (perception with its NPC budget, the turn engine, the
recorder) against a world double that has a guard's shape (it hears each turn's words and runs
a command an operator confirmed before the model, noted in the observation) and a scripted
completer (a double) whose answer had calls past the cap dropped. The recording names every
action's requesters and rule; an NPC's whisper (another Emil nobody listed) is not urgent live,
and replay triages it the same way; replay rebuilds every request identically.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from emil.agent.context_port import session_context
from emil.agent.loop import Agent
from emil.agent.startup import agent_options, live_perception
from emil.config import Settings
from emil.context.budget import Budget
from emil.llm.client import parse_tool_call
from emil.llm.types import ChatRequest, Completion, ToolCall, Usage
from emil.model.family import DEFAULT_FAMILY, family_by_name
from emil.recording import (
    CONFIRMED_COMMAND,
    EventRecord,
    HeaderRecord,
    ObservationRecord,
    Recorder,
    ToolResultRecord,
    read_recording,
)
from emil.replay import replay_file
from emil.trust.authority import Authority
from emil.world.actions import tool_specs, validate_tool_call
from emil.world.events import Chat, GameEvent
from emil.world.port import TurnContext
from emil.world.tool import Outcome

SYSTEM = "You are Emil, a villager. Use the tools."
SETTINGS = Settings(chat_debounce_s=0.0, urgent_interval_s=0.0, operators=("bob",), npc_players=("Otto",))
CONFIRMED = "sent /time set day (bob confirmed it)"


class GuardedWorld:
    """A world double shaped like the live one: it hears the turn's words first."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[GameEvent](100)
        self.words: list[Authority] = []

    async def events(self) -> AsyncIterator[GameEvent]:
        async for ev in self.receive:
            yield ev

    async def snapshot(self) -> Mapping[str, Any]:
        return {"connected": True, "health": 20.0, "food": 20.0, "position": {"x": 0, "y": 64, "z": 0}}

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        words = turn.words
        self.words.append(words)
        if any(line.speaker == "bob" and line.text == "yes" for line in words.lines):
            return [Outcome(True, CONFIRMED, {"command": "/time set day", "code": "k7", "confirmed_by": "bob"},
                            rule="command")]
        return []

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        return Outcome(True, f"{call.name} done", rule="say" if call.name == "say" else "free")

    async def abort(self) -> None:
        return None


class CappedModel:
    """A scripted completer (a double): to "please" it answers two calls, three more having
    been dropped by the client's cap; to anything else, text."""

    def __init__(self) -> None:
        self.n = 0

    async def __call__(self, assemble: Callable[[int | None], ChatRequest], on_event: Callable[[Any], None]) -> Completion:
        request = assemble(None)
        self.n += 1
        last = request.messages[-1]
        text = str(last.get("content") or "") if last["role"] == "user" else ""
        usage = Usage(prompt_tokens=request.predicted_prompt_tokens or 0, completion_tokens=5)
        if "please" in text:
            calls = [validate_tool_call(parse_tool_call(f"c{self.n}_{i}", "say", f'{{"text": "line {i}"}}'))
                     for i in range(2)]
            return Completion(tool_calls=calls, usage=usage, dropped_tool_calls=3)
        return Completion(content=f"answer {self.n}", usage=usage)


async def _play(path: Path) -> tuple[Path, GuardedWorld]:
    family = family_by_name(DEFAULT_FAMILY)
    budget = Budget(16384, output_reserve=2048)
    tools = tool_specs()
    context = session_context(SETTINGS, family=family, budget=budget, system_prompt=SYSTEM, tools=tools)
    world = GuardedWorld()
    with Recorder(path) as recorder:
        recorder.write(HeaderRecord(
            settings=SETTINGS.public_dump(), model=family.example, model_family=family.name,
            tokenizer=family.tokenizer().name, window=budget.window, output_reserve=budget.output_reserve,
            prompt_budget=budget.prompt_budget, enable_thinking=SETTINGS.enable_thinking,
            preserve_thinking=False, system_prompt=SYSTEM, tools=tools, bot_name=SETTINGS.bot_name,
        ))
        agent = Agent(world=world, context=context, completer=CappedModel(), recorder=recorder,
                      settings=SETTINGS, options=agent_options(SETTINGS, budget.prompt_budget, family),
                      perception=live_perception(SETTINGS))
        assert agent.perception.budget is not None
        agent.perception.budget.peers = lambda: frozenset({"Zed"})  # another Emil, found without a list

        async def turns(n: int) -> None:
            while sum(1 for t in agent.stats.turns if t.ended is not None) < n:  # noqa: ASYNC110
                await anyio.sleep(0.01)

        async def play() -> None:
            for n, event in enumerate([
                Chat(sender="bob", text="Emil please talk"),
                Chat(sender="bob", text="yes"),
                Chat(sender="Otto", text="Emil, hello from Otto"),
                Chat(sender="Zed", text="Emil, psst", whisper=True),
            ], start=1):
                await world.send.send(event)
                await turns(n)
            agent.stop("the test is over")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(play)
                await agent.run()
        world.send.close()
        world.receive.close()
    return path, world


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GuardedWorld]:
    return anyio.run(_play, tmp_path_factory.mktemp("trust") / "live.jsonl")


def test_live_turns_hear_their_words_and_record_who_asked(played: tuple[Path, GuardedWorld]) -> None:
    path, world = played
    assert [[(line.speaker, line.text) for line in w.lines] for w in world.words][:2] == [
        [("bob", "Emil please talk")], [("bob", "yes")]]
    records = read_recording(path).records
    results = [r for r in records if isinstance(r, ToolResultRecord)]
    confirmed = [r for r in results if r.step == 0]
    # recorded as what it is: a command (not a say the model wrote), the operator who confirmed
    # it as its requester, the confirmation it answered
    assert [(r.name, r.text, r.requested_by, r.rule, r.arguments) for r in confirmed] == [
        (CONFIRMED_COMMAND, CONFIRMED, ["bob"], "command", {"command": "/time set day", "confirmation": "k7"})]
    said = [r for r in results if r.step > 0]
    assert [(r.requested_by, r.rule) for r in said] == [(["bob"], "say"), (["bob"], "say")]
    assert said[0].text == "say done"
    assert said[1].text == "say done (3 more tool call(s) in that answer were not run: at most 2 per answer)"
    assert (said[1].answer, said[0].note) == ("say done", "")  # the engine's note is a field
    notes = [o.notes for o in records if isinstance(o, ObservationRecord)]
    assert notes[:2] == [[], [CONFIRMED]]
    messages = [r.openai for r in records if r.kind == "message" and r.openai.get("role") == "user"]
    assert str(messages[1]["content"]).startswith(f"[note] {CONFIRMED}\n")


def test_npc_lines_are_never_urgent_and_are_recorded_as_npc(played: tuple[Path, GuardedWorld]) -> None:
    path, _ = played
    chats: dict[str, EventRecord] = {}
    for r in read_recording(path).records:
        if isinstance(r, EventRecord) and r.event.get("kind") == "chat":
            chats.setdefault(r.event["sender"], r)  # each speaker's first line
    assert (chats["Zed"].priority, chats["Zed"].npc) == ("normal", True)  # a whisper, yet not urgent
    assert (chats["Otto"].priority, chats["Otto"].npc) == ("normal", True)
    assert (chats["bob"].priority, chats["bob"].npc) == ("urgent", False)  # "Emil please talk"


async def test_replay_rebuilds_the_trust_turns_byte_for_byte(played: tuple[Path, GuardedWorld]) -> None:
    report = await replay_file(played[0])
    assert report.stopped is None and not report.errors, (report.stopped, report.errors)
    assert report.turns_replayed == report.turns_total == 4
    assert report.identical == len(report.diffs) == report.steps_total, [d.to_json() for d in report.differing]
    assert report.observation_diffs == []


async def test_replay_of_a_note_recorded_before_it_was_a_field(played: tuple[Path, GuardedWorld], tmp_path: Path) -> None:
    """The dropped-calls note in a result written before ``note`` existed is told apart by its
    words, and the replay is as identical."""
    import json

    lines = [json.loads(line) for line in played[0].read_text(encoding="utf-8").splitlines()]
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text("".join(json.dumps({k: v for k, v in d.items() if k not in ("fate", "interrupt", "note")}
                                         if d["kind"] == "tool_result" else d) + "\n" for d in lines), encoding="utf-8")
    said = [r for r in read_recording(legacy).records if isinstance(r, ToolResultRecord) and r.step > 0]
    assert said[1].answer == "say done" and said[1].note.startswith(" (3 more tool call(s)")
    report = await replay_file(legacy)
    assert report.stopped is None and not report.errors, (report.stopped, report.errors)
    assert report.identical == len(report.diffs) == report.steps_total, [d.to_json() for d in report.differing]

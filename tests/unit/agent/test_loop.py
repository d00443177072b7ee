"""The agent loop with a world double, a context double and scripted completions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from emil.agent import Agent, SessionStats
from emil.backoff import Backoff, Patience
from emil.exceptions import ContextOverflowError, EndpointConfigError, EndpointUnavailable
from emil.llm.types import ChatRequest, Completion, ToolCall
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    ObservationRecord,
    Recorder,
    RequestRecord,
    RetryRecord,
    ServiceRecord,
    ToolResultRecord,
    TurnRecord,
    messages_for_request,
    read_recording,
)
from emil.world.events import Chat, Damage, Death, TimeOfDay
from emil.world.port import TurnContext
from emil.world.tool import Outcome
from tests.unit.agent.doubles import (
    ContextDouble,
    WorldDouble,
    answer,
    loop_parts,
    recovering_completer,
    scripted_completer,
    tool,
)


@pytest.fixture(autouse=True)
def _close_worlds() -> Iterator[None]:
    _WORLDS.clear()
    yield
    for w in _WORLDS:
        w.close()


_WORLDS: list[WorldDouble] = []


def _agent(tmp_path: Path, brain, completer=None, tools=None, **opts):  # type: ignore[no-untyped-def]
    world = WorldDouble()
    _WORLDS.append(world)
    context = ContextDouble(tools=tools or [])
    scripted, requests = scripted_completer(brain)
    completer = completer or scripted
    rec = Recorder(tmp_path / "rec.jsonl")
    agent = Agent(world=world, context=context, completer=completer, recorder=rec, **loop_parts(**opts))
    return agent, world, context, requests, rec


def _last_user(request: ChatRequest) -> str:
    return str([m for m in request.messages if m["role"] in ("user", "tool")][-1]["content"])


async def test_chat_turn_says_hello_and_records_everything(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        if req.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "hi alex"}'))
        return answer(content="done")

    agent, world, context, requests, rec = _agent(tmp_path, brain)
    await world.send.send(TimeOfDay(phase="night"))
    await world.send.send(Chat(sender="alex", text="hello there"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert [c.name for c in world.calls] == ["say"] and world.requesters == [frozenset({"alex"})]
    assert len(stats.turns) == 1 and stats.turns[0].steps == 2 and stats.actions == 1
    assert 'alex says: "hello there"' in _last_user(requests[0]) and "time night" in _last_user(requests[0])
    assert requests[1].messages[-1] == {"role": "tool", "content": "say ok", "tool_call_id": "c1"}
    read = read_recording(tmp_path / "rec.jsonl")
    assert read.complete
    kinds = [r.kind for r in read.records]
    for k in ("event", "message", "observation", "request", "completion", "tool_result", "turn", "end"):
        assert k in kinds
    # The recording rebuilds exactly what was sent.
    assert [m for _, m in messages_for_request(read.records)] == [r.messages for r in requests]
    turn = next(r for r in read.records if isinstance(r, TurnRecord))
    assert turn.actions == 1 and turn.latency_first_action_ms is not None
    assert context.observed == [(requests[0].predicted_prompt_tokens, 100), (requests[1].predicted_prompt_tokens, 100)]


async def test_every_player_whose_words_are_in_the_turn_is_a_requester(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        if req.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "ok"}'))
        return answer(content="done")

    agent, world, _, _, rec = _agent(tmp_path, brain, chat_debounce_s=0.3)
    # Lines in one burst (within the debounce) make one turn.
    await world.send.send(Chat(sender="alex", text="hello"))
    await world.send.send(Chat(sender="mallory", text="hi"))
    await world.send.send(Chat(sender="alex", text="again"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    await world.send.send(Damage(amount=2, health=18, attacker="zombie"))
    with anyio.fail_after(10):
        await agent.run(max_turns=2)
    rec.close()
    assert world.requesters == [frozenset({"alex", "mallory"}), frozenset()]


async def test_model_mistakes_go_back_as_tool_results(tmp_path: Path) -> None:
    script = [
        answer(tool("say", '{"text": "hi', "a"), tool("fly", "{}", "b")),
        answer(content="sorry"),
    ]

    def brain(req: ChatRequest) -> Completion:
        return script.pop(0)

    agent, world, _, requests, rec = _agent(tmp_path, brain)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    tool_msgs = [m for m in requests[1].messages if m["role"] == "tool"]
    assert "not a JSON object" in tool_msgs[0]["content"]
    assert "unknown tool 'fly'" in tool_msgs[1]["content"]
    # The broken arguments are not replayed to the server as-is.
    assistant = next(m for m in requests[1].messages if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    results = [r for r in read_recording(tmp_path / "rec.jsonl").records if isinstance(r, ToolResultRecord)]
    assert [r.ok for r in results] == [False, False]


async def test_urgent_event_aborts_a_long_action_and_starts_a_new_turn(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        last = _last_user(req)
        if "go over there" in last:
            return answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}'), tool("say", '{"text": "on my way"}', "c2"))
        if "you were hit" in last:
            return answer(tool("say", '{"text": "ouch"}', "c3"))
        return answer(content="ok")

    agent, world, _, requests, rec = _agent(tmp_path, brain)

    async def attacker() -> None:
        await world.send.send(Chat(sender="alex", text="go over there"))
        await world.action_started.wait()
        await world.send.send(Damage(amount=2, health=18, attacker="zombie"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(attacker)
            stats = await agent.run(max_turns=2)
    rec.close()
    assert world.aborts == 1
    assert stats.turns[0].interrupted and not stats.turns[1].interrupted
    assert "hit by zombie" in stats.turns[1].reason
    assert [c.name for c in world.calls] == ["go_to", "say"]
    # Every tool call got a result; the skipped one says why.
    second_turn_first = requests[2] if len(requests) > 2 else requests[-1]
    results = [m["content"] for m in second_turn_first.messages if m["role"] == "tool"]
    assert results[:2] == ["aborted: interrupted (hit by zombie)", "not run: interrupted (hit by zombie)"]


async def test_repeated_hits_by_the_same_attacker_do_not_abort_the_response(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        if req.messages[-1]["role"] == "user":
            return answer(tool("go_to", '{"x": 0, "y": 0, "z": 0}'))
        return answer(content="ok")

    agent, world, _, _, rec = _agent(tmp_path, brain, action_timeout_s=0.3)

    async def attacker() -> None:
        await world.send.send(Damage(amount=2, health=18, attacker="alex"))
        await world.action_started.wait()
        await world.send.send(Damage(amount=2, health=16, attacker="alex"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(attacker)
            stats = await agent.run(max_turns=1)
    rec.close()
    assert not stats.turns[0].interrupted
    results = [r for r in read_recording(tmp_path / "rec.jsonl").records if isinstance(r, ToolResultRecord)]
    assert "timed out" in results[0].text  # it ran to its own timeout, then was aborted
    assert world.aborts == 1


async def test_death_interrupts_and_clears_queued_action_news(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        if "go" in _last_user(req):
            return answer(tool("go_to", '{"x": 0, "y": 0, "z": 0}'))
        return answer(content="ok")

    agent, world, _, requests, rec = _agent(tmp_path, brain)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="go"))
        await world.action_started.wait()
        await world.send.send(Death(reason="lava"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=2)
    rec.close()
    assert stats.turns[0].interrupted and stats.turns[1].reason == "died"
    assert "you died (lava)" in _last_user(requests[-1])


async def test_endpoint_outage_is_waited_out_and_the_turn_completes(tmp_path: Path) -> None:
    outcomes: list[Completion | Exception] = [
        EndpointUnavailable("connection refused"),
        EndpointUnavailable("connection refused"),
        answer(tool("say", '{"text": "back"}')),
        answer(content="ok"),
    ]

    def brain(req: ChatRequest) -> Completion | Exception:
        return outcomes.pop(0)

    patience = Patience("llm endpoint", backoff=Backoff(0.001, 0.002))
    completer, llm = recovering_completer(brain, patience)
    agent, world, _, _, rec = _agent(tmp_path, brain, completer=completer)
    patience.on_event = agent.record_outage
    await world.send.send(Chat(sender="alex", text="Emil?"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert [c.name for c in world.calls] == ["say"]
    records = read_recording(tmp_path / "rec.jsonl").records
    assert not [r for r in records if isinstance(r, ErrorRecord)]
    # one request, sent three times: two failed attempts are retry records of step 1
    step1 = [r for r in records if isinstance(r, RequestRecord) and r.step == 1]
    assert len(step1) == 1 and llm.requests[0] is llm.requests[1] is llm.requests[2]
    retries = [r for r in records if isinstance(r, RetryRecord)]
    assert [(r.attempt, r.step, r.turn, r.service) for r in retries] == [(1, 1, 1, "llm endpoint"), (2, 1, 1, "llm endpoint")]
    assert [(r.state, r.attempts) for r in records if isinstance(r, ServiceRecord)] == [("down", 1), ("up", 2)]


async def test_a_completer_without_patience_fails_the_turn_not_the_session(tmp_path: Path) -> None:
    outcomes: list[Completion | Exception] = [EndpointUnavailable("connection refused"), answer(content="ok")]
    agent, world, _, _, rec = _agent(tmp_path, lambda req: outcomes.pop(0))
    await world.send.send(Chat(sender="alex", text="one"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
        await world.send.send(Chat(sender="alex", text="two"))
        stats = await agent.run(max_turns=2)
    rec.close()
    assert stats.turns[0].failed.startswith("EndpointUnavailable") and not stats.turns[1].failed
    errors = [r for r in read_recording(tmp_path / "rec.jsonl").records if isinstance(r, ErrorRecord)]
    assert [(e.error_type, e.where, e.turn) for e in errors] == [("EndpointUnavailable", "llm", 1)]


async def test_overflow_that_cannot_fit_ends_the_turn_not_the_session(tmp_path: Path) -> None:
    outcomes: list[Completion | Exception] = [
        ContextOverflowError("overflow recovery gave up", window=100),
        answer(content="ok"),
    ]

    def brain(req: ChatRequest) -> Completion | Exception:
        return outcomes.pop(0)

    agent, world, _, requests, rec = _agent(tmp_path, brain)
    await world.send.send(Chat(sender="alex", text="one"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
        await world.send.send(Chat(sender="alex", text="two"))
        await agent.run(max_turns=2)
    rec.close()
    # The first turn's observation stays in history, so nothing the player said is lost.
    last = [m["content"] for m in requests[-1].messages if m["role"] == "user"]
    assert any("one" in c for c in last) and any("two" in c for c in last)


async def test_configuration_errors_stop_the_run(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Exception:
        return EndpointConfigError("tool choice not enabled", status=400)

    agent, world, _, _, rec = _agent(tmp_path, brain)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10), pytest.raises(EndpointConfigError):
        await agent.run(max_turns=1)
    rec.close()
    turns = [r for r in read_recording(tmp_path / "rec.jsonl").records if isinstance(r, TurnRecord)]
    assert len(turns) == 1  # the turn record is still written


async def test_step_limit_ends_a_turn_that_keeps_calling_tools(tmp_path: Path) -> None:
    agent, world, _, requests, rec = _agent(
        tmp_path, lambda req: answer(tool("say", f'{{"text": "again {len(requests)}"}}')), step_limit=3)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert len(requests) == 3 and stats.turns[0].steps == 3 and len(world.calls) == 3


async def test_the_same_call_again_in_a_turn_is_not_run_and_the_model_is_told(tmp_path: Path) -> None:
    agent, world, _, requests, rec = _agent(tmp_path, lambda req: answer(tool("say", '{"text": "hi alex"}')), step_limit=3)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    await world.send.send(Chat(sender="alex", text="hi again"))
    with anyio.fail_after(10):
        await agent.run(max_turns=2)
    rec.close()
    assert [c.name for c in world.calls] == ["say", "say"]  # once in each turn
    told = requests[2].messages[-1]["content"]  # step 3 reads step 2's result
    assert told.startswith("not run: say with these arguments already ran in this turn")


async def test_a_second_repeated_call_ends_the_turn_and_under_required_the_model_is_told_of_wait(tmp_path: Path) -> None:
    import emil.world.actions  # noqa: F401 - registers every tool, wait among them
    from emil.world.actions import tool_specs

    agent, world, _, requests, rec = _agent(tmp_path, lambda req: answer(tool("say", '{"text": "hi alex"}')),
                                            step_limit=8, tool_choice="required", tools=tool_specs(must_call=True))
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    # step 1 runs; step 2 is told (wait named); step 3 repeats again: the turn ends, not at step 8
    assert stats.turns[0].steps == 3 and len(requests) == 3 and [c.name for c in world.calls] == ["say"]
    told = requests[2].messages[-1]["content"]
    assert told.endswith("do something else, or call wait to end the turn"), told


async def test_a_wait_call_ends_the_turn_and_required_is_sent_with_every_request(tmp_path: Path) -> None:
    import emil.world.actions  # noqa: F401 - registers every tool, wait among them

    script = [answer(tool("say", '{"text": "hi alex"}', "a")), answer(tool("wait", "{}", "b")),
              answer(tool("say", '{"text": "never sent"}', "c"))]
    from emil.world.actions import tool_specs

    agent, world, _, requests, rec = _agent(tmp_path, lambda req: script[len(requests) - 1], step_limit=5,
                                            tool_choice="required", tools=tool_specs(must_call=True))
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert stats.turns[0].steps == 2 and len(requests) == 2  # ended by wait, not the step limit
    assert [c.name for c in world.calls] == ["say", "wait"]
    assert all(r.tool_choice == "required" for r in requests)


async def test_a_call_written_as_text_is_corrected_once_in_the_turn(tmp_path: Path) -> None:
    text = '{"name": "follow", "arguments": {"player": "alex"}}'
    script = [answer(content=text), answer(tool("follow", '{"player": "alex"}')), answer(content=text),
              answer(content=text)]
    agent, world, _, requests, rec = _agent(tmp_path, lambda req: script[len(requests) - 1], step_limit=6)
    await world.send.send(Chat(sender="alex", text="follow me"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    # step 1: text -> corrected; step 2: the real call runs; step 3: text again -> the turn ends
    assert stats.turns[0].steps == 3 and len(requests) == 3 and [c.name for c in world.calls] == ["follow"]
    told = requests[1].messages[-1]
    assert told["role"] == "user" and "follow as text" in told["content"] and "nothing was run" in told["content"]
    assert sum("as text" in str(m.get("content")) for m in requests[2].messages) == 1


async def test_auto_sends_no_tool_choice(tmp_path: Path) -> None:
    agent, world, _, requests, rec = _agent(tmp_path, lambda req: answer(content="nothing to do"))
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert [r.tool_choice for r in requests] == [None]  # the server's default, as before


async def test_world_stream_ending_stops_the_loop(tmp_path: Path) -> None:
    agent, world, _, _, rec = _agent(tmp_path, lambda req: answer(content="ok"))
    await world.send.send(Chat(sender="alex", text="bye"))
    await world.send.aclose()
    with anyio.fail_after(10):
        stats = await agent.run()
    rec.close()
    assert len(stats.turns) <= 1
    recs = read_recording(tmp_path / "rec.jsonl").records
    assert any(isinstance(r, ObservationRecord) for r in recs) == (len(stats.turns) == 1)
    assert all(not isinstance(r, RequestRecord) or r.refs for r in recs)
    assert all(not isinstance(r, CompletionRecord) or r.assistant_ref for r in recs)


async def test_action_finished_echo_of_own_action_does_not_start_a_turn(tmp_path: Path) -> None:
    from emil.world.events import ActionFinished

    def brain(req: ChatRequest) -> Completion:
        if req.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "hi"}'))
        return answer(content="ok")

    agent, world, _, requests, rec = _agent(tmp_path, brain)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="hi"))
        await world.action_started.wait()
        await world.send.send(ActionFinished(action="say", ok=True))
        await world.send.send(ActionFinished(action="collect", ok=False, error="no oak_log"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=2)
    rec.close()
    observations = [str(m["content"]) for m in requests[-1].messages if m["role"] == "user"]
    assert len(observations) == 2 and len(stats.turns) == 2
    assert "action collect finished failed: no oak_log" in observations[1]
    assert not any("action say" in o for o in observations)


@pytest.mark.parametrize("preserve", [True, False])
async def test_requests_carry_preserve_thinking_from_the_options(tmp_path: Path, preserve: bool) -> None:
    def brain(req: ChatRequest) -> Completion:
        return answer(content="noted")

    agent, world, _context, requests, rec = _agent(tmp_path, brain, enable_thinking=True, preserve_thinking=preserve)
    await world.send.send(Chat(sender="alex", text="hello there"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert requests and all(r.enable_thinking is True and r.preserve_thinking is preserve for r in requests)


async def _chat_once_preparing(agent: Agent, world: WorldDouble, preparing: anyio.Event) -> SessionStats:
    """Run one turn, started by a chat sent once the idle loop has begun preparing."""

    async def player() -> None:
        await preparing.wait()
        await world.send.send(Chat(sender="alex", text="hello"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(player)
            return await agent.run(max_turns=1)


async def test_the_context_prepares_between_turns_and_a_turn_cancels_it(tmp_path: Path) -> None:
    # The trim ladder's preparation (a summary the model writes, issue #13) runs only while the
    # loop idles; here it never finishes on its own, and the player's chat still starts a turn
    # at once: the preparation is cancelled, not awaited.
    agent, world, context, requests, rec = _agent(tmp_path, lambda req: answer(content="ok"))
    context.prepare_blocks = True
    stats = await _chat_once_preparing(agent, world, context.preparing)
    rec.close()
    assert len(stats.turns) == 1 and requests
    assert context.cancelled >= 1  # the preparation that was running when the chat came
    assert context.cancelled == context.prepared  # and none left running


async def test_a_failed_preparation_is_logged_and_the_session_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    agent, world, context, requests, rec = _agent(tmp_path, lambda req: answer(content="ok"))
    tried = anyio.Event()

    async def broken() -> None:
        tried.set()
        raise RuntimeError("summary endpoint said no")

    context.prepare = broken  # type: ignore[method-assign]
    stats = await _chat_once_preparing(agent, world, tried)
    rec.close()
    assert len(stats.turns) == 1 and requests
    assert "between-turns preparation failed (RuntimeError: summary endpoint said no)" in caplog.text


async def test_waiting_for_model_is_true_only_while_a_call_is_in_flight(tmp_path: Path) -> None:
    seen: list[bool] = []
    agent: Agent | None = None

    def brain(req: ChatRequest) -> Completion:
        assert agent is not None
        seen.append(agent.waiting_for_model)
        return answer(content="ok")

    agent, world, _, _, rec = _agent(tmp_path, brain)
    assert not agent.waiting_for_model
    await world.send.send(Chat(sender="alex", text="Emil?"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert seen == [True] and not agent.waiting_for_model


async def test_a_failed_call_again_is_not_run_and_the_model_is_told_why_it_failed(tmp_path: Path) -> None:
    # the world double fails every tool but say, go_to and follow; the real 0.5B model sent one
    # failing take eight times in a turn
    agent, world, _, requests, rec = _agent(tmp_path, lambda req: answer(tool("take", '{"x": 1, "y": 2, "z": 3}')),
                                            step_limit=8)
    await world.send.send(Chat(sender="alex", text="take the diamonds"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert [c.name for c in world.calls] == ["take"] and stats.turns[0].steps == 3
    told = requests[2].messages[-1]["content"]  # step 3 reads step 2's result
    assert told == ("not run: take with these arguments already failed in this turn (error: unknown tool 'take'); "
                    "change the arguments, do something else, or end the turn"), told


async def test_a_failed_call_may_be_tried_again_once_another_call_ran(tmp_path: Path) -> None:
    script = ["take", "say", "take", "take"]
    args = {"take": '{"x": 1, "y": 2, "z": 3}', "say": '{"text": "one moment"}'}
    agent, world, _, requests, rec = _agent(
        tmp_path, lambda req: answer(tool(script[len(requests) - 1], args[script[len(requests) - 1]], f"c{len(requests)}")),
        step_limit=4)
    await world.send.send(Chat(sender="alex", text="take the diamonds"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert [c.name for c in world.calls] == ["take", "say", "take"]  # the fourth: failed, nothing since


async def test_limit_turns_starts_no_turn_past_the_limit(tmp_path: Path) -> None:
    """The bench caps turns from the player's first line: with events still coming, exactly the
    limit's turns run after it (the one in progress among them), then run() returns."""
    in_turn, release, second_done, returned = anyio.Event(), anyio.Event(), anyio.Event(), anyio.Event()
    answered = 0

    def brain(req: ChatRequest) -> Completion:
        nonlocal answered
        if req.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "ok"}'))
        answered += 1
        if answered == 2:
            second_done.set()
        return answer(content="done")

    agent, world, _, _, rec = _agent(tmp_path, brain)
    run_tool = world.run_tool

    async def held(call: ToolCall, turn: TurnContext) -> Outcome:  # the first turn's say waits
        in_turn.set()
        await release.wait()
        return await run_tool(call, turn)

    world.run_tool = held  # type: ignore[method-assign]
    await world.send.send(Chat(sender="alex", text="one"))
    result: list[SessionStats] = []

    async def play() -> None:
        result.append(await agent.run())
        returned.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(play)
        with anyio.fail_after(10):
            await in_turn.wait()
            agent.limit_turns(2)  # turn 1 is in progress: one more may start
            for i in range(4):
                await world.send.send(Chat(sender="alex", text=f"more {i}"))
            release.set()
            await second_done.wait()
            await anyio.sleep(0.3)  # turn 2 ends; news now would start a third, were the limit one too many
            await world.send.send(Chat(sender="alex", text="later"))
            await returned.wait()
    rec.close()
    assert len(result[0].turns) == 2 and all(t.ended is not None for t in result[0].turns)
    assert not agent.stopped  # a limit is not a stop


async def test_limit_turns_between_turns_counts_from_the_next(tmp_path: Path) -> None:
    def brain(req: ChatRequest) -> Completion:
        return answer(content="fine")

    agent, world, _, _, rec = _agent(tmp_path, brain)
    await world.send.send(Chat(sender="alex", text="one"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    agent.limit_turns(1)
    for i in range(3):
        await world.send.send(Chat(sender="alex", text=f"more {i}"))
    with anyio.fail_after(10):
        stats = await agent.run()
    rec.close()
    assert len(stats.turns) == 2

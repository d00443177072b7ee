"""The loop's failure policy and its storms: turns fail alone, urgent events cut in (once per
player per interval), a stop cancels what is in flight and nothing runs after it, floods are
coalesced to the observation cap. World, context and completer are doubles (unit tests)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from emil.agent import Agent
from emil.exceptions import (
    ContextOverflowError,
    EndpointConfigError,
    PatienceExhausted,
    RequestRejected,
    ServerFault,
    WorldError,
)
from emil.llm.recovery_steps import RecoveryEvent
from emil.llm.types import ChatRequest, Completion
from emil.recording import ErrorRecord, ObservationRecord, Recorder, TurnRecord, read_recording
from emil.world.events import Chat, Damage, Death, Health, HostileNearby
from tests.unit.agent.doubles import ContextDouble, WorldDouble, answer, loop_parts, tool

_WORLDS: list[WorldDouble] = []


@pytest.fixture(autouse=True)
def _close_worlds() -> Iterator[None]:
    _WORLDS.clear()
    yield
    for w in _WORLDS:
        w.close()


Step = Callable[[ChatRequest], Awaitable[Completion]]


def _agent(
    tmp_path: Path, step: Step, **opts: object
) -> tuple[Agent, WorldDouble, list[ChatRequest], Recorder]:
    world = WorldDouble()
    _WORLDS.append(world)
    requests: list[ChatRequest] = []

    async def completer(
        assemble: Callable[[int | None], ChatRequest], on_event: Callable[[RecoveryEvent], None]
    ) -> Completion:
        request = assemble(None)
        requests.append(request)
        return await step(request)

    rec = Recorder(tmp_path / "rec.jsonl")
    agent = Agent(world=world, context=ContextDouble(), completer=completer, recorder=rec, **loop_parts(**opts))
    return agent, world, requests, rec


def _last_user(request: ChatRequest) -> str:
    return str([m for m in request.messages if m["role"] == "user"][-1]["content"])


def _records(tmp_path: Path) -> list[object]:
    return list(read_recording(tmp_path / "rec.jsonl").records)


# --- a turn fails, the session goes on --------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "where"),
    [
        (ServerFault("the LLM server answered 200 with html", body="<html>"), "llm"),
        (ContextOverflowError("this turn cannot fit the prompt budget"), "llm"),
        (KeyError("a bug"), "turn"),
        (WorldError("the bridge went away"), "world"),
        (RequestRejected("the LLM server rejected this request (HTTP 413): too large", status=413), "llm"),
    ],
)
async def test_a_failed_turn_is_recorded_and_the_next_event_starts_a_new_one(
    tmp_path: Path, error: Exception, where: str
) -> None:
    outcomes: list[Completion | Exception] = [
        error,
        answer(tool("say", '{"text": "hi"}')),
        answer(content="ok"),
    ]

    async def step(request: ChatRequest) -> Completion:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    agent, world, requests, rec = _agent(tmp_path, step)
    await world.send.send(Chat(sender="alex", text="Emil, one"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
        await world.send.send(Chat(sender="alex", text="Emil, two"))
        stats = await agent.run(max_turns=2)
    rec.close()
    assert stats.turns[0].failed.startswith(type(error).__name__) and not stats.turns[1].failed
    assert [c.name for c in world.calls] == ["say"]
    errors = [r for r in _records(tmp_path) if isinstance(r, ErrorRecord)]
    assert [(e.error_type, e.where, e.turn, e.fatal) for e in errors] == [
        (type(error).__name__, where, 1, False)
    ]
    if isinstance(error, ServerFault):
        assert errors[0].detail == "<html>"
    elif where == "turn":
        assert "KeyError" in errors[0].detail and "Traceback" in errors[0].detail
    else:  # a known failure that carries no body: nothing more to say than the message
        assert errors[0].detail == ""
    turns = [r for r in _records(tmp_path) if isinstance(r, TurnRecord)]
    assert turns[0].failed and not turns[1].failed
    assert "one" in _last_user(requests[1]) or any(
        "one" in str(m["content"]) for m in requests[1].messages
    )


async def test_requests_rejected_turn_after_turn_are_the_setup(tmp_path: Path) -> None:
    """One refused request is that turn's content; every request of three turns in a row
    refused (a sampling option the server does not take, say) is a configuration error."""
    outcomes: list[Completion | Exception] = [
        RequestRejected("rejected (HTTP 400): bad top_k", status=400, server_message="bad top_k"),
        answer(content="ok"),  # a turn that worked resets the count
        *[RequestRejected("rejected (HTTP 400): bad top_k", status=400, server_message="bad top_k")] * 3,
    ]

    async def step(request: ChatRequest) -> Completion:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    agent, world, requests, rec = _agent(tmp_path, step)
    with anyio.fail_after(10):
        for n in range(1, 5):
            await world.send.send(Chat(sender="alex", text=f"Emil, {n}"))
            stats = await agent.run(max_turns=n)
        assert [bool(turn.failed) for turn in stats.turns] == [True, False, True, True]
        await world.send.send(Chat(sender="alex", text="Emil, 5"))
        with pytest.raises(EndpointConfigError) as stopped:
            await agent.run(max_turns=5)
    rec.close()
    assert str(stopped.value).startswith("the server rejected the request of 3 turns in a row: ")
    assert "request options" in str(stopped.value) and stopped.value.status == 400
    assert str(stopped.value).endswith("Server said (HTTP 400): bad top_k")
    assert stopped.value.server_message == "bad top_k"
    assert isinstance(stopped.value.__cause__, RequestRejected)
    assert len(requests) == 5 and not outcomes


async def test_patience_exhausted_ends_the_run(tmp_path: Path) -> None:
    async def step(request: ChatRequest) -> Completion:
        raise PatienceExhausted(
            "llm endpoint unavailable for 60 s", service="llm endpoint", waited_s=60
        )

    agent, world, _, rec = _agent(tmp_path, step)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10), pytest.raises(PatienceExhausted):
        await agent.run(max_turns=1)
    rec.close()


# --- urgent events and model calls in flight ---------------------------------------------------


def _slow_then(seconds: float, outcome: Completion) -> Step:
    async def step(request: ChatRequest) -> Completion:
        await anyio.sleep(seconds)
        return outcome

    return step


@pytest.mark.parametrize(
    "urgent",
    [
        Damage(amount=2, health=18, attacker="zombie"),
        Health(health=5, food=20),
        HostileNearby(name="creeper", distance=3),
        Chat(sender="alex", text="Emil stop!"),
    ],
    ids=["hit", "low health", "hostile close", "stop from the requester"],
)
async def test_an_urgent_event_cancels_a_model_call_after_the_grace(
    tmp_path: Path, urgent: object
) -> None:
    calls = 0

    async def step(request: ChatRequest) -> Completion:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep(3600)  # a hung endpoint
        return answer(content="ok")

    agent, world, requests, rec = _agent(tmp_path, step, interrupt_grace_s=0.2)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, walk with me"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        await anyio.sleep(0.05)
        await world.send.send(urgent)  # type: ignore[arg-type]

    started = time.monotonic()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=2)
    rec.close()
    assert time.monotonic() - started < 2.0  # not the hour of the hung call
    first, second = stats.turns
    assert first.interrupted and "model call cancelled" in first.interrupted_by
    assert not second.interrupted
    assert "(!)" in _last_user(requests[-1])  # the new observation carries the news
    turns = [r for r in _records(tmp_path) if isinstance(r, TurnRecord)]
    assert turns[0].interrupted_by == first.interrupted_by


async def test_an_answer_that_lands_within_the_grace_is_kept(tmp_path: Path) -> None:
    agent, world, requests, rec = _agent(
        tmp_path, _slow_then(0.3, answer(tool("say", '{"text": "coming"}'))), interrupt_grace_s=1.0
    )

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, come"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        await world.send.send(Damage(amount=1, health=19, attacker="zombie"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=1)
    rec.close()
    # the call was not cancelled; the pending hit then skips the planned action (as before)
    assert stats.turns[0].interrupted and stats.turns[0].interrupted_by == "hit by zombie"
    assert len(requests) == 1


async def test_chat_from_another_player_does_not_cancel_a_model_call(tmp_path: Path) -> None:
    agent, world, requests, rec = _agent(
        tmp_path, _slow_then(0.5, answer(content="hello")), interrupt_grace_s=0.05
    )

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, hi"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        await world.send.send(
            Chat(sender="bob", text="Emil stop")
        )  # not the requester, not an operator

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=1)
    rec.close()
    assert not stats.turns[0].interrupted


async def test_an_operators_stop_cancels_a_model_call(tmp_path: Path) -> None:
    agent, world, requests, rec = _agent(
        tmp_path,
        _slow_then(30, answer(content="x")),
        interrupt_grace_s=0.05,
        operators=frozenset({"op"}),
    )

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, build a tower"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        await world.send.send(Chat(sender="op", text="Emil, STOP"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=1)
    rec.close()
    assert stats.turns[0].interrupted and "op spoke to Emil" in stats.turns[0].interrupted_by


async def test_a_stop_cancels_a_hung_call_at_once_and_no_action_runs(tmp_path: Path) -> None:
    release = anyio.Event()

    async def step(request: ChatRequest) -> Completion:
        with anyio.CancelScope(shield=True):  # a completer that ignores cancellation for a moment
            await release.wait()
        return answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}'))

    agent, world, requests, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, go"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        agent.stop("signal SIGTERM")
        release.set()  # the stale answer arrives after the stop

    started = time.monotonic()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run()
    rec.close()
    assert time.monotonic() - started < 2.0
    assert world.calls == []  # the stale go_to never ran
    assert stats.turns[0].interrupted and stats.turns[0].interrupted_by == "signal SIGTERM"
    assert agent.stop_reason == "signal SIGTERM"


async def test_a_stop_during_an_action_aborts_it(tmp_path: Path) -> None:
    agent, world, _requests, rec = _agent(
        tmp_path, _slow_then(0, answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}')))
    )

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, go"))
        await world.action_started.wait()
        agent.stop()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run()
    rec.close()
    assert world.aborts == 1 and stats.turns[0].interrupted


async def test_a_stop_waits_for_a_hanging_abort_only_stop_abort_s(tmp_path: Path) -> None:
    """The world's abort never returns: the stop gives it stop_abort_s, not the 5 s an abort
    after a timeout gets (a shield inside the stop's deadline used to wait those 5 s)."""
    agent, world, _requests, rec = _agent(
        tmp_path, _slow_then(0, answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}'))), stop_abort_s=0.3
    )

    async def hangs() -> None:
        world.aborts += 1
        await anyio.sleep(3600)

    world.abort = hangs  # type: ignore[method-assign]

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, go"))
        await world.action_started.wait()
        agent.stop()

    with anyio.fail_after(4):  # the old shielded 5 s abort fails this
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run()
    rec.close()
    assert world.aborts == 1 and stats.turns[0].interrupted


# --- storms --------------------------------------------------------------------------------------


async def test_one_spamming_player_cannot_keep_emil_from_answering_another(tmp_path: Path) -> None:
    said: list[str] = []

    async def step(request: ChatRequest) -> Completion:
        await anyio.sleep(0.05)
        if request.messages[-1]["role"] == "user":
            text = _last_user(request)
            return answer(
                tool("say", '{"text": "hi bob"}' if "bob" in text else '{"text": "hi alex"}')
            )
        return answer(content="done")

    agent, world, _requests, rec = _agent(tmp_path, step, urgent_interval_s=10.0)

    async def spam() -> None:
        for i in range(100):  # 50 lines a second for 2 s
            await world.send.send(Chat(sender="alex", text=f"Emil Emil Emil {i}"))
            if i == 10:
                await world.send.send(Chat(sender="bob", text="Emil, where is the village?"))
            await anyio.sleep(0.02)
        agent.stop()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(spam)
            stats = await agent.run()
    rec.close()
    said = [str(c.arguments) for c in world.calls]
    interrupted = sum(t.interrupted for t in stats.turns[:-1])
    assert any("bob" in s for s in said), said  # bob was answered
    assert interrupted <= 2, [
        t.interrupted_by for t in stats.turns
    ]  # at most once per player per interval
    assert len(stats.turns) < 60  # far from one model call per spam line


async def test_a_flood_is_coalesced_to_the_observation_cap(tmp_path: Path) -> None:
    # ~600 lines arrive while one slow model call runs (the 25 s call): the call ends
    # once every line has been sent and taken from the stream, however slow the machine is
    flooded = anyio.Event()

    async def slow_call(request: ChatRequest) -> Completion:
        await flooded.wait()
        while world._recv.statistics().current_buffer_used:  # noqa: ASYNC110 - the pump's progress
            await anyio.sleep(0.01)
        return answer(content="ok")

    agent, world, requests, rec = _agent(tmp_path, slow_call, observation_cap_tokens=400)

    async def flood() -> None:
        await world.send.send(Chat(sender="alex", text="Emil, hi"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        for i in range(600):
            await world.send.send(Chat(sender=f"p{i % 30}", text=f"line {i} " + "blah " * 10))
        flooded.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await agent.run(max_turns=2)
    rec.close()
    observation = _last_user(requests[1])
    assert len(observation) // 4 + 1 <= 400  # the ContextDouble counts 4 chars a token
    assert "more players said" in observation or "earlier line" in observation
    record = [r for r in _records(tmp_path) if isinstance(r, ObservationRecord)][1]
    assert record.events == 600 and record.shown is not None and record.shown < 600


async def test_chat_from_several_players_names_every_sender(tmp_path: Path) -> None:
    replies = [answer(tool("say", '{"text": "hi all"}')), answer(content="done")]

    async def step(request: ChatRequest) -> Completion:
        return replies.pop(0)

    agent, world, requests, rec = _agent(tmp_path, step)
    agent.perception.settings = agent.settings.model_copy(update={"chat_debounce_s": 0.2})
    await world.send.send(Chat(sender="alex", text="hello"))
    await world.send.send(Chat(sender="bob", text="hi there"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    assert world.requesters == [
        frozenset({"alex", "bob"})
    ]  # every player whose words are in the turn
    text = _last_user(requests[0])
    assert "alex says" in text and "bob says" in text


async def test_failures_are_counted_logged_and_recorded_word_for_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    long = "x" * 300
    outcomes: list[Exception] = [ServerFault(f"garbage {long}", body="<html>"), KeyError("a bug")]

    async def step(request: ChatRequest) -> Completion:
        raise outcomes.pop(0)

    agent, world, _, rec = _agent(tmp_path, step)
    caplog.set_level(logging.WARNING, logger="emil.agent")
    for text in ("Emil one", "Emil two"):
        await world.send.send(Chat(sender="alex", text=text))
        with anyio.fail_after(10):
            await agent.run(max_turns=len(agent.stats.turns) + 1)
    rec.close()
    assert agent.stats.errors == 2
    first, second = agent.stats.turns
    assert first.failed == f"ServerFault: garbage {long}"[:200] and len(first.failed) == 200
    assert second.failed == "KeyError: 'a bug'"
    fault_log, bug_log = [r for r in caplog.records if r.name == "emil.agent"]
    assert (
        fault_log.levelno == logging.WARNING
        and fault_log.getMessage() == f"turn 1 failed, the session goes on: garbage {long}"
    )
    assert (
        bug_log.levelno == logging.ERROR
        and bug_log.getMessage() == "turn 2 failed on a bug, the session goes on: KeyError: 'a bug'"
    )
    assert bug_log.exc_info is not None and bug_log.exc_info[0] is KeyError
    errors = [r for r in _records(tmp_path) if isinstance(r, ErrorRecord)]
    assert (errors[0].message, errors[0].detail) == (f"garbage {long}", "<html>")
    # The detail is the traceback as Python prints it: the header, then the frames.
    assert errors[1].message == "'a bug'" and errors[1].detail.startswith(
        "Traceback (most recent call last):\n  File "
    )
    assert errors[1].detail.endswith("KeyError: 'a bug'\n")


async def test_a_long_traceback_keeps_its_end(tmp_path: Path) -> None:
    async def step(request: ChatRequest) -> Completion:
        raise ValueError("y" * 5000)

    agent, world, _, rec = _agent(tmp_path, step)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    error = next(r for r in _records(tmp_path) if isinstance(r, ErrorRecord))
    assert len(error.detail) == 4000 and error.detail.endswith("y" * 100 + "\n")


async def test_outages_are_recorded_in_their_turn_and_step(tmp_path: Path) -> None:
    from emil.backoff import OutageEvent
    from emil.recording import RetryRecord, ServiceRecord

    seen: list[tuple[int | None, int | None]] = []
    agent_box: list[Agent] = []

    async def step(request: ChatRequest) -> Completion:
        agent_box[0].record_outage(OutageEvent("retry", "llm endpoint", 1, "refused", 0.5, 0.0))
        return answer(content="ok")

    agent, world, _, rec = _agent(tmp_path, step)
    agent_box.append(agent)
    agent.record_outage(OutageEvent("down", "minecraft server", 1, "refused"))  # between turns
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    # After the turn ended, a retry belongs to no turn and no step (not the last turn's).
    agent.record_outage(OutageEvent("retry", "minecraft server", 2, "refused", 1.0, 3.0))
    rec.close()
    records = _records(tmp_path)
    service = next(r for r in records if isinstance(r, ServiceRecord))
    retries = [r for r in records if isinstance(r, RetryRecord)]
    seen = [(service.turn, None), *((r.turn, r.step) for r in retries)]
    assert seen == [(None, None), (1, 1), (None, None)]


async def test_tool_results_are_recorded_whole(tmp_path: Path) -> None:
    from emil.recording import MessageRecord, ToolResultRecord
    from emil.world.tool import Outcome

    replies = [
        answer(tool("say", '{"text": "hi"}', "c1"), tool("fly", "{}", "c2")),
        answer(content="done"),
    ]

    async def step(request: ChatRequest) -> Completion:
        return replies.pop(0)

    agent, world, requests, rec = _agent(tmp_path, step)

    async def run_tool(call, turn):  # type: ignore[no-untyped-def]
        assert turn.limit_s == agent.settings.action_timeout_s
        if call.name == "say":
            return Outcome(True, "said it", {"heard_by": ["alex"], "bad": {1, 2}}, 12.5)  # type: ignore[dict-item]  # not JSON: the record must cope
        return Outcome(False, "no such tool", None)

    world.run_tool = run_tool  # type: ignore[method-assign]
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    records = _records(tmp_path)
    results = [r for r in records if isinstance(r, ToolResultRecord)]
    say, fly = results
    assert (say.turn, say.step, say.call_id, say.name, say.arguments, say.ok, say.text) == (
        1,
        1,
        "c1",
        "say",
        {"text": "hi"},
        True,
        "said it",
    )
    assert (
        say.data == repr({"heard_by": ["alex"], "bad": {1, 2}}) and say.elapsed_ms == 12.5
    )  # not JSON: its repr
    assert (
        fly.ok is False
        and fly.data is None
        and fly.elapsed_ms is not None
        and 0 <= fly.elapsed_ms < 1000
    )
    messages = {r.ref: r for r in records if isinstance(r, MessageRecord)}
    assert (
        say.ref in messages
        and messages[say.ref].message_kind == "tool_result"
        and messages[say.ref].turn == 1
    )
    assert messages[say.ref].openai == {
        "role": "tool",
        "content": "said it",
        "tool_call_id": "c1",
        "name": "say",
    }
    assert (
        requests[1].messages[-1]["content"] == "no such tool"
        and requests[1].messages[-1]["tool_call_id"] == "c2"
    )
    assert agent.stats.turns[0].actions == 2


async def test_interrupted_calls_are_results_that_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from emil.recording import ToolResultRecord

    async def step(request: ChatRequest) -> Completion:
        if request.messages[-1]["role"] == "user" and "go" in _last_user(request):
            return answer(
                tool("go_to", '{"x": 1, "y": 2, "z": 3}', "c1"), tool("say", '{"text": "x"}', "c2")
            )
        return answer(content="ok")

    agent, world, _, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="go"))
        await world.action_started.wait()
        await world.send.send(Damage(amount=1, health=19, attacker="zombie"))

    caplog.set_level(logging.INFO, logger="emil.agent")
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            await agent.run(max_turns=2)
    rec.close()
    results = [r for r in _records(tmp_path) if isinstance(r, ToolResultRecord)][:2]
    assert [(r.ok, r.text) for r in results] == [
        (False, "aborted: interrupted (hit by zombie)"),
        (False, "not run: interrupted (hit by zombie)"),
    ]
    assert (
        agent.stats.turns[0].actions == 1 and agent.stats.turns[0].interrupted_by == "hit by zombie"
    )
    assert "turn 1 interrupted: hit by zombie" in caplog.messages


async def test_results_after_a_stop_say_emil_is_stopping(tmp_path: Path) -> None:
    from emil.recording import ToolResultRecord

    release = anyio.Event()

    async def step(request: ChatRequest) -> Completion:
        with anyio.CancelScope(shield=True):
            await release.wait()
        return answer(tool("say", '{"text": "a"}', "c1"), tool("say", '{"text": "b"}', "c2"))

    agent, world, requests, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="Emil"))
        while not requests:  # noqa: ASYNC110 - the completer double has no event to wait on
            await anyio.sleep(0.01)
        agent.stop("signal SIGINT")
        release.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            await agent.run()
    rec.close()
    results = [r for r in _records(tmp_path) if isinstance(r, ToolResultRecord)]
    assert [(r.turn, r.step, r.call_id, r.ok, r.text) for r in results] == [
        (1, 1, "c1", False, "not run: Emil is stopping"),
        (1, 1, "c2", False, "not run: Emil is stopping"),
    ]
    assert world.calls == []


async def test_an_action_past_its_timeout_is_aborted_and_said(tmp_path: Path) -> None:
    from emil.recording import ToolResultRecord

    replies = [answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}')), answer(content="ok")]

    async def step(request: ChatRequest) -> Completion:
        return replies.pop(0)

    agent, world, _, rec = _agent(tmp_path, step, action_timeout_s=0.2)
    await world.send.send(Chat(sender="alex", text="go"))
    started = time.monotonic()
    with anyio.fail_after(10):
        await agent.run(max_turns=1)
    rec.close()
    took = time.monotonic() - started
    result = next(r for r in _records(tmp_path) if isinstance(r, ToolResultRecord))
    assert (result.ok, result.text) == (False, "error: go_to timed out after 0.2 s and was aborted")
    assert 0.35 <= took < 2.0  # the backstop is the limit plus as much again (at most 5 s more)
    assert world.aborts == 1


async def test_a_failing_abort_is_logged_and_the_turn_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    replies = [answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}')), answer(content="ok")]

    async def step(request: ChatRequest) -> Completion:
        return replies.pop(0)

    agent, world, _, rec = _agent(tmp_path, step, action_timeout_s=0.1)

    async def abort() -> None:
        raise RuntimeError("bridge gone")

    world.abort = abort  # type: ignore[method-assign]
    await world.send.send(Chat(sender="alex", text="go"))
    caplog.set_level(logging.WARNING, logger="emil.agent")
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert "abort failed: bridge gone" in caplog.messages and stats.turns[0].steps == 2


async def test_every_record_of_a_recovered_step_whole(tmp_path: Path) -> None:
    from emil.llm.types import Timings, Usage
    from emil.recording import (
        CompletionRecord,
        OverflowRecord,
        RecoveryRecord,
        RequestRecord,
        TrimRecord,
    )

    async def completer(assemble, on_event):  # type: ignore[no-untyped-def]
        first = assemble(None)
        on_event(
            RecoveryEvent(
                "overflow",
                0,
                window=4096,
                requested_output=512,
                server_prompt_tokens=5000,
                prompt_is_lower_bound=True,
                predicted_prompt_tokens=first.predicted_prompt_tokens,
                family="fam",
            )
        )
        on_event(
            RecoveryEvent(
                "retry",
                1,
                next_limit=100,
                predicted_prompt_tokens=first.predicted_prompt_tokens,
                server_prompt_tokens=5000,
            )
        )
        second = assemble(100)
        on_event(RecoveryEvent("recovered", 1))
        on_event(
            RecoveryEvent("transient", 0, message="ignored here: the Patience records attempts")
        )
        assert second.max_completion_tokens == agent.settings.output_reserve
        assert (
            second.stream,
            second.temperature,
            second.enable_thinking,
            second.preserve_thinking,
        ) == (True, 0.3, True, True)
        assert second.tools is None and second.predicted_prompt_tokens is not None
        return Completion(
            content="done",
            usage=Usage(prompt_tokens=77, completion_tokens=11, cached_tokens=64),
            timings=Timings(total_s=0.5, first_token_s=0.1),
            finish_reason="stop",
        )

    world = WorldDouble()
    _WORLDS.append(world)
    rec = Recorder(tmp_path / "rec.jsonl")
    context = ContextDouble()
    parts = loop_parts(output_reserve=512, temperature=0.3, stream=True, enable_thinking=True, preserve_thinking=True)
    agent = Agent(world=world, context=context, completer=completer, recorder=rec, **parts)
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(10):
        stats = await agent.run(max_turns=1)
    rec.close()
    records = _records(tmp_path)
    requests = [r for r in records if isinstance(r, RequestRecord)]
    assert [
        (r.turn, r.step, r.attempt, r.limit, r.max_completion_tokens, r.enable_thinking)
        for r in requests
    ] == [(1, 1, 0, None, 512, True), (1, 1, 1, 100, 512, True)]
    assert all(r.refs and r.predicted_tokens for r in requests)
    overflow = next(r for r in records if isinstance(r, OverflowRecord))
    assert (
        overflow.turn,
        overflow.window,
        overflow.requested_output,
        overflow.prompt_tokens,
        overflow.prompt_is_lower_bound,
        overflow.message,
    ) == (1, 4096, 512, 5000, True, "fam")
    assert overflow.predicted_tokens == requests[0].predicted_tokens
    recovery = next(r for r in records if isinstance(r, RecoveryRecord))
    assert (recovery.turn, recovery.attempt, recovery.limit, recovery.detail) == (
        1,
        1,
        100,
        "server said 5000",
    )
    assert not [r for r in records if isinstance(r, TrimRecord)]
    completion = next(r for r in records if isinstance(r, CompletionRecord))
    assert (completion.turn, completion.step, completion.content, completion.prompt_tokens) == (
        1,
        1,
        "done",
        77,
    )
    assert completion.assistant_ref is not None
    t = stats.turns[0]
    assert (
        t.overflow_recoveries,
        t.actual_prompt_tokens,
        t.cached_tokens,
        t.completion_tokens,
    ) == (1, 77, 64, 11)
    assert t.model_seconds == 0.5 and t.predicted_prompt_tokens == requests[-1].predicted_tokens
    assert context.observed == [(requests[-1].predicted_tokens, 77)] and context.limits == [
        None,
        100,
    ]
    assert t.first_request_at is not None and t.first_completion_at is not None and t.steps == 1


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            Damage(amount=1, health=19, attacker="zombie"),
            Damage(amount=1, health=18, attacker="skeleton"),
        ),
        (HostileNearby(name="zombie", distance=3), HostileNearby(name="creeper", distance=3)),
        (Chat(sender="alex", text="Emil, go"), Chat(sender="bob", text="Emil, help me")),
        (Death(), Health(health=5, food=20)),
    ],
    ids=["another attacker", "another hostile", "another player", "low health after a death"],
)
async def test_a_different_emergency_interrupts_the_answer_to_the_first(
    tmp_path: Path, first: object, second: object
) -> None:
    async def step(request: ChatRequest) -> Completion:
        if (
            request.messages[-1]["role"] == "user"
            and len([m for m in request.messages if m["role"] == "user"]) == 1
        ):
            return answer(tool("go_to", '{"x": 1, "y": 2, "z": 3}'))
        return answer(content="ok")

    agent, world, _, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(first)  # type: ignore[arg-type]
        await world.action_started.wait()
        await world.send.send(second)  # type: ignore[arg-type]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=2)
    rec.close()
    assert stats.turns[0].interrupted and world.aborts >= 1


async def test_events_are_recorded_with_their_priority_turn_and_echoes(tmp_path: Path) -> None:
    from emil.recording import EventRecord
    from emil.world.events import ActionFinished, TimeOfDay

    echoed = anyio.Event()

    async def step(request: ChatRequest) -> Completion:
        if request.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "hi"}'))
        await echoed.wait()  # turn 1 is still running while the echoes arrive
        return answer(content="ok")

    agent, world, _, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(TimeOfDay(phase="night"))
        await world.send.send(Chat(sender="alex", text="hello"))
        await world.action_started.wait()
        await world.send.send(
            ActionFinished(action="say", ok=True)
        )  # the echo of Emil's own action
        await world.send.send(ActionFinished(action="say", ok=True))  # a second one is news
        while agent.stats.events < 3:  # noqa: ASYNC110 - the pump has recorded the news (after the echo)
            await anyio.sleep(0.01)
        echoed.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            stats = await agent.run(max_turns=2)
    rec.close()
    events = [r for r in _records(tmp_path) if isinstance(r, EventRecord)]
    assert [(r.event["kind"], r.priority, r.turn) for r in events] == [
        ("time", "ambient", None),
        ("chat", "normal", None),
        ("action_finished", "echo", 1),
        ("action_finished", "normal", 1),
    ]
    assert events[1].event["text"] == "hello" and agent.stats.events == 3
    assert len(stats.turns) == 2


async def test_each_dispatched_action_absorbs_one_echo(tmp_path: Path) -> None:
    from emil.recording import EventRecord
    from emil.world.events import ActionFinished

    echoed = anyio.Event()

    async def step(request: ChatRequest) -> Completion:
        if request.messages[-1]["role"] == "user":
            return answer(tool("say", '{"text": "hi"}', "c1"), tool("say", '{"text": "ho"}', "c2"))
        await echoed.wait()
        return answer(content="ok")

    agent, world, _, rec = _agent(tmp_path, step)

    async def script() -> None:
        await world.send.send(Chat(sender="alex", text="hello"))
        await world.action_started.wait()
        for _ in range(3):  # two echoes of Emil's two says, then one that is news
            await world.send.send(ActionFinished(action="say", ok=True))
        while agent.stats.events < 2:  # noqa: ASYNC110 - the pump has recorded the news (after the echoes)
            await anyio.sleep(0.01)
        echoed.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(script)
            await agent.run(max_turns=2)
    rec.close()
    events = [r for r in _records(tmp_path) if isinstance(r, EventRecord)]
    assert [r.priority for r in events if r.event["kind"] == "action_finished"] == ["echo", "echo", "normal"]


async def test_the_first_stop_reason_stands(tmp_path: Path) -> None:
    agent, _world, _, rec = _agent(tmp_path, _slow_then(0, answer(content="ok")))
    assert (agent.stopped, agent.stop_reason) == (False, "")
    agent.stop("signal SIGTERM")
    agent.stop("signal SIGINT")
    assert agent.stopped and agent.stop_reason == "signal SIGTERM"
    with anyio.fail_after(5):
        await agent.run()
    rec.close()


async def test_a_stop_without_a_reason_is_recorded_as_requested(tmp_path: Path) -> None:
    agent, _world, _, rec = _agent(tmp_path, _slow_then(0, answer(content="ok")))
    agent.stop()
    assert agent.stopped and agent.stop_reason == "stop requested"
    rec.close()


async def test_a_players_quiet_interval_ends_exactly_on_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emil.senses.perception import Triaged

    agent, _, _, rec = _agent(tmp_path, _slow_then(0, answer(content="ok")), urgent_interval_s=10.0)
    clock = [100.0]
    monkeypatch.setattr("emil.agent.loop.time.monotonic", lambda: clock[0])
    line = Triaged(Chat(sender="alex", text="Emil!"), "urgent", "alex spoke to Emil", 0.0)
    assert agent.interrupts.claim(line)
    clock[0] = 109.999
    assert not agent.interrupts.claim(line)
    clock[0] = 110.0
    assert agent.interrupts.claim(line)  # the interval has passed: this one may interrupt again
    other = Triaged(Chat(sender="bob", text="Emil!"), "urgent", "bob spoke to Emil", 0.0)
    assert agent.interrupts.claim(other)  # another player's interval is their own
    rec.close()


@pytest.mark.parametrize("fault", ["raises", "hangs"])
async def test_a_failed_snapshot_costs_the_status_not_the_turn(tmp_path: Path, fault: str) -> None:
    agent, world, requests, rec = _agent(
        tmp_path, _slow_then(0, answer(content="ok")), snapshot_timeout_s=0.1
    )

    async def snapshot() -> dict[str, object]:
        if fault == "raises":
            raise ConnectionError("bridge gone")
        await anyio.sleep(3600)
        return {}

    world.snapshot = snapshot  # type: ignore[method-assign]
    await world.send.send(Chat(sender="alex", text="Emil, hi"))
    with anyio.fail_after(5):
        stats = await agent.run(max_turns=1)
    rec.close()
    assert not stats.turns[0].failed and len(requests) == 1
    assert 'alex says: "Emil, hi"' in _last_user(requests[0])
    errors = [r for r in _records(tmp_path) if isinstance(r, ErrorRecord)]
    expected = ("ConnectionError", "bridge gone") if fault == "raises" else ("TimeoutError", "")
    assert [(e.turn, e.where, e.error_type, e.message) for e in errors] == [(1, "snapshot", *expected)]
    observation = next(r for r in _records(tmp_path) if isinstance(r, ObservationRecord))
    assert observation.snapshot is None


async def test_an_outcome_without_a_time_gets_the_dispatch_time_in_ms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emil.recording import ToolResultRecord
    from emil.world.tool import Outcome

    replies = [answer(tool("say", '{"text": "hi"}')), answer(content="done")]
    agent, world, _, rec = _agent(tmp_path, lambda request: _now(replies.pop(0)))
    clock = [100.0]
    monkeypatch.setattr("emil.agent.loop.time.monotonic", lambda: clock[0])

    async def run_tool(call, turn):  # type: ignore[no-untyped-def]
        clock[0] += 0.25  # the action takes a quarter of a second
        return Outcome(True, "said it", {"heard_by": ["alex"]})

    world.run_tool = run_tool  # type: ignore[method-assign]
    await world.send.send(Chat(sender="alex", text="hi"))
    with anyio.fail_after(5):
        await agent.run(max_turns=1)
    rec.close()
    result = next(r for r in _records(tmp_path) if isinstance(r, ToolResultRecord))
    assert (result.data, result.elapsed_ms) == ({"heard_by": ["alex"]}, 250.0)


async def _now(completion: Completion) -> Completion:
    return completion


async def test_a_turn_is_named_by_its_urgent_reasons_and_observes_the_snapshot(tmp_path: Path) -> None:
    from emil.senses.perception import Triaged

    agent, world, _, rec = _agent(tmp_path, _slow_then(0, answer(content="ok")))
    triaged = [
        Triaged(Chat(sender="bob", text="nice day"), "normal", "chat from bob", 1.0),
        Triaged(Damage(amount=1, health=19, attacker="zombie"), "urgent", "hit by zombie", 2.0),
        Triaged(Chat(sender="alex", text="Emil!"), "urgent", "alex spoke to Emil", 3.0),
        Triaged(Damage(amount=1, health=18, attacker="zombie"), "urgent", "hit by zombie", 4.0),
    ]
    with anyio.fail_after(5):
        await agent._turn(triaged)
    rec.close()
    records = _records(tmp_path)
    turn = next(r for r in records if isinstance(r, TurnRecord))
    observation = next(r for r in records if isinstance(r, ObservationRecord))
    assert turn.reason == "hit by zombie; alex spoke to Emil"  # urgent reasons, once each, in order
    assert (observation.reason, observation.urgent, observation.events) == (turn.reason, True, 4)
    assert observation.snapshot == world.snapshot_data


async def test_an_outage_before_a_turns_first_step_is_at_step_zero(tmp_path: Path) -> None:
    from emil.backoff import OutageEvent
    from emil.recording import RetryRecord
    from emil.senses.perception import Triaged

    replies = [answer(tool("say", '{"text": "hi"}')), answer(content="done"), answer(content="ok")]
    agent, world, _, rec = _agent(tmp_path, lambda request: _now(replies.pop(0)))
    snapshots = 0

    async def snapshot() -> dict[str, object]:
        nonlocal snapshots
        snapshots += 1
        if snapshots == 2:  # the second turn's world retries while it observes
            agent.record_outage(OutageEvent("retry", "minecraft server", 1, "refused", 0.5, 0.0))
        return {}

    world.snapshot = snapshot  # type: ignore[method-assign]
    line = Triaged(Chat(sender="alex", text="Emil"), "urgent", "alex spoke to Emil", 0.0)
    with anyio.fail_after(5):
        await agent._turn([line])  # two steps
        await agent._turn([line])
    rec.close()
    retry = next(r for r in _records(tmp_path) if isinstance(r, RetryRecord))
    assert (retry.turn, retry.step) == (2, 0)

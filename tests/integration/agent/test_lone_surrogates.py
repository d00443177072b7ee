"""A model answer full of lone surrogates, through the whole live path (issue #32).

Real embedded server, a real mineflayer player, Emil's session (bridge, turn engine, context,
client, recorder, notes) and the vLLM-dialect DOUBLE (a SCRIPTED brain, not a model) answering
the player's request with the JSON escape ``\\ud800`` and its kin in the content, the reasoning,
a tool's name and a tool's arguments (values, keys, nested), streamed and not. The turn
completes, the player hears the words with U+FFFD in place of each lone surrogate, the recording
reads back whole, and replay rebuilds every request of it as recorded.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from emil.agent.session import open_session
from emil.config import Settings
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    MessageRecord,
    ToolResultRecord,
    TurnRecord,
    read_recording,
)
from emil.replay import replay_file
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.vllm_double import VLLMDouble
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ASK = "say something odd"
ODD = Reply(
    content="sure \ud800",
    reasoning="thinking \udc00 of \ud83d",
    tool_calls=(
        ScriptedCall("say", {"text": "odd \ud800 words \ud83d\ude00 \udfff"}),
        ScriptedCall("look\udfff", {"\udc00key": [{"deep": "\ud800"}], "ok": "\ud83d"}),
    ),
)
"""The odd answer. A ScriptedCall's arguments go out as ``json.dumps`` writes them: each lone
surrogate the escape ``\\ud800`` inside the arguments string."""


def brain(request: ScriptRequest) -> Reply:
    """SCRIPTED: the odd answer to the player's request, "done" once its results are in."""
    last = request.messages[-1]
    if last.get("role") == "user" and ASK in str(last.get("content")):
        return ODD
    return Reply(content="done")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_lone_surrogates_in_an_answer_lose_no_turn_and_no_record(tmp_path: Path, stream: bool) -> None:
    ensure_js_deps(progress=False)
    recording = tmp_path / "session.jsonl"
    async with EmbeddedServer() as server, VLLMDouble(brain) as double:
        settings = Settings(endpoint=double.base_url, mc_port=server.port, recording_dir=tmp_path,
                            data_dir=tmp_path / "data", endpoint_wait_s=30.0, metrics_address="off",
                            chat_debounce_s=0.3, stream=stream)
        async with (
            open_session(settings, recording=recording) as session,
            PlayerBot(server.port, "bob") as bob,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(session.agent.run)
            await anyio.sleep(1.0)  # the join reaches Emil before the request
            await bob.do("chat", text=ASK)
            with anyio.fail_after(90):
                while not any("odd \ufffd words \U0001f600 \ufffd" in m for m in bob.messages()):  # noqa: ASYNC110
                    await anyio.sleep(0.1)
                while not any(isinstance(r, TurnRecord) and r.steps == 2 for r in read_recording(recording).records):  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            session.agent.stop()
            tg.cancel_scope.cancel()

    read = read_recording(recording)
    assert read.complete, read.problem
    records = read.records
    assert not [r for r in records if isinstance(r, ErrorRecord)], [r for r in records if isinstance(r, ErrorRecord)]
    (turn,) = [r for r in records if isinstance(r, TurnRecord) and r.steps == 2]
    assert not turn.failed and turn.actions >= 1
    # what the model said, as recorded: every lone surrogate U+FFFD, nothing else changed
    odd = next(r for r in records if isinstance(r, CompletionRecord) and r.tool_calls)
    assert odd.content == "sure \ufffd" and odd.reasoning == "thinking \ufffd of \ufffd"
    assert [c.name for c in odd.tool_calls] == ["say", "look\ufffd"]
    assert odd.tool_calls[0].arguments == {"text": "odd \ufffd words \U0001f600 \ufffd"}
    assert odd.tool_calls[1].arguments == {"\ufffdkey": [{"deep": "\ufffd"}], "ok": "\ufffd"}
    results = {r.name: r for r in records if isinstance(r, ToolResultRecord) and r.turn == turn.turn}
    assert results["say"].ok and not results["look\ufffd"].ok  # no such tool: the model is told so
    stored = next(r for r in records if isinstance(r, MessageRecord) and r.openai.get("tool_calls"))
    assert stored.openai["content"] == "sure \ufffd"
    assert [c["function"]["name"] for c in stored.openai["tool_calls"]] == ["say", "look\ufffd"]

    report = await replay_file(recording)
    assert report.stopped is None and not report.errors, (report.stopped, report.errors)
    assert report.diffs and report.identical == len(report.diffs) == report.steps_total, [
        d.to_json() for d in report.differing
    ]

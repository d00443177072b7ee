"""``replay --endpoint``: the same situations asked of a live model over HTTP (the vLLM-dialect
double with a SCRIPTED policy, not a model), side by side with the recording."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from emil.replay import cli_main
from emil.testing.brains import fixed_reply
from emil.testing.reducer import reducer_summary
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.vllm_double import VLLMDouble
from tests.unit.offline.agent_session import record_session

pytestmark = pytest.mark.slow


def _policy() -> tuple[list[int], object]:
    seen: list[int] = []

    def policy(request: ScriptRequest) -> Reply:
        seen.append(request.prompt_tokens)
        if request.messages[-1].get("role") == "tool":
            return Reply(content="[scripted] done")
        # Every second observation the scripted "model" gets the argument type wrong; its calls
        # are judged by Emil's one validation of a call (the tool classes), as live.
        count: object = "many" if len(seen) % 4 == 1 else 2
        return Reply(tool_calls=(ScriptedCall("give", {"player": "alex", "item": "bread", "count": count}),))

    return seen, policy


def test_endpoint_replay_compares_validity_tokens_and_latency(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = anyio.run(record_session, tmp_path / "session.jsonl")
    seen, policy = _policy()
    with VLLMDouble(policy, window=8192) as double:  # type: ignore[arg-type]
        assert cli_main([str(recording), "--endpoint", double.base_url, "--json"]) == 0
        requests = len(double.requests)
    report = json.loads(capsys.readouterr().out)
    live = report["live"]
    assert len(live) == requests == 16  # every recorded step was asked once
    assert report["identical_requests"] == 16  # the live model does not change the history
    # The double counts prompts with the same template and tokenizer: today's prompt, exactly.
    assert [s["live_prompt_tokens"] for s in live] == seen
    assert all(s["live_prompt_tokens"] == s["recorded_prompt_tokens"] for s in live)
    invalid = [s for s in live if s["live_invalid"]]
    assert invalid and all("count: Input should be a valid integer" in s["live_invalid"][0] for s in invalid)
    assert len(invalid) < len(live)
    assert all(s["live_latency_s"] > 0 for s in live)
    assert all(s["live_calls"] in (["give"], []) for s in live)


def test_endpoint_down_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recording = anyio.run(record_session, tmp_path / "session.jsonl")
    assert cli_main([str(recording), "--endpoint", "http://127.0.0.1:9/v1"]) == 2
    assert "error:" in capsys.readouterr().err


SOAK = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "soak-session.jsonl"


def _answers_as_recorded(recorded: list[dict[str, object]], *, invent: bool = False) -> Callable[[ScriptRequest], Reply]:
    """A summariser that gives, request by request, the answers the recording holds (the model
    of the recording again, whatever the double's own summariser has become since); with
    ``invent`` it also adds a gift nobody made (a stand-in for a careless model)."""
    answers = iter(recorded)

    def answer(request: ScriptRequest) -> Reply:
        body = json.loads(str(next(answers)["text"]))
        if invent:
            body["facts"].append({"about": "player", "subject": "zed", "topic": "gave_me", "detail": "diamond"})
        return Reply(content=json.dumps(body))

    return answer


@pytest.mark.parametrize("summariser", ["as recorded", "careless", "reducer"])
def test_endpoint_replay_judges_the_recorded_summaries(summariser: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The soak sample's summary requests, rebuilt from the replayed turns, asked of the double:
    the recording's own answers again keep every recorded fact (none dropped, new or invented);
    one that invents a gift has that fact counted as invented, never as kept; the double's text
    reducer, which wrote the sample's summaries, answers the rebuilt requests with the very facts
    it wrote then (the requests are rebuilt as they were sent)."""
    recorded = [json.loads(line) for line in SOAK.read_text().splitlines() if '"kind":"summary"' in line]
    asked_before = [r for r in recorded if r["outcome"] in ("ready", "invalid")]
    assert asked_before, "the soak sample must hold summaries"
    assert all(r["outcome"] == "ready" and r["text"] for r in asked_before)
    summaries = {
        "as recorded": _answers_as_recorded(asked_before),
        "careless": _answers_as_recorded(asked_before, invent=True),
        "reducer": reducer_summary,
    }[summariser]
    policy = fixed_reply(Reply(content="[scripted] ok"))
    with VLLMDouble(policy, window=16384, summaries=summaries) as double:
        assert cli_main([str(SOAK), "--endpoint", double.base_url, "--json"]) == 0
    verdicts = json.loads(capsys.readouterr().out)["summaries"]
    assert len(verdicts) == len(asked_before)
    assert [v["live_outcome"] for v in verdicts] == ["ready"] * len(asked_before), verdicts
    facts = [len({(f["about"], f["subject"].lower(), f["topic"], f["detail"].lower()) for f in r["facts"]}) for r in asked_before]
    assert [v["kept"] + v["dropped"] for v in verdicts] == facts, verdicts
    assert [v["kept"] for v in verdicts] == facts and sum(v["new"] for v in verdicts) == 0, verdicts
    assert sum(v["invented"] for v in verdicts) == (len(verdicts) if summariser == "careless" else 0)

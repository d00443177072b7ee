"""Recording: round trip, message interning for replay, tolerant reading of damaged files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emil.llm.types import Completion, Timings, ToolCall, Usage
from emil.recording import (
    RECORD_ADAPTER,
    CompletionRecord,
    EndRecord,
    EventRecord,
    HeaderRecord,
    MessageRecord,
    Recorder,
    RequestRecord,
    TurnRecord,
    UnknownRecord,
    messages_for_request,
    read_recording,
)


@dataclass(frozen=True)
class _Msg:
    id: int
    kind: str
    content: str
    role: str = "user"
    event_time: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content, **self.extra}


def _session(path: Path) -> list[list[dict[str, Any]]]:
    """Write a small session; return the requests' messages as sent."""
    sent: list[list[dict[str, Any]]] = []
    system = {"role": "system", "content": "You are Emil."}
    with Recorder(path) as rec:
        rec.write(HeaderRecord(model="m", window=65536, system_prompt="You are Emil.", tools=[{"type": "function"}]))
        history: list[_Msg] = []
        for turn in range(3):
            obs = _Msg(id=2 * turn, kind="observation", content=f"alex says hi #{turn} ü", event_time=100.0 + turn)
            rec.message(obs, turn=turn)
            history.append(obs)
            msgs = [system, *(m.to_openai() for m in history)]
            if turn == 2:  # a trimmed variant of the first message: a derived part
                msgs[1] = {"role": "user", "content": "[elided]"}
            refs = rec.request_refs(msgs, turn=turn)
            rec.write(RequestRecord(turn=turn, refs=refs, predicted_tokens=10 * turn))
            sent.append(msgs)
            ans = _Msg(id=2 * turn + 1, kind="assistant", role="assistant", content="hello")
            rec.message(ans, turn=turn)
            history.append(ans)
    return sent


def test_round_trip_and_requests_rebuild_exactly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sent = _session(path)
    read = read_recording(path)
    assert read.problem is None and read.stopped_at_line is None
    assert read.complete
    assert read.header is not None and read.header.window == 65536
    rebuilt = [msgs for _, msgs in messages_for_request(read.records)]
    assert rebuilt == sent


def test_each_message_content_is_written_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _session(path)
    recs = read_recording(path).records
    msgs = [r for r in recs if isinstance(r, MessageRecord)]
    # 6 history messages + system prompt + one trimmed variant
    assert len(msgs) == 8
    assert len({r.ref for r in msgs}) == 8
    assert [r.origin for r in msgs if r.id is None] == ["system", "derived"]
    assert {r.id for r in msgs if r.id is not None} == set(range(6))


def test_truncated_last_line_reads_everything_before_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _session(path)
    whole = path.read_bytes()
    n_lines = whole.count(b"\n")
    path.write_bytes(whole[:-7])  # a process killed mid-write
    read = read_recording(path)
    assert read.stopped_at_line == n_lines
    assert read.problem is not None and "truncated" in read.problem
    assert len(read.records) == n_lines - 1
    assert not read.complete


def test_corrupt_middle_line_stops_there(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _session(path)
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = '{"kind": "request", "refs": 12}\n'
    path.write_text("".join(lines))
    read = read_recording(path)
    assert read.stopped_at_line == 4
    assert len(read.records) == 3
    assert read.problem is not None and "unreadable" in read.problem


def test_old_minimal_records_and_unknown_kinds_load(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(d)
            for d in [
                {"kind": "header"},
                {"kind": "event"},
                {"kind": "turn"},
                {"kind": "hologram", "t": 5, "x": 1},
            ]
        )
        + "\n\n"
    )
    read = read_recording(path)
    assert read.problem is None
    kinds = [type(r) for r in read.records]
    assert kinds == [HeaderRecord, EventRecord, TurnRecord, UnknownRecord]
    unknown = read.records[3]
    assert isinstance(unknown, UnknownRecord)
    assert unknown.original_kind == "hologram" and unknown.data == {"x": 1} and unknown.t == 5


def test_completion_record_round_trips_completion() -> None:
    c = Completion(
        content=None,
        reasoning="think",
        tool_calls=[ToolCall(id="c1", name="say", raw_arguments='{"text":"hi"}', arguments={"text": "hi"})],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=100, completion_tokens=7, cached_tokens=64),
        timings=Timings(total_s=0.5, first_token_s=0.1),
        model="m",
    )
    rec = CompletionRecord.from_completion(c, turn=3, step=1)
    back = RECORD_ADAPTER.validate_json(RECORD_ADAPTER.dump_json(rec))
    assert isinstance(back, CompletionRecord)
    assert back.to_completion() == c
    assert back.turn == 3


def test_recorder_after_close_is_noop_and_close_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    rec = Recorder(path)
    rec.close("done")
    rec.close("again")
    rec.write(TurnRecord())
    read = read_recording(path)
    assert [type(r) for r in read.records] == [EndRecord]
    assert isinstance(read.records[0], EndRecord) and read.records[0].reason == "done"


def test_request_refs_by_id_skip_hashing_and_still_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "ids.jsonl"
    system = {"role": "system", "content": "S"}
    with Recorder(path) as rec:
        a = _Msg(id=10, kind="observation", content="a")
        rec.message(a)
        refs1 = rec.request_refs([system, a.to_openai()], ids=[1, 10])
        elided = {"role": "user", "content": "[elided]"}
        refs2 = rec.request_refs([system, elided], ids=[1, 11])
        refs3 = rec.request_refs([system, elided], ids=[1, 11])
        rec.write(RequestRecord(refs=refs1))
        rec.write(RequestRecord(refs=refs2))
    assert refs1 == ["x1", "10"] and refs2 == ["x1", "x2"] and refs3 == refs2
    read = read_recording(path)
    assert [m for _, m in messages_for_request(read.records)] == [[system, a.to_openai()], [system, elided]]
    derived = [r for r in read.records if isinstance(r, MessageRecord) and r.origin == "derived"]
    assert [(r.ref, r.id) for r in derived] == [("x2", 11)]


def test_a_header_written_before_preserve_thinking_reads_as_false(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"t": 1.0, "turn": null, "kind": "header", "schema_version": 1, "enable_thinking": true}\n')
    header = read_recording(path).records[0]
    assert isinstance(header, HeaderRecord)
    assert header.enable_thinking is True and header.preserve_thinking is False


def test_a_trim_is_one_type_from_the_ladder_to_the_file_and_old_trim_lines_load(tmp_path: Path) -> None:
    from emil.context.ladder import TrimRecord

    path = tmp_path / "trims.jsonl"
    made = TrimRecord(t=5.0, rung="fold", messages_touched=6, tokens_freed=900, horizon_after_s=60.0,
                      tokens_before=30000, tokens_after=29100)
    lines = [
        # as earlier versions wrote them (the type was TrimRecordEntry), oldest without sizes
        {"t": 1.0, "turn": 3, "kind": "trim", "rung": "evict", "messages_touched": 2, "tokens_freed": 40},
        {"t": 2.0, "turn": 4, "kind": "trim", "rung": "elide_results", "messages_touched": 1,
         "tokens_freed": 300, "horizon_after_s": 12.5, "tokens_before": 900, "tokens_after": 600},
    ]
    path.write_text("".join(json.dumps(d) + "\n" for d in lines))
    with Recorder(path) as rec:
        rec.write(made.model_copy(update={"turn": 7}))  # what the loop writes
    read = read_recording(path)
    assert read.problem is None
    trims = [r for r in read.records if isinstance(r, TrimRecord)]
    assert [(r.turn, r.rung, r.tokens_before) for r in trims] == [(3, "evict", None), (4, "elide_results", 900), (7, "fold", 30000)]
    assert trims[2] == made.model_copy(update={"turn": 7})
    assert RECORD_ADAPTER.validate_json(RECORD_ADAPTER.dump_json(made)) == made

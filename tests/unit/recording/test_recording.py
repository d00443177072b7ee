"""Recording: round trip, message interning for replay, tolerant reading of damaged files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from emil.exceptions import ConfigurationError
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
    status_full: str | None = None

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


def test_a_new_session_never_appends_to_an_existing_file(tmp_path: Path) -> None:
    from emil.recording import RecordingExists

    path = tmp_path / "s.jsonl"
    Recorder(path).close("first")
    with pytest.raises(RecordingExists) as err:
        Recorder(path)
    assert str(err.value) == (f"recording {path} already exists; choose another path (--recording) or set "
                              "recording_append (--recording-append) to continue it")
    assert [r.kind for r in read_recording(path).records] == ["end"]
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    Recorder(empty).close("fine")  # an empty file holds no session to lose


@pytest.mark.parametrize("torn", [b'{"kind": "turn", "tu', b"\xff\xfe garbage", b'{"kind": "turn"}'])
def test_appending_repairs_a_torn_tail_first(tmp_path: Path, torn: bytes) -> None:
    from emil.recording import ErrorRecord

    path = tmp_path / "s.jsonl"
    with Recorder(path) as rec:
        rec.write(HeaderRecord(session_id="one"))
        rec.write(TurnRecord(turn=1))
    whole = path.read_bytes()
    path.write_bytes(whole + torn)  # killed mid-write (the last case: whole JSON, no newline)
    rec = Recorder(path, append=True)
    rec.write(HeaderRecord(session_id="two"))
    rec.close("stopped", exit_code=0)
    read = read_recording(path)
    assert read.problem is None and read.complete
    kinds = [r.kind for r in read.records]
    assert kinds == ["header", "turn", "end", "error", "header", "end"]
    repair = read.records[3]
    assert isinstance(repair, ErrorRecord)
    assert (repair.error_type, repair.where, repair.message, repair.fatal) == (
        "TornTail", "recording", f"cut {len(torn)} bytes of a torn last line before this session appended", False)
    last = read.records[-1]
    assert isinstance(last, EndRecord) and last.exit_code == 0


def test_repair_cuts_only_the_tail(tmp_path: Path) -> None:
    from emil.recording import repair_tail

    path = tmp_path / "s.jsonl"
    good = b'{"kind": "turn", "turn": 1}\n'
    path.write_bytes(good + b"not json\n" + good)
    assert repair_tail(path) == 0  # a bad line in the middle is not a torn tail
    path.write_bytes(good + b"x" * 200_000)  # a long torn line, past the reading window
    assert repair_tail(path) == 200_000 and path.read_bytes() == good
    path.write_bytes(b"torn")
    assert repair_tail(path) == 4 and path.read_bytes() == b""
    path.write_bytes(good + b"\n")  # a blank last line is whole
    assert repair_tail(path) == 0
    path.write_bytes(good + b"not json\n\n")  # a bad line before a whole blank one is not a tail
    assert repair_tail(path) == 0


def test_outage_records_carry_every_field() -> None:
    from emil.backoff import OutageEvent
    from emil.recording import RetryRecord, ServiceRecord, outage_record

    retry = outage_record(OutageEvent("retry", "llm endpoint", 3, "refused", 1.5, 7.0), turn=4, step=2)
    assert isinstance(retry, RetryRecord)
    assert (retry.turn, retry.step, retry.service, retry.attempt, retry.error, retry.delay_s, retry.down_for_s) == (
        4, 2, "llm endpoint", 3, "refused", 1.5, 7.0)
    up = outage_record(OutageEvent("up", "minecraft server", 5, "was refused", 0.0, 12.5), turn=9)
    assert isinstance(up, ServiceRecord)
    assert (up.turn, up.service, up.state, up.attempts, up.down_for_s, up.error) == (
        9, "minecraft server", "up", 5, 12.5, "was refused")


def test_usage_round_trips_or_stays_absent() -> None:
    with_usage = Completion(content="x", usage=Usage(prompt_tokens=10, completion_tokens=0, cached_tokens=4,
                                                     reasoning_tokens=3))
    rec = CompletionRecord.from_completion(with_usage)
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens, rec.reasoning_tokens) == (10, 0, 4, 3)
    assert rec.to_completion().usage == with_usage.usage
    bare = CompletionRecord.from_completion(Completion(content="x"))
    assert (bare.prompt_tokens, bare.completion_tokens, bare.cached_tokens, bare.reasoning_tokens) == (None,) * 4
    assert bare.to_completion().usage is None and bare.to_completion().timings is None
    partial = CompletionRecord(prompt_tokens=5)  # an old record without the other counts
    assert partial.to_completion().usage == Usage(prompt_tokens=5, completion_tokens=0)


def test_unknown_kinds_keep_their_time_and_turn_and_non_objects_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text('{"kind": "teleport", "t": 5.0, "turn": 7, "to": [1, 2]}\n[1, 2]\n')
    read = read_recording(path)
    unknown = read.records[0]
    assert isinstance(unknown, UnknownRecord)
    assert (unknown.t, unknown.turn, unknown.original_kind, unknown.data) == (5.0, 7, "teleport", {"to": [1, 2]})
    assert read.stopped_at_line == 2 and read.problem == "line 2: unreadable line (expected a JSON object, got list)"


def test_appending_says_what_it_cut_and_writes_utf8(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"kind": "end"}\n{"kind"')
    with caplog.at_level(logging.WARNING, logger="emil.recording"), Recorder(path, append=True) as rec:
        rec.write(EndRecord(reason="さくら"))
    assert caplog.messages == [f"recording {path}: cut a torn last line (7 bytes) before appending"]
    assert "さくら".encode() in path.read_bytes()


def test_a_one_byte_torn_file_is_cut(tmp_path: Path) -> None:
    from emil.recording import repair_tail

    path = tmp_path / "s.jsonl"
    path.write_bytes(b"{")
    assert repair_tail(path) == 1 and path.read_bytes() == b""


def test_message_origins_and_turns(tmp_path: Path) -> None:
    path = tmp_path / "o.jsonl"
    with Recorder(path) as rec:
        for i, kind in enumerate(("system", "memory", "observation"), start=1):
            rec.message(_Msg(id=i, kind=kind, content=kind), turn=3)
        rec.request_refs([{"role": "user", "content": "new"}], turn=4, ids=[None])
        assert rec.records_written == 4
    records = [r for r in read_recording(path).records if isinstance(r, MessageRecord)]
    assert [(r.origin, r.message_kind, r.turn, r.id) for r in records] == [
        ("system", "system", 3, 1), ("memory", "memory", 3, 2), ("history", "observation", 3, 3),
        ("derived", None, 4, None)]


def test_a_recorder_used_as_a_context_says_how_it_ended(tmp_path: Path) -> None:
    with Recorder(tmp_path / "ok.jsonl"):
        pass
    with pytest.raises(KeyError), Recorder(tmp_path / "bad.jsonl"):
        raise KeyError("x")
    assert read_recording(tmp_path / "ok.jsonl").records[-1].reason == "closed"  # type: ignore[union-attr]
    assert read_recording(tmp_path / "bad.jsonl").records[-1].reason == "error"  # type: ignore[union-attr]


def test_a_new_recording_makes_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "s.jsonl"
    Recorder(path).close("x")
    assert path.exists()
    one = tmp_path / "one.jsonl"
    one.write_text("\n")  # one byte: not empty, so a session is there to protect
    with pytest.raises(ConfigurationError):
        Recorder(one)


def test_request_refs_use_known_ids_beyond_the_list(tmp_path: Path) -> None:
    with Recorder(tmp_path / "r.jsonl") as rec:
        rec.message(_Msg(id=7, kind="observation", content="a"))
        system = {"role": "system", "content": "S"}
        # ids shorter than the messages: the rest are interned by content
        refs = rec.request_refs([{"role": "user", "content": "a"}, system], ids=[7])
        assert refs == ["7", "x1"]
        again = rec.request_refs([system, {"role": "user", "content": "b"}], ids=[None, 8])
        assert again == ["x1", "x2"] and rec.request_refs([{"role": "user", "content": "zz"}], ids=[8]) == ["x2"]


def test_what_the_reader_says_about_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"kind": "end", "reason": "x"}\n{"kind": "turn", "tu')
    assert read_recording(path).problem.startswith("line 2: truncated last line (")  # type: ignore[union-attr]
    path.write_text('{"kind": "turn", "turn": "not a number"}\n{"kind": "end"}\n')
    problem = read_recording(path).problem
    assert problem is not None and problem.startswith("line 1: unreadable line (") and "\n" not in problem


def test_repair_finds_lines_across_its_reading_window(tmp_path: Path) -> None:
    from emil.recording import repair_tail

    path = tmp_path / "s.jsonl"
    good = b'{"kind": "turn", "turn": 1}\n'
    long_ok = b'{"kind": "turn", "reason": "' + b"r" * 70_000 + b'"}\n'
    path.write_bytes(good + long_ok + b"torn")
    assert repair_tail(path) == 4 and path.read_bytes() == good + long_ok
    path.write_bytes(b"\n" + good + b"\n{")  # a blank line before the torn one stays
    assert repair_tail(path) == 1 and path.read_bytes() == b"\n" + good + b"\n"
    path.write_bytes(b"x\n")  # a whole but unreadable last line is cut too
    assert repair_tail(path) == 2


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
    with Recorder(path, append=True) as rec:
        rec.write(made.model_copy(update={"turn": 7}))  # what the loop writes
    read = read_recording(path)
    assert read.problem is None
    trims = [r for r in read.records if isinstance(r, TrimRecord)]
    assert [(r.turn, r.rung, r.tokens_before) for r in trims] == [(3, "evict", None), (4, "elide_results", 900), (7, "fold", 30000)]
    assert trims[2] == made.model_copy(update={"turn": 7})
    assert RECORD_ADAPTER.validate_json(RECORD_ADAPTER.dump_json(made)) == made


@pytest.mark.parametrize(
    ("text", "ok", "fate", "interrupt", "note"),
    [
        ("say done", True, "ran", "", ""),
        ("go_to failed: no path", False, "ran", "", ""),
        ("refused: attack the player bob: only an operator may (rule attack.player)", False, "ran", "", ""),
        ("not run: interrupted (hit by zombie)", False, "not_run", "hit by zombie", ""),
        ("aborted: interrupted (alex spoke to Emil (urgent))", False, "aborted", "alex spoke to Emil (urgent)", ""),
        ("not run: Emil is stopping", False, "stopping", "", ""),
        ("error: arguments are not valid JSON", False, "invalid", "", ""),
        ("error: go_to timed out after 60 s and was aborted", False, "timed_out", "", ""),
        ("say done (3 more tool call(s) in that answer were not run: at most 2 per answer)", True, "ran", "",
         " (3 more tool call(s) in that answer were not run: at most 2 per answer)"),
        ("not run: Emil is stopping (1 more tool call(s) in that answer were not run: at most 8 per answer)", False,
         "stopping", "", " (1 more tool call(s) in that answer were not run: at most 8 per answer)"),
        # the world's words that only look like the engine's: ok results always ran
        ("not run: interrupted (a joke)", True, "ran", "", ""),
    ],
)
def test_a_tool_result_from_before_the_fields_reads_its_outcome_from_its_words(
    text: str, ok: bool, fate: str, interrupt: str, note: str
) -> None:
    from emil.recording import ToolResultRecord
    from emil.recording.records import parse_record

    old = parse_record({"kind": "tool_result", "t": 1.0, "turn": 1, "name": "say", "ok": ok, "text": text})
    assert isinstance(old, ToolResultRecord)
    assert (old.fate, old.interrupt, old.note) == (fate, interrupt, note)
    assert old.answer + old.note == text


def test_a_tool_result_with_the_fields_is_read_by_them_never_by_its_words() -> None:
    from emil.recording import ToolResultRecord
    from emil.recording.records import parse_record

    record = ToolResultRecord(turn=1, name="say", ok=False, text="not run: Emil is stopping", fate="ran")
    back = parse_record(json.loads(RECORD_ADAPTER.dump_json(record)))
    assert isinstance(back, ToolResultRecord) and back.fate == "ran" and back.note == ""
    noted = ToolResultRecord(turn=1, name="say", ok=True, text="said it (more)", fate="ran", note=" (more)")
    assert noted.answer == "said it"

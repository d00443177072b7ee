"""chars_per_token: per-category counts on recordings whose answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.exceptions import UnknownTokenizerError
from emil.offline.chars_per_token import format_table, measure_chars_per_token
from emil.offline.content import iter_pieces
from emil.recording import MessageRecord, read_recording
from tests.unit.offline.crafted import header, simple_turn, word_tokenizer, write_records
from tools.chars_per_token import main as cli_main


def _crafted(tmp_path: Path) -> Path:
    records: list[object] = [header()]
    for turn in range(10):
        records += simple_turn(
            turn, 10 * turn + 1, t=1000.0 + 10 * turn,
            observation="x y z",          # 5 chars, 3 words
            args='{"text":"hi"}',         # 13 chars, 1 word
            result="ab ab ab ab",         # 11 chars, 4 words
            reasoning="abc def",          # 7 chars, 2 words
            answer="okay then",           # 9 chars, 2 words
        )
    # A derived (trimmed) variant is a rewrite of counted history: never counted again.
    records.append(MessageRecord(ref="x1", origin="derived", openai={"role": "tool", "content": "[elided 11 chars]"}))
    return write_records(tmp_path / "crafted.jsonl", records)


def test_word_tokenizer_counts_are_known_by_construction(tmp_path: Path) -> None:
    tok = word_tokenizer(tmp_path / "tokenizer.json")
    report = measure_chars_per_token([_crafted(tmp_path)], [str(tok)], assume=4.0)
    (t,) = report.tokenizers
    expect = {  # category: (pieces, chars, tokens)
        "tool_results": (10, 110, 40),
        "tool_call_args": (10, 130, 10),
        "reasoning": (10, 70, 20),
        "tool_specs": (1, len('{"a": "b"}'), 2),
        "observations": (10, 50, 30),
        "system_prompt": (1, 13, 3),
        "assistant_text": (10, 90, 20),
        "chat_lines": (10, 50, 30),  # the chat events' text, also inside the observations
    }
    got = {c.category: (c.pieces, c.chars, c.tokens) for c in t.categories}
    assert got == expect
    results = t.get("tool_results")
    assert results is not None
    assert results.chars_per_token == pytest.approx(2.75)
    assert results.estimate(4.0) == pytest.approx(27.5)
    assert results.error_tokens(4.0) == pytest.approx(-12.5)
    assert results.error_pct(4.0) == pytest.approx(-31.25)
    assert t.total.tokens == sum(v[2] for k, v in expect.items() if k != "chat_lines")


def test_qwen_digits_are_one_token_each(tmp_path: Path) -> None:
    # Qwen's pre-tokenizer splits digits one by one: 100 digits are 100 tokens, 1.0 char/token.
    records = [header(system_prompt="", tools=[])]
    records += simple_turn(0, 1, t=1.0, observation="a", args="{}", result="0123456789" * 10)
    report = measure_chars_per_token([write_records(tmp_path / "d.jsonl", records)], ["qwen3.6", "heuristic"])
    qwen, heuristic = report.tokenizers
    res = qwen.get("tool_results")
    assert res is not None and (res.chars, res.tokens) == (100, 100)
    assert res.error_pct(4.0) == pytest.approx(-75.0)
    h = heuristic.get("tool_results")
    assert h is not None and h.tokens == 25  # the estimate measured against itself: no error
    assert h.error_tokens(4.0) == 0


def test_truncated_recording_is_measured_up_to_the_damage(tmp_path: Path) -> None:
    path = _crafted(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut mid-line
    report = measure_chars_per_token([path], ["heuristic"])
    (src,) = report.sources
    assert src.problem is not None and src.stopped_at_line is not None
    assert src.records == src.stopped_at_line - 1
    assert "stopped at line" in format_table(report)


def test_unknown_tokenizer_names_the_options(tmp_path: Path) -> None:
    with pytest.raises(UnknownTokenizerError, match=r"tokenizer\.json"):
        measure_chars_per_token([_crafted(tmp_path)], ["gpt-17"])


def test_pieces_take_the_system_prompt_from_the_header_once(tmp_path: Path) -> None:
    records = [header(system_prompt="S"), MessageRecord(ref="x1", origin="system", openai={"role": "system", "content": "S"})]
    read = read_recording(write_records(tmp_path / "s.jsonl", records))
    cats = [p.category for p in iter_pieces(read.records)]
    assert cats.count("system_prompt") == 1


def test_cli_prints_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tok = word_tokenizer(tmp_path / "tokenizer.json")
    path = _crafted(tmp_path)
    assert cli_main([str(path), "-t", str(tok), "--json", "--assume", "3.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["assume_chars_per_token"] == 3.5
    cats = {c["category"]: c for c in data["tokenizers"][0]["categories"]}
    assert cats["tool_results"]["chars_per_token"] == 2.75
    assert cli_main([str(path), "-t", str(tok)]) == 0
    assert "tool_results" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:  # refused while the flags are parsed (emil.cli_args)
        cli_main([str(tmp_path / "missing.jsonl")])
    assert stop.value.code == 2
    assert "no such recording" in capsys.readouterr().err
    assert cli_main([str(path), "-t", "nope"]) == 2


def test_a_synthetic_session_is_measured_like_a_recording() -> None:
    report = measure_chars_per_token([], ["qwen3.6"], synthetic_hours=0.2)
    (t,) = report.tokenizers
    cats = {c.category for c in t.categories}
    assert {"tool_results", "tool_call_args", "tool_specs", "observations", "system_prompt"} <= cats
    assert report.sources[0].records is None
    assert "generated by emil.offline.synthetic" in format_table(report)

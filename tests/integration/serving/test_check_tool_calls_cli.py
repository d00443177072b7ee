"""check_tool_calls end to end: Emil's real prompt and tools, the live client, the DOUBLE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.recording import HeaderRecord, MessageRecord, Recorder, RequestRecord

pytestmark = pytest.mark.slow


def test_demo_double_passes_with_the_real_prompt_and_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import check_tool_calls as cli

    out = tmp_path / "gate.json"
    code = cli.main(["--demo-double", "-n", "2", "--no-progress", "--json-out", str(out)])
    text = capsys.readouterr()
    assert code == 0, text.out + text.err
    report = json.loads(out.read_text())
    assert report["passed"] and report["simulated"] is True
    assert report["valid"] == report["attempts"] == 2 * 15  # 15 shipped situations
    # the scripted brain answers the world requests with the world tools, so each one's
    # arguments went through the live client and the validator
    assert {"say", "craft", "smelt", "build", "sleep", "store", "take"} <= set(report["per_tool"])
    assert "SCRIPTED" in text.err and "PASS" in text.out


def test_broken_json_fails_the_gate_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import check_tool_calls as cli

    out = tmp_path / "gate.json"
    code = cli.main(["--demo-double", "broken", "-n", "2", "--no-progress", "--json-out", str(out)])
    assert code == 1
    report = json.loads(out.read_text())
    assert report["outcomes"].get("invalid_json", 0) >= 1
    assert "FAIL" in capsys.readouterr().out


def test_situations_from_a_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools import check_tool_calls as cli

    path = tmp_path / "session.jsonl"
    recorder = Recorder(path)
    recorder.write(HeaderRecord(system_prompt="an OLD system prompt"))
    recorder.write(
        MessageRecord(
            ref="x0", origin="system", openai={"role": "system", "content": "an OLD system prompt"}
        )
    )
    for i, text in enumerate(['Steve says: "hi Emil"', 'Alex says: "follow me"'], start=1):
        recorder.write(MessageRecord(ref=str(i), id=i, openai={"role": "user", "content": text}))
        recorder.write(RequestRecord(turn=i, refs=["x0", str(i)]))
    recorder.close()
    out = tmp_path / "gate.json"
    code = cli.main(
        [
            "--demo-double",
            "--recording",
            str(path),
            "-n",
            "1",
            "--no-progress",
            "--json-out",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["attempts"] == 2
    assert set(report["per_situation"]) == {"session#turn1.0", "session#turn2.0"}

"""The tool-call gate (tools/check_tool_calls.py) on a real trained model, as an operator runs it.

With ``tool_choice`` "required" (vLLM's structured outputs) every answer of the small model is
a call, and the gate checks each against Emil's argument models. With "auto" the same model
writes its calls as text, which the hermes parser does not take: the gate fails and names those
answers ``text_call``, apart from answers that call nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from emil.serving.cpu_vllm import CpuVLLMServer
from emil.testing import processes

ROOT = Path(__file__).resolve().parents[3]
SITUATIONS = ("greeting", "follow-request")


def _gate(server: CpuVLLMServer, tmp_path: Path, tool_choice: str) -> tuple[int, dict[str, object], str]:
    data = json.loads((ROOT / "prompts" / "tool_check_situations.json").read_text())
    data["situations"] = [s for s in data["situations"] if s["name"] in SITUATIONS]
    assert len(data["situations"]) == len(SITUATIONS)
    (tmp_path / "some.json").write_text(json.dumps(data))
    out = tmp_path / f"gate-{tool_choice}.json"
    run = processes.run(
        [sys.executable, str(ROOT / "tools" / "check_tool_calls.py"), "--endpoint", server.base_url,
         "-n", "1", "--situations", str(tmp_path / "some.json"), "--tool-choice", tool_choice,
         "--no-progress", "--json-out", str(out)],
        timeout=500, capture_output=True, text=True, cwd=ROOT,
        # request_timeout_s 240: the gate scores validity, not latency. A cold prefill of the
        # gate's 3.9k-token prompt is about 25 s on a quiet box, but CI's first run went past the
        # default 120 s with the other lane busy (the bench before it had filled the prefix cache).
        env={**os.environ, "EMIL_OUTPUT_RESERVE": "96", "EMIL_TEMPERATURE": "0", "EMIL_REQUEST_TIMEOUT_S": "240",
             "EMIL_DATA_DIR": str(tmp_path / "data")},
    )
    assert out.exists(), f"exit {run.returncode}, no report: {run.stdout + run.stderr}"
    return run.returncode, json.loads(out.read_text()), run.stdout + run.stderr


@pytest.mark.timeout(520, func_only=True)
def test_with_required_every_answer_of_the_real_model_is_a_valid_call(
    real_model: CpuVLLMServer, tmp_path: Path
) -> None:
    code, report, output = _gate(real_model, tmp_path, "required")
    print(output)
    assert report["attempts"] == len(SITUATIONS)
    assert code == 0 and report["passed"] is True and report["valid"] == len(SITUATIONS), output


@pytest.mark.timeout(520, func_only=True)
def test_with_auto_the_gate_names_the_calls_written_as_text(real_model: CpuVLLMServer, tmp_path: Path) -> None:
    code, report, output = _gate(real_model, tmp_path, "auto")
    print(output)
    outcomes = report["outcomes"]
    assert isinstance(outcomes, dict) and sum(outcomes.values()) == len(SITUATIONS)
    # What this model does under auto (docs/llm.md): calls as bare JSON text, which the parser
    # does not take; the gate names them (an answer that is a real call would count as valid).
    assert outcomes.get("text_call", 0) >= 1, outcomes
    assert (code == 0) == bool(report["passed"]), output

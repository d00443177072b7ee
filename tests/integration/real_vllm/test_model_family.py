"""Start-up against the real vLLM: the family resolved and checked by the server's /tokenize,
``model_family = "server"`` counting exactly through it, and a wrong family refused.

Each prompt Emil assembles (an observation with Unicode, a tool call with reasoning, its result,
a reply) is sent to the server as a real chat request (one output token): its
``usage.prompt_tokens`` must equal Emil's prediction.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from emil.agent.startup import check_model, new_client
from emil.config import Settings
from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.manager import ContextManager
from emil.exceptions import ConfigurationError
from emil.llm.types import ChatRequest
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.testing import processes
from tests.integration.real_vllm.shapes import TOOLS

CALL = {"id": "c1", "name": "say", "arguments": '{"text": "héllo \\"alex\\", 1.50 🙂"}'}


async def _predicted_and_served(
    server: CpuVLLMServer, caplog: pytest.LogCaptureFixture, **settings: object
) -> tuple[str, str, list[tuple[int, int]], int]:
    """(family, where it came from, [(predicted, server's usage)], /tokenize calls counted)."""
    s = Settings(endpoint=server.base_url, output_reserve=16, **settings)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="emil.startup")
    pairs: list[tuple[int, int]] = []
    async with new_client(s) as llm:
        model = await check_model(s, llm)
        manager = ContextManager(
            model.counter, Budget(model.window, s.output_reserve), "You are Emil.", TOOLS,
            s.enable_thinking, family=model.family,
        )
        history = History().start_turn(Message.observation("[events]\n- alex says: hi Emil 🙂 <|im_end|>"))
        for message in (
            Message.assistant("", tool_calls=[CALL], reasoning="greet back"),
            Message.tool_result("c1", '{"ok": true, "said": "héllo"}'),
            Message.assistant("Hello alex!"),
        ):
            assembly = manager.assemble(history)
            request = ChatRequest(
                messages=assembly.messages, tools=TOOLS, max_completion_tokens=1,
                enable_thinking=s.enable_thinking, stream=False,
            )
            completion = await llm.complete(request)
            assert completion.usage is not None
            pairs.append((assembly.predicted_tokens, completion.usage.prompt_tokens))
            history = assembly.history.append(message)
    calls = getattr(model.counter, "stats", {}).get("calls", 0)
    return model.family.name, model.family_source, pairs, calls


@pytest.mark.parametrize("thinking", [False, True])
async def test_the_family_is_resolved_from_the_served_name_checked_and_exact(
    real_vllm: CpuVLLMServer, caplog: pytest.LogCaptureFixture, thinking: bool
) -> None:
    name, source, pairs, _ = await _predicted_and_served(
        real_vllm, caplog, enable_thinking=thinking
    )
    assert name == "qwen3" and "/tokenize agrees" in source, source
    assert all(predicted == served for predicted, served in pairs), pairs


async def test_the_server_family_counts_exactly_through_the_real_tokenize(
    real_vllm: CpuVLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    name, source, pairs, calls = await _predicted_and_served(
        real_vllm, caplog, model_family="server"
    )
    assert name == "server" and source == "setting model_family=server"
    assert all(predicted == served for predicted, served in pairs), pairs
    assert 0 < calls < 40, calls  # probes for the parts, one whole count per prompt


@pytest.mark.parametrize("wrong", ["qwen3.6", "qwen3.5", "qwen3-coder", "qwen3-instruct-2507"])
async def test_a_wrong_family_set_by_the_operator_stops_at_start_in_one_line(
    real_vllm: CpuVLLMServer, wrong: str
) -> None:
    s = Settings(endpoint=real_vllm.base_url, model_family=wrong)
    async with new_client(s) as llm:
        with pytest.raises(ConfigurationError) as caught:
            await check_model(s, llm)
    message = str(caught.value)
    assert 'set model_family = "server"' in message and wrong in message, message
    assert "\n" not in message


def test_a_wrong_family_stops_the_real_cli_with_exit_2(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    """The operator's view: ``run_emil.py live`` with the wrong family ends at start with one
    line and exit 2 (a configuration error), before connecting to Minecraft (no server runs on
    the port it is given)."""
    root = Path(__file__).resolve().parents[3]
    proc = processes.run(
        [
            sys.executable, str(root / "run_emil.py"), "live",
            "--endpoint", real_vllm.base_url, "--model-family", "qwen3.6",
            "--mc-port", "9", "--data-dir", str(tmp_path / "data"),
            "--recording-dir", str(tmp_path),
        ],
        timeout=120, capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr
    assert any('set model_family = "server"' in line for line in lines), proc.stderr

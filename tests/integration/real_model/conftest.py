"""The real-model tier: ONE vLLM server on this CPU serving real trained weights
(Qwen2.5-Coder-0.5B-Instruct, emil/serving/real_model.py) per test session, warmed once.

Every test here is marked ``slow`` and ``real_model`` (run the tier alone with
``pytest -m real_model``). The model is installed when missing (``bash .ci/run`` installs it
before pytest starts; progress goes to the terminal) and the server started once; when either
fails, every test of the tier FAILS with the reason, never skips.

Time: the server starts in about a minute; a cold prefill of Emil's 3.9k-token prompt takes
about 25 s on this CPU and a few hundred milliseconds once its prefix is cached, so the
fixture sends Emil's system prompt and tools once before any test (the warm-up) and the tests
keep to a few turns with bounded waits. Each test's own time limit covers the test function
only (``func_only``).

Other tiers may use the same server by importing the fixture into their conftest
(``from tests.integration.real_model.conftest import real_model  # noqa: F401``).
``EMIL_REAL_MODEL_URL=http://127.0.0.1:P/v1`` runs the tier against a real-model server already
running (``python3 tools/launch_vllm.py --real-model``) instead of starting one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest

from emil.config import Settings
from emil.serving.cpu_vllm import CpuServerError, CpuVLLMServer
from emil.serving.real_model import prepare, real_server_options
from tests.integration.real_vllm.conftest import start_server

TIER = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if TIER in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.real_model)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(400, func_only=True))


def _progress(line: str) -> None:
    assert sys.__stderr__ is not None
    sys.__stderr__.write(f"[real_model] {line}\n")  # visible despite pytest's capture
    sys.__stderr__.flush()


def _warm(server: CpuVLLMServer | RunningServer, settings: Settings) -> float:
    """Send Emil's system prompt and tools once (one token out), so the tests start with the
    prefix cached; returns the seconds it took."""
    from emil.agent.persona import load_system_prompt
    from emil.world.actions import tool_specs

    started = time.monotonic()
    for must_call in (False, True):  # the two tool lists Emil sends (tool_choice auto, required)
        tools = tool_specs(settings.tools_off, must_call=must_call)
        system = load_system_prompt(None, name=settings.bot_name, tools=[t["function"]["name"] for t in tools])
        body = {
            "model": server.model, "max_tokens": 1, "tools": tools,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": "[events]\n"}],
        }
        httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=240).raise_for_status()
    return time.monotonic() - started


@dataclass(frozen=True)
class RunningServer:
    """A real-model server this session did not start (``EMIL_REAL_MODEL_URL``)."""

    base_url: str
    model: str = real_server_options().served_model_name

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuVLLMServer | RunningServer]:
    """The running real-model server (``.base_url``, ``.root_url``, ``.model``), warmed."""
    given = os.environ.get("EMIL_REAL_MODEL_URL")
    if given:
        server = RunningServer(given.rstrip("/"))
        _progress(f"warm-up of {given} (Emil's system prompt and tools): {_warm(server, Settings()):.1f} s")
        yield server
        return
    log_path = tmp_path_factory.mktemp("real_model") / "server.log"
    try:
        env, model_dir = prepare(progress=_progress)
    except CpuServerError as exc:
        pytest.fail(f"the real model could not be installed: {exc}", pytrace=False)
    # niceness 10: behind the other lanes' bots and sessions (tools/test_lanes.py)
    for running in start_server(env, model_dir, replace(real_server_options(), nice=10), log_path):
        try:
            _progress(f"warm-up (Emil's system prompt and tools): {_warm(running, Settings()):.1f} s")
        except httpx.HTTPError as exc:
            pytest.fail(f"the real-model server did not answer the warm-up: {exc}", pytrace=False)
        yield running

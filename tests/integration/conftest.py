"""Fixtures more than one tier uses, defined once here so each is one instance per session.

``real_vllm`` (the real-vLLM tier's server, tests/integration/real_vllm/conftest.py) is asked for
by that tier and by the real-model tier's A/B bench test; defined in either tier's conftest, the
other tier's import of it would be a second fixture and start a second server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emil.serving.cpu_vllm import CpuVLLMServer
from tests.integration.real_vllm.conftest import serve_tier


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CpuVLLMServer]:
    """The real-vLLM tier's running server (``.base_url``, ``.root_url``, ``.model``, ``.options``)."""
    yield from serve_tier(tmp_path_factory)

"""Every public name the agent-side modules export exists, and nothing private is exported."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "emil.agent", "emil.agent.loop", "emil.agent.ports", "emil.agent.turnstats", "emil.agent.persona",
    "emil.agent.startup", "emil.agent.session", "emil.agent.context_port", "emil.agent.world_port",
    "emil.cli", "emil.config", "emil.demo", "emil.senses.perception", "emil.recording", "emil.senses.observation",
    "emil.backoff", "emil.context.untrusted", "emil.testing.faults", "emil.testing.chaos",
    "emil.testing.chaos_scenarios", "emil.testing.sdk_stream",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_public(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    for attr in exported:
        assert not attr.startswith("_")
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"

"""Every public name of the offline and replay modules exists and is listed once."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "emil.offline.budget_report",
    "emil.offline.budget_sweep",
    "emil.offline.simulate",
    "emil.offline.chars_per_token",
    "emil.offline.content",
    "emil.offline.synthetic",
    "emil.offline.trace",
    "emil.replay",
    "emil.replay.cli",
    "emil.replay.compare",
    "emil.replay.engine",
    "emil.replay.live",
    "emil.replay.recorded_llm",
    "emil.replay.report",
    "emil.replay.recorded_turns",
    "emil.replay.playback",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_unique(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert len(exported) == len(set(exported))
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"

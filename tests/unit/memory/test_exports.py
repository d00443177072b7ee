"""Every memory module's public surface is exactly its ``__all__``, and all of it exists."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "emil.memory", "emil.memory.notes", "emil.memory.store", "emil.memory.lock", "emil.memory.learn",
    "emil.memory.world", "emil.memory.render", "emil.memory.note_text", "emil.memory.pinned",
    "emil.memory.wiring", "emil.memory.cli", "emil.replay.recorded_notes",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_public(name: str) -> None:
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert not attr.startswith("_") and hasattr(mod, attr), f"{name}.{attr}"

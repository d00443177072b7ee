"""The public surface of emil.context is explicit and importable."""

from __future__ import annotations

import importlib

import pytest

import emil.context

MODULES = [
    "budget",
    "counting",
    "family",
    "history",
    "incremental",
    "ladder",
    "manager",
    "qwen_blocks",
    "rungs",
    "template",
    "tokens",
]


def test_package_exports_exist() -> None:
    for name in emil.context.__all__:
        assert hasattr(emil.context, name), name
    assert emil.context.__all__ == sorted(emil.context.__all__)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_declares_its_exports(module: str) -> None:
    mod = importlib.import_module(f"emil.context.{module}")
    assert isinstance(mod.__all__, list)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"

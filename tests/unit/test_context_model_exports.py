"""The public surfaces of emil.context and emil.model are explicit and importable."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

import emil.context
import emil.model

MODULES = [
    "context.budget",
    "context.history",
    "context.incremental",
    "context.ladder",
    "context.manager",
    "context.rungs",
    "context.untrusted",
    "model.counting",
    "model.family",
    "model.qwen_blocks",
    "model.template",
    "model.tokens",
    "model.resolve",
    "model.verify",
    "model.cached",
]


@pytest.mark.parametrize("package", [emil.context, emil.model])
def test_package_exports_exist(package: ModuleType) -> None:
    for name in package.__all__:
        assert hasattr(package, name), name
    assert package.__all__ == sorted(package.__all__)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_declares_its_exports(module: str) -> None:
    mod = importlib.import_module(f"emil.{module}")
    assert isinstance(mod.__all__, list)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name}"

"""Every serving module exports exactly what it names in __all__, each with a docstring."""

from __future__ import annotations

import importlib
import inspect

import pytest

MODULES = [
    "emil.serving.bench",
    "emil.serving.bench_report",
    "emil.serving.checkpoint",
    "emil.serving.cpu_env",
    "emil.serving.cpu_vllm",
    "emil.serving.failures",
    "emil.serving.kv",
    "emil.serving.launcher",
    "emil.serving.metrics",
    "emil.serving.profile",
    "emil.serving.safetensors_header",
    "emil.serving.tiny_model",
    "emil.serving.toolcheck",
]


@pytest.mark.parametrize("name", MODULES)
def test_exported_names_exist_with_docstrings(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__
    exported = module.__all__
    for item in exported:
        obj = getattr(module, item)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, f"{name}.{item} has no docstring"

"""Checks of setting values whose vocabulary belongs to a package above config.

Config is the bottom of the house (docs/architecture.md): it imports no other emil package.
A few settings name things another package owns: ``trim_rungs`` the trim ladder's rungs
(emil.context.rungs), ``disabled_tools`` Emil's tools (emil.world.actions), ``model_family`` the
model families (emil.model.family). Each owner registers its check here when it is imported
(:func:`register_check`), and :class:`~emil.config.settings.Settings` runs it while validating,
so a bad name is the same ``bad setting ...`` error, naming the field, its source and the fix,
as any other bad value. The command line imports every owner before it reads settings
(:data:`OWNERS`); validating a value whose owner is not loaded is a bug, said loudly
(:class:`RuntimeError`), never a value let through unchecked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["OWNERS", "Check", "register_check", "registered", "run_check"]

Check = Callable[[Any], Any]
"""A value -> the value as kept, or ValueError saying what is wrong and the fix."""

OWNERS = {
    "trim_rungs": "emil.context.rungs",
    "disabled_tools": "emil.world.actions",
    "model_family": "emil.model.family",
}
"""Each checked setting and the module that registers its check."""

_CHECKS: dict[str, Check] = {}


def register_check(field: str, check: Check) -> None:
    """``check`` validates setting ``field`` from now on (its owner calls this at import)."""
    if field not in OWNERS:
        raise ValueError(f"setting {field!r} has no registered owner; add it to emil.config.checks.OWNERS")
    _CHECKS[field] = check


def registered() -> frozenset[str]:
    """The settings whose check is registered so far."""
    return frozenset(_CHECKS)


def run_check(field: str, value: Any) -> Any:
    """``value`` checked by its owner's check."""
    check = _CHECKS.get(field)
    if check is None:
        raise RuntimeError(f"setting {field} is checked by {OWNERS[field]}, which is not imported: import it before "
                           "validating settings (emil.cli does)")
    return check(value)

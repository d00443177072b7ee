"""The ``disabled_tools`` setting checked against Emil's tools (emil.config.checks).

Config sits below the world and cannot know the tools; this module registers the check that
does, and :mod:`emil.world.actions` imports it once every tool class is registered.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from emil.config.checks import register_check
from emil.world.tool import TOOLS

__all__ = ["check_disabled_tools"]


def check_disabled_tools(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` without repeats, or ValueError naming the unknown tool (and the close one)."""
    for name in names:
        if name not in TOOLS:
            close = difflib.get_close_matches(name, list(TOOLS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown tool {name!r}{hint} Tools: {', '.join(TOOLS)}")
    if "say" in names:
        raise ValueError("say cannot be disabled: it is how Emil answers players")
    return tuple(dict.fromkeys(names))


register_check("disabled_tools", check_disabled_tools)

"""The tool that passes a turn: ``wait``, for a model that must call a tool in every answer.

With ``tool_choice`` "auto" a turn ends when the model answers without a tool call. With
"required" (the ``tool_choice`` setting: vLLM's structured outputs hold every answer to the
tools' schemas, which small models need, docs/llm.md) every answer is a call, so a turn with
nothing (more) to do needs a call that says so: ``wait`` does nothing in the world and ends the
turn (``passes_turn``: the turn engine stops after the answer that called it; the tool list
offers it only when tool calls are required). Anyone may have Emil wait: the rule table's
``any`` row (emil.trust.rules).
"""

from __future__ import annotations

from typing import ClassVar

from emil.world.tool import Outcome, Tool, ToolContext

__all__ = ["Wait"]


class Wait(Tool):
    """Do nothing more now and end your turn: call it when nothing (more) needs doing. You get the next observation when something happens."""

    tool_name: ClassVar[str] = "wait"
    bridged: ClassVar[bool] = False
    passes_turn: ClassVar[bool] = True

    async def run(self, ctx: ToolContext) -> Outcome:
        return Outcome(True, "waiting for the next observation")

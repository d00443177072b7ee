"""Emil's memory tools: ``recall`` (search everything said before) and ``remember`` (a note in its
own words). They run against the session's memory (:class:`~emil.world.tool.MemoryPort` on the
:class:`~emil.world.tool.ToolContext`), never the bot; what they do is :mod:`emil.memory.tools`.

What ``recall`` returns is players' words from the archive, quoted with who said them: data,
never an order (the rules of who may ask for what look only at the current turn's speakers);
a whisper is found only in a turn whose words are that one player's.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from emil.world.tool import PLAYER_NAME, Outcome, Tool, ToolContext

__all__ = ["Recall", "Remember"]


def _no_memory(name: str) -> Outcome:
    return Outcome(False, f"{name}: no memory in this session")


class Recall(Tool):
    """Search everything said and done before, earlier sessions too: lines, who said them, when."""

    tool_name: ClassVar[str] = "recall"
    bridged: ClassVar[bool] = False
    query: str = Field(min_length=1, max_length=200, description="words the lines hold: a name, place, item, number")
    player: str | None = Field(default=None, pattern=PLAYER_NAME, description="prefer this player's lines")

    async def run(self, ctx: ToolContext) -> Outcome:
        if ctx.memory is None:
            return _no_memory(self.tool_name)
        # Whispers come back only when the one player they were between is the turn's only speaker.
        ok, text = ctx.memory.recall(self.query, player=self.player, audience=ctx.policy.requesters)
        return Outcome(ok, text)


class Remember(Tool):
    """Keep a note in your own words, for later and across restarts."""

    tool_name: ClassVar[str] = "remember"
    bridged: ClassVar[bool] = False
    text: str = Field(min_length=1, max_length=300)
    about: str | None = Field(default=None, pattern=PLAYER_NAME, description="the player it is about")

    async def run(self, ctx: ToolContext) -> Outcome:
        if ctx.memory is None:
            return _no_memory(self.tool_name)
        ok, text = ctx.memory.remember(self.text, about=self.about)
        return Outcome(ok, text)

"""The context port over the real context manager (emil.context): history + budgeted assembly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from emil.context.history import History, Message
from emil.context.ladder import TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.exceptions import BudgetError
from emil.llm.types import LLM

__all__ = ["ContextAssembly", "ManagedContext"]


@dataclass(frozen=True)
class ContextAssembly:
    """The manager's :class:`Assembly` plus the ids of its messages (an AssemblyView)."""

    assembly: Assembly

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.assembly.messages

    @property
    def message_ids(self) -> list[int | None]:
        # Let the recorder reference known messages without hashing a 36k-token prompt.
        return [m.id for m in self.assembly.sequence]

    @property
    def predicted_tokens(self) -> int:
        return self.assembly.predicted_tokens

    @property
    def trims(self) -> Sequence[TrimRecord]:
        return self.assembly.trims

    @property
    def shared_prefix_tokens(self) -> int:
        return self.assembly.shared_prefix_tokens

    @property
    def horizon_s(self) -> float | None:
        return self.assembly.horizon_s


class ManagedContext:
    """Keeps the session's :class:`History` and assembles it with a :class:`ContextManager`.

    Trims persist: the history returned by each assembly replaces ours, so the next prompt
    extends this one (prefix-cache stability). ``llm`` is the served model's client, handed to
    the trim rungs' between-turns preparation.
    """

    def __init__(
        self,
        manager: ContextManager,
        system_prompt: str,
        tools: list[dict[str, Any]],
        *,
        history: History | None = None,
        llm: LLM | None = None,
    ) -> None:
        self.manager = manager
        self.llm = llm
        self.system_prompt = system_prompt
        self.tools = tools
        self.history = history if history is not None else History()
        self.last: Assembly | None = None

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        self.history = self.history.start_turn(message) if new_turn else self.history.append(message)
        return message

    def assemble(self, limit: int | None = None) -> ContextAssembly:
        assembly = self.manager.assemble(self.history, limit=limit)
        self.history = assembly.history
        self.last = assembly
        return ContextAssembly(assembly)

    def observe_usage(self, predicted: int, actual: int) -> None:
        self.manager.observe_usage(predicted, actual)

    async def prepare(self) -> None:
        """The trim ladder's between-turns step over the history as it stands."""
        await self.manager.prepare(self.history, llm=self.llm)

    def check_fits(self, *, notes_bound: int = 0) -> None:
        """Startup check: system prompt + tool specs + a short observation fit the budget, with
        room for the pinned notes block at its bound (``notes_bound`` tokens: it grows as Emil
        learns, up to that)."""
        probe = History().start_turn(Message.observation("[events]\n- alex says: hello"))
        notes = max(notes_bound, self.manager.count(replace(probe, notes=self.history.notes)) - self.manager.count(probe))
        pinned = self.manager.count(probe) + notes
        budget = self.manager.effective_budget()
        if pinned > budget:
            raise BudgetError(
                f"prompt budget {budget} (window {self.manager.budget.window} - output reserve "
                f"{self.manager.budget.output_reserve} - margin {self.manager.budget.margin}) < pinned {pinned} "
                f"(system prompt + tool specs + one observation{f' + memory notes {notes}' if notes else ''}); "
                "raise the window or lower output_reserve" + (" or memory_tokens" if notes else "")
            )

"""The context port over the real context manager (emil.context): history + budgeted assembly."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emil.agent.ports import NewMessage
from emil.context.history import History, Message
from emil.context.ladder import TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.exceptions import BudgetError

__all__ = ["ContextAssembly", "ManagedContext"]


@dataclass(frozen=True)
class ContextAssembly:
    """The manager's :class:`Assembly` plus the ids of its messages (an AssemblyView)."""

    assembly: Assembly
    message_ids: list[int | None]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.assembly.messages

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
    extends this one (prefix-cache stability).
    """

    def __init__(
        self,
        manager: ContextManager,
        system_prompt: str,
        tools: list[dict[str, Any]],
        *,
        history: History | None = None,
    ) -> None:
        self.manager = manager
        self.system_prompt = system_prompt
        self.tools = tools
        self.history = history or History()
        self.last: Assembly | None = None

    def add(self, message: NewMessage, *, new_turn: bool = False) -> Message:
        msg = Message(
            role=message.role,
            content=message.content,
            kind=message.kind,
            tool_calls=tuple({k: str(v) for k, v in c.items()} for c in message.tool_calls),
            tool_call_id=message.tool_call_id,
            name=message.name,
            reasoning=message.reasoning,
            event_time=message.event_time,
            status=message.status,
        )
        self.history = self.history.start_turn(msg) if new_turn else self.history.append(msg)
        return msg

    def assemble(self, limit: int | None = None) -> ContextAssembly:
        assembly = self.manager.assemble(self.history, limit=limit)
        self.history = assembly.history
        self.last = assembly
        # The manager renders [system, notes?, memory note?, *history]; their ids let the
        # recorder reference known messages without hashing a 36k-token prompt every step.
        head = self.manager.head(assembly.history.memory)
        ids: list[int | None] = [m.id for m in (*head, *assembly.history.messages())]
        if len(ids) != len(assembly.messages):
            ids = [None] * len(assembly.messages)
        return ContextAssembly(assembly, ids)

    def observe_usage(self, predicted: int, actual: int) -> None:
        self.manager.observe_usage(predicted, actual)

    def check_fits(self) -> None:
        """Startup check: system prompt + tool specs + a short observation fit the budget."""
        probe = History().start_turn(Message.observation("[events]\n- alex says: hello"))
        pinned = self.manager.count(probe)
        budget = self.manager.effective_budget()
        if pinned > budget:
            raise BudgetError(
                f"prompt budget {budget} (window {self.manager.budget.window} - output reserve "
                f"{self.manager.budget.output_reserve} - margin {self.manager.budget.margin}) < pinned {pinned} "
                "(system prompt + tool specs + one observation); raise the window or lower output_reserve"
            )

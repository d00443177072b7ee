"""The context port over the real context manager (emil.context): history + budgeted assembly.

Every message enters history here, so this is the one choke point where untrusted text (chat,
names, signs, books, items, tool results that echo them, the model's echoes of them) is
neutralised against the served vocabulary's special tokens (emil.context.untrusted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from emil.context.history import History, Message
from emil.context.ladder import TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.context.untrusted import Neutraliser
from emil.exceptions import BudgetError, ContextOverflowError
from emil.llm.types import LLM
from emil.model.family import FAMILIES
from emil.model.tokens import TokenCounter

__all__ = ["ContextAssembly", "ManagedContext", "served_specials"]


def served_specials(counter: TokenCounter) -> frozenset[str]:
    """The special tokens untrusted text must not spell: the served vocabulary's (the family's
    tokenizer, which counts every prompt); for a model only the server can count (its
    vocabulary unknown here), every shipped family's, which covers the ChatML and Qwen control
    tokens most templates use."""
    specials = counter.special_tokens
    if specials:
        return specials
    return frozenset().union(*(family.special_tokens for family in FAMILIES))


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
        self.neutralise = Neutraliser(served_specials(manager.counter))
        """Applied to every text of every message added (the served vocabulary's specials)."""

    def _safe(self, text: str | None) -> str | None:
        return None if text is None else self.neutralise(text)

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        safe = self.neutralise
        # every text the model will read, neutralised; the message keeps its id
        stored = replace(
            message,
            content=self._safe(message.content),
            # tool-call ids are the server's own; names and arguments are model text that may
            # echo a player (arguments are JSON the server decodes before rendering)
            tool_calls=tuple(
                {k: v if k == "id" else safe.json_text(v) if k == "arguments" else safe(v) for k, v in c.items()}
                for c in message.tool_calls
            ),
            name=self._safe(message.name),
            reasoning=self._safe(message.reasoning),
            status=self._safe(message.status),
        )
        self.history = self.history.start_turn(stored) if new_turn else self.history.append(stored)
        return stored

    def history_since(self) -> float | None:
        """Game time of the oldest event the history holds verbatim (None: no history yet)."""
        return self.history.oldest_event_time()

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` in the served vocabulary (sizing an observation before it is added)."""
        return self.manager.counter.count(self.neutralise(text))

    @property
    def prompt_budget(self) -> int:
        """The prompt budget now (calibration may have widened the margin)."""
        return self.manager.effective_budget()

    def assemble(self, limit: int | None = None) -> ContextAssembly:
        try:
            assembly = self.manager.assemble(self.history, limit=limit)
        except BudgetError as e:
            # At start the pinned prompt was checked to fit (check_fits); now it is this turn's
            # own opening that does not: the turn fails, the session goes on.
            raise ContextOverflowError(f"this turn cannot fit the prompt budget: {e}") from e
        self.history = assembly.history
        self.last = assembly
        return ContextAssembly(assembly)

    def observe_usage(self, predicted: int, actual: int) -> None:
        self.manager.observe_usage(predicted, actual)

    async def prepare(self) -> None:
        """The trim ladder's between-turns step over the history as it stands."""
        await self.manager.prepare(self.history, llm=self.llm)

    def check_fits(self, *, notes_bound: int = 0, recall_bound: int = 0) -> None:
        """Startup check: system prompt + tool specs + a short observation fit the budget, with
        room for the pinned notes block at its bound (``notes_bound`` tokens: it grows as Emil
        learns, up to that) and the lines recalled into an observation at theirs
        (``recall_bound``)."""
        probe = History().start_turn(Message.observation("[events]\n- alex says: hello"))
        notes = max(notes_bound, self.manager.count(replace(probe, notes=self.history.notes)) - self.manager.count(probe))
        pinned = self.manager.count(probe) + notes + recall_bound
        budget = self.manager.effective_budget()
        if pinned > budget:
            extra = (f" + memory notes {notes}" if notes else "") + (f" + recalled lines {recall_bound}" if recall_bound else "")
            lower = (" or memory_tokens" if notes else "") + (" or recall_tokens" if recall_bound else "")
            raise BudgetError(
                f"prompt budget {budget} (window {self.manager.budget.window} - output reserve "
                f"{self.manager.budget.output_reserve} - margin {self.manager.budget.margin}) < pinned {pinned} "
                f"(system prompt + tool specs + one observation{extra}); "
                "raise the window or lower output_reserve" + lower
            )

"""The context port over the real context manager (emil.context): history + budgeted assembly.

Every message enters history here, so this is the one choke point where untrusted text (chat,
names, signs, books, items, tool results that echo them, the model's echoes of them) is
neutralised against the served vocabulary's special tokens (emil.context.untrusted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from emil.config import Settings
from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.ladder import LadderConfig, TrimRecord
from emil.context.manager import Assembly, ContextManager
from emil.context.rungs import NotesSource, RefreshNotes, Summarise, SummarySource
from emil.exceptions import BudgetError, ContextOverflowError
from emil.llm.types import LLM
from emil.model.family import ModelFamily

__all__ = ["ContextAssembly", "ManagedContext", "session_context"]


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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.manager = manager
        self.llm = llm
        self.clock = clock
        """Wall time at each assembly (the memory horizon; replay gives the recorded times)."""
        self.system_prompt = system_prompt
        self.tools = tools
        self.history = history if history is not None else History()
        self.last: Assembly | None = None
        self.neutralise = manager.neutraliser
        """The served vocabulary's special tokens, broken up (the manager's)."""

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        # every text the model will read, neutralised (the manager's one point); the id stays
        stored = self.manager.admit(message)
        self.history = self.history.start_turn(stored) if new_turn else self.history.append(stored)
        return self.history.turns[-1][-1]  # as held: a status shown as its change (emil.context.status)

    def history_since(self) -> float | None:
        """Game time of the oldest event the history holds verbatim (None: no history yet)."""
        return self.history.oldest_event_time()

    def notes_text(self) -> str | None:
        """The pinned notes block the prompt holds now (None: no block)."""
        return self.history.notes.content if self.history.notes is not None else None

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` in the served vocabulary (sizing an observation before it is added)."""
        return self.manager.counter.count(self.neutralise(text))

    @property
    def prompt_budget(self) -> int:
        """The prompt budget now (calibration may have widened the margin)."""
        return self.manager.effective_budget()

    def assemble(self, limit: int | None = None) -> ContextAssembly:
        try:
            assembly = self.manager.assemble(self.history, limit=limit, now=self.clock())
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

    def check_fits(self, *, notes_bound: int = 0, recall_bound: int = 0) -> str | None:
        """Startup check: system prompt + tool specs + a short observation fit the budget, with
        room for the pinned notes block at its bound (``notes_bound`` tokens: it grows as Emil
        learns, up to that) and the lines recalled into an observation at theirs
        (``recall_bound``). A BudgetError when they do not; when they fit but leave the
        conversation less than two trims' worth of room (a trim frees ``1 - low_water`` of the
        budget), the warning to give: the prompt will trim every few requests, and each trim
        prefills everything after the tool specs again (measured at 8,000 tokens: one request
        in twenty-two, docs/memory.md)."""
        probe = History().start_turn(Message.observation("[events]\n- alex says: hello"))
        notes = max(notes_bound, self.manager.count(replace(probe, notes=self.history.notes)) - self.manager.count(probe))
        pinned = self.manager.count(probe) + notes + recall_bound
        budget = self.manager.effective_budget()
        if pinned > budget:
            extra = (f" + memory notes {notes}" if notes else "") + (f" + recalled lines {recall_bound}" if recall_bound else "")
            lower = (" or memory_tokens" if notes else "") + (" or recall_tokens" if recall_bound else "")
            raise BudgetError(
                f"{self.manager.budget.explain(self.manager.budget.window - self.manager.budget.output_reserve - budget)}"
                f" < pinned {pinned} "
                f"(system prompt + tool specs + one observation{extra}); "
                "raise the window or lower output_reserve" + lower
            )
        room, freed = budget - pinned, budget - int(budget * self.manager.budget.low_water)
        if room >= 2 * freed:
            return None
        extra = (f" + memory notes {notes}" if notes else "") + (f" + recalled lines {recall_bound}" if recall_bound else "")
        lower = (", memory_tokens" if notes else "") + (" or recall_tokens" if recall_bound else "")
        return (f"prompt budget {budget}: system prompt + tool specs + one observation{extra} take {pinned}, "
                f"leaving {room} tokens for the conversation, less than two trims' worth (a trim frees {freed}, "
                f"1 - low_water of the budget); the prompt will trim every few requests, each trim prefilling "
                f"everything after the tool specs again; raise the window or lower output_reserve{lower}")


def session_context(
    s: Settings,
    *,
    family: ModelFamily,
    budget: Budget,
    system_prompt: str,
    tools: list[dict[str, Any]],
    history: History | None = None,
    llm: LLM | None = None,
    notes: NotesSource | None = None,
    summaries: SummarySource | None = None,
    clock: Callable[[], float] = time.time,
) -> ManagedContext:
    """A session's context as the settings shape it, live and in replay alike: the family's
    counter and template, the thinking kwargs the family reads, the ``trim_rungs`` ladder with
    the session's notes (``refresh_notes``) and summariser (``summarise``), the notes block
    from the first request on."""
    manager = ContextManager(
        family.tokenizer(), budget, system_prompt, tools, s.enable_thinking, family=family,
        preserve_thinking=family.sends_preserve_thinking(enable_thinking=s.enable_thinking,
                                                         preserve_thinking=s.preserve_thinking),
        ladder=LadderConfig(rungs=s.trim_rungs), rungs=[RefreshNotes(notes), Summarise(summaries)],
    )
    start = history if history is not None else History()
    if notes is not None and (text := notes.text()):
        start = replace(start, notes=Message.memory(text))
    return ManagedContext(manager, system_prompt, tools, history=start, llm=llm, clock=clock)

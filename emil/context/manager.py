"""The context manager: history in, an exact-size prompt out, trimmed only when it must be.

``assemble`` renders [system + tools] + [pinned notes] + [memory note] + history. The count is exact (the
model's template and tokenizer, cached per message). While the prompt fits the budget the
history is returned unchanged, so each prompt extends the previous one and vLLM's prefix cache
serves everything but the new tail. When it does not fit, the trim ladder runs down to the
low-water mark (a batch, so the next trims are many turns away) and the trimmed history is
handed back: the caller keeps it, so the next prompt extends this one.

The pinned notes (what Emil remembers across restarts, :mod:`emil.memory`) come from a
:class:`NotesSource` rendered at start and again only when the ladder is about to trim: between
trims the block is byte-identical, so it never breaks the prefix on its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Any, Protocol

from emil.context.budget import Budget, Calibration, CalibrationReport
from emil.context.history import History, Message, Turn
from emil.context.incremental import BlockLayout, IncrementalCounter
from emil.context.ladder import (
    LadderConfig,
    LadderState,
    Measure,
    Measurer,
    TrimRecord,
    run_ladder,
)
from emil.context.template import ChatTemplate
from emil.context.tokens import TokenCounter, get_token_counter
from emil.context.turn_cache import PerTurn
from emil.exceptions import BudgetError

__all__ = ["Assembly", "ContextManager", "NotesSource"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assembly:
    """One assembled prompt and everything known about its size."""

    history: History
    """The history the caller must keep from now on (trims persist)."""
    wire: Callable[[], list[dict[str, Any]]] = field(repr=False, compare=False)
    """Builds :attr:`messages` (read that instead)."""
    predicted_tokens: int
    """Exact prompt size by the local template + tokenizer (generation prompt included)."""
    trims: list[TrimRecord]
    shared_prefix_tokens: int
    """Leading tokens identical to the previous assembly's prompt (block-granular lower bound)."""
    horizon_s: float | None
    """Age of the oldest game event still held verbatim."""
    prompt_budget: int
    """The budget this prompt was fitted to (limit and calibrated margin applied)."""
    extends_previous: bool = False
    """True when the previous prompt's messages are an unchanged prefix of this one's."""
    layout: BlockLayout | None = field(default=None, repr=False, compare=False)
    """Per-block sizes as measured (see :attr:`block_tokens`)."""

    @cached_property
    def block_tokens(self) -> list[int]:
        """Tokens per message of :attr:`messages` (empty when counted by whole renders)."""
        return [] if self.layout is None else self.layout.counts()

    @cached_property
    def messages(self) -> list[dict[str, Any]]:
        """OpenAI-format messages: system, memory note (if any), then the history.

        Built on first read: the agent loop reads it at once, while a budget sweep, which
        only wants sizes, never pays for thousands of wire dicts per simulated hour.
        """
        return self.wire()


class NotesSource(Protocol):
    """The pinned notes block (emil.memory.PinnedNotes): re-rendered only when a trim is due."""

    def render(self) -> str | None:
        """The block as it reads now (None = no block); bounded in tokens by the source."""
        ...


class ContextManager:
    """Fits a history into the served window, exactly, with prefix-cache-friendly trims.

    ``counter`` is a TokenCounter or a spec for :func:`get_token_counter` (a model name such as
    the served model id). ``preserve_thinking`` must match what the server renders with
    (``chat_template_kwargs``); True keeps every prompt append-only between trims.

    ``incremental``: an exact counter to share with other managers of the same counter,
    template and thinking settings (a budget sweep runs one session through many managers;
    its caches are keyed by content and identity, so sharing changes nothing but speed).
    """

    def __init__(
        self,
        counter: TokenCounter | str,
        budget: Budget,
        system_prompt: str,
        tools: list[dict[str, Any]] | None = None,
        enable_thinking: bool = False,
        *,
        template: ChatTemplate | None = None,
        preserve_thinking: bool = False,
        ladder: LadderConfig | None = None,
        calibration: Calibration | None = None,
        incremental: IncrementalCounter | None = None,
        notes: NotesSource | None = None,
    ) -> None:
        self.counter = get_token_counter(counter) if isinstance(counter, str) else counter
        self.budget = budget
        self.system_prompt = system_prompt
        self.system = Message.system(system_prompt)
        self.tools = list(tools) if tools else None
        self.enable_thinking = enable_thinking
        if incremental is None:
            incremental = IncrementalCounter(
                self.counter,
                template,
                enable_thinking=enable_thinking,
                preserve_thinking=preserve_thinking,
            )
        elif (
            incremental.counter is not self.counter
            or incremental.enable_thinking != enable_thinking
            or incremental.preserve_thinking != preserve_thinking
            or (template is not None and incremental.template.source != template.source)
        ):
            raise ValueError("a shared IncrementalCounter must count with this manager's settings")
        self.incremental = incremental
        self.ladder = ladder or LadderConfig(tokens_of=self.counter.count)
        self.calibration = calibration or Calibration(base_margin=budget.margin)
        self._previous_layout: BlockLayout | None = None
        self._wires: dict[int, tuple[Turn, list[dict[str, Any]]]] = {}
        self._wires_per_turn = PerTurn(self._turn_wires)
        self._notes_source = notes
        self.notes: Message | None = None
        """The pinned notes message, right after the system prompt (None: no notes)."""
        self._refresh_notes()

    def _refresh_notes(self) -> bool:
        """Re-render the pinned notes; True when the block changed."""
        if self._notes_source is None:
            return False
        text = self._notes_source.render()
        if (text or None) == (self.notes.content if self.notes is not None else None):
            return False
        self.notes = Message.memory(text) if text else None
        return True

    def head(self, memory: Message | None) -> list[Message]:
        """What precedes the turns: the system prompt, the pinned notes, the memory note."""
        head = [self.system]
        if self.notes is not None:
            head.append(self.notes)
        if memory is not None:
            head.append(memory)
        return head

    # -- sizes ------------------------------------------------------------------------------------

    def _sequence(
        self, turns: Sequence[Sequence[Message]], memory: Message | None
    ) -> list[Message]:
        return self.head(memory) + [m for turn in turns for m in turn]

    def _turn_wires(self, turn: Turn) -> list[dict[str, Any]]:
        entry = self._wires.get(id(turn))
        if entry is None or entry[0] is not turn:
            entry = (turn, [m.to_openai() for m in turn])
            if len(self._wires) > 50_000:  # a bound for very long sessions
                self._wires.clear()
            self._wires[id(turn)] = entry  # holds the turn, so the id stays unique
        return entry[1]

    def _messages(self, history: History) -> list[dict[str, Any]]:
        """The wire messages; shallow copies, as the wire dicts are cached on the messages and
        must not be edited. Old turns' wire lists are cached by turn identity."""
        wires = chain((m.to_openai() for m in self.head(history.memory)), *self._wires_per_turn.values(history.turns))
        return list(map(dict.copy, wires))

    def count(self, history: History) -> int:
        """Exact prompt tokens of this history as this manager would send it."""
        return self._measure(LadderState(history.turns, history.memory))

    def _measure_all(self, history: History) -> tuple[int, BlockLayout]:
        return self.incremental.measure_layout(self.head(history.memory), history.turns, self.tools)

    def _whole_keys(self, history: History) -> BlockLayout:
        sequence = self._sequence(history.turns, history.memory)
        return BlockLayout.flat([0] * len(sequence), [("whole", m.fingerprint) for m in sequence])

    def _measure(self, state: LadderState) -> int:
        return self.incremental.count_turns(self.head(state.memory), state.turns, self.tools)

    def _ladder_sizes(self) -> Measure | Measurer:
        """What the ladder measures its candidates with (the reference manager in the tests
        overrides this with the plain full count)."""
        return _Sizes(self)

    def effective_budget(self, limit: int | None = None) -> int:
        margin = max(self.budget.margin, self.calibration.margin)
        budget = self.budget.window - self.budget.output_reserve - margin
        return budget if limit is None else min(budget, limit)

    def _pinned(self, opening: Message) -> dict[str, int]:
        inc = self.incremental
        system = inc.head_tokens(self.system, None)
        with_tools = inc.head_tokens(self.system, self.tools)
        pinned = {
            "system": system,
            "tools": with_tools - system,
            "current turn opening": inc.message_tokens(opening),
            "generation prompt": inc.generation_tokens(),
        }
        if self.notes is not None:
            pinned["memory notes"] = inc.message_tokens(self.notes)
        return pinned

    def _budget_error(
        self, budget: int, limit: int | None, pinned: dict[str, int], got: int | None
    ) -> BudgetError:
        margin = max(self.budget.margin, self.calibration.margin)
        parts = " + ".join(f"{name} {value}" for name, value in pinned.items())
        limit_text = f", forced limit {limit}" if limit is not None else ""
        after = f"; after every trim rung the prompt is still {got}" if got is not None else ""
        return BudgetError(
            f"prompt budget {budget} (window {self.budget.window} - output reserve "
            f"{self.budget.output_reserve} - margin {margin}{limit_text}) < pinned "
            f"{sum(pinned.values())} ({parts}){after}"
        )

    # -- the one operation ------------------------------------------------------------------------

    def assemble(
        self, history: History, *, limit: int | None = None, now: float | None = None
    ) -> Assembly:
        """The prompt for this history, trimmed to fit; see :class:`Assembly`."""
        if not history.turns:
            raise ValueError("cannot assemble a prompt from an empty history")
        now = time.time() if now is None else now
        budget = self.effective_budget(limit)
        pinned = self._pinned(history.turns[-1][0])
        if sum(pinned.values()) > budget:
            raise self._budget_error(budget, limit, pinned, None)
        tokens, layout = self._measure_all(history)
        trims: list[TrimRecord] = []
        if tokens > budget and self._refresh_notes():
            # A trim is due: the one moment the pinned notes may change (prefix-stable).
            pinned = self._pinned(history.turns[-1][0])
            if sum(pinned.values()) > budget:
                raise self._budget_error(budget, limit, pinned, None)
            tokens, layout = self._measure_all(history)
        if tokens > budget:
            target = int(budget * self.budget.low_water)
            history, trims, tokens = run_ladder(
                history, target=target, measure=self._ladder_sizes(), config=self.ladder, now=now,
                ceiling=budget,
            )
            if tokens > budget:
                raise self._budget_error(budget, limit, pinned, tokens)
            for record in trims:
                _log.info(
                    "trim %s: %d messages, %d tokens freed (%d -> %d), horizon %s s",
                    record.rung,
                    record.messages_touched,
                    record.tokens_freed,
                    record.tokens_before,
                    record.tokens_after,
                    record.horizon_after_s,
                )
            tokens, layout = self._measure_all(history)
        if not layout.tail_keys and not layout.old:
            # Whole-render mode: no block sizes, so no prefix figure either.
            layout = self._whole_keys(history)
        shared, extends = self._shared_prefix(layout)
        self._previous_layout = layout
        return Assembly(
            history=history,
            wire=lambda: self._messages(history),
            predicted_tokens=tokens,
            trims=trims,
            shared_prefix_tokens=shared,
            horizon_s=history.horizon(now),
            prompt_budget=budget,
            extends_previous=extends,
            layout=layout,
        )

    def _shared_prefix(self, layout: BlockLayout) -> tuple[int, bool]:
        return layout.shared_prefix(self._previous_layout)

    def observe_usage(self, predicted: int, actual: int) -> None:
        """Feed the server's count for a prompt we predicted; widens the margin on disagreement."""
        self.calibration.observe(predicted, actual)
        if predicted != actual:
            _log.warning(
                "prompt count mismatch: predicted %d, server %d (margin now %d)",
                predicted,
                actual,
                self.calibration.margin,
            )

    def calibration_report(self) -> CalibrationReport:
        return self.calibration.report()


class _Sizes:
    """The manager's :class:`Measurer`: one-turn ladder steps sized from cached turn totals
    when the incremental counter knows them, a full count otherwise (same numbers either way)."""

    def __init__(self, manager: ContextManager) -> None:
        self._manager = manager
        self._inc = manager.incremental

    def measure(self, state: LadderState) -> int:
        return self._manager._measure(state)

    def swap(
        self, state: LadderState, tokens: int, index: int, turn: Turn
    ) -> tuple[LadderState, int]:
        turns, delta = self._inc.swap_turn(state.turns, index, turn)
        candidate = LadderState(turns, state.memory)
        if delta is None:
            return candidate, self.measure(candidate)
        return candidate, tokens + delta

    def fold(
        self, state: LadderState, tokens: int, memory: Message | None
    ) -> tuple[LadderState, int]:
        turns, delta = self._inc.drop_oldest(state.turns)
        candidate = LadderState(turns, memory)
        if delta is None:
            return candidate, self.measure(candidate)
        # The memory note is a user block of its own after the system turn.
        return candidate, tokens + delta + self._note(memory) - self._note(state.memory)

    def _note(self, memory: Message | None) -> int:
        return 0 if memory is None else self._inc.message_tokens(memory)

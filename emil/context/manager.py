"""The context manager: history in, an exact-size prompt out, trimmed only when it must be.

``assemble`` renders [system + tools] + [pinned notes] + [memory note] + history. The count is exact (the
model's template and tokenizer, cached per message). While the prompt fits the budget the
history is returned unchanged, so each prompt extends the previous one and vLLM's prefix cache
serves everything but the new tail. When it does not fit, the trim ladder runs down to the
low-water mark (a batch, so the next trims are many turns away) and the trimmed history is
handed back: the caller keeps it, so the next prompt extends this one. ``assemble`` is
synchronous and asks nothing of the outside world; ``prepare`` is the ladder's between-turns
step (see :mod:`emil.context.ladder`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, count
from operator import ne
from typing import Any

from emil.context.budget import Budget, Calibration, CalibrationReport
from emil.context.history import History, Message
from emil.context.incremental import BlockKey, IncrementalCounter
from emil.context.ladder import LadderConfig, Preparation, Rung, TrimRecord, run_ladder
from emil.context.rungs import build_rungs
from emil.context.untrusted import Neutraliser, served_specials
from emil.exceptions import BudgetError
from emil.llm.types import LLM
from emil.model.family import ModelFamily, family_for_model
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate
from emil.model.tokens import TokenCounter

__all__ = ["Assembly", "ContextManager"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Assembly:
    """One assembled prompt and everything known about its size."""

    history: History
    """The history the caller must keep from now on (trims persist)."""
    sequence: list[Message] = field(repr=False, compare=False)
    """The prompt's messages: system, notes and memory note (if any), then the history."""
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
    block_tokens: list[int] = field(default_factory=list, repr=False)
    """Tokens per message of :attr:`messages` (empty when counted by whole renders)."""

    @cached_property
    def messages(self) -> list[dict[str, Any]]:
        """OpenAI-format messages (shallow copies: the wire dicts are cached on the messages).

        Built on first read: a budget sweep, which only wants sizes, never pays for them.
        """
        return [dict(m.to_openai()) for m in self.sequence]


class ContextManager:
    """Fits a history into the served window, exactly, with prefix-cache-friendly trims.

    ``counter`` is a TokenCounter or a spec for :func:`get_token_counter` (a model name such as
    the served model id, whose family then also gives the template). ``family`` is the resolved
    :class:`ModelFamily` (template or server counting, reasoning placement, fast path).
    ``preserve_thinking`` must match what the server renders with (``chat_template_kwargs``);
    True keeps every prompt append-only between trims. ``ladder`` names the trim rungs in order
    (built once, so a rung keeps its state for the session); ``rungs`` are rung objects the
    caller built with its session's parts (its notes, a summariser), each standing in for the
    registered rung of its name.

    ``incremental``: an exact counter to share with other managers of the same counter,
    template and thinking settings (its cache is keyed by content, so sharing changes nothing
    but speed).
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
        family: ModelFamily | None = None,
        rungs: Iterable[Rung] = (),
    ) -> None:
        if family is None and template is None and isinstance(counter, str):
            family = family_for_model(counter)
        self.counter = get_token_counter(counter) if isinstance(counter, str) else counter
        self.budget = budget
        self.system_prompt = system_prompt
        self.system = Message.system(system_prompt)
        self.tools = list(tools) if tools else None
        self.enable_thinking = enable_thinking
        if incremental is None:
            incremental = IncrementalCounter(
                self.counter, template, enable_thinking=enable_thinking,
                preserve_thinking=preserve_thinking, family=family,
            )
        elif (
            incremental.counter is not self.counter
            or incremental.enable_thinking != enable_thinking
            or incremental.preserve_thinking != preserve_thinking
            or (
                template is not None
                and (incremental.template is None or incremental.template.source != template.source)
            )
        ):
            raise ValueError("a shared IncrementalCounter must count with this manager's settings")
        self.incremental = incremental
        self.ladder = ladder or LadderConfig()
        self.rungs = build_rungs(self.ladder, rungs)
        self.calibration = calibration or Calibration(base_margin=budget.margin)
        self._previous_keys: list[BlockKey] = []
        self.neutraliser = Neutraliser(served_specials(self.counter))
        """The served vocabulary's special tokens, broken up in untrusted text (:meth:`admit`)."""
        self._admitted: dict[int, Message] = {}

    # -- sizes ------------------------------------------------------------------------------------

    def admit(self, message: Message) -> Message:
        """The one point untrusted text passes before it enters a prompt (emil.context.untrusted):
        every text of ``message`` neutralised against the served vocabulary's special tokens
        (the same message when nothing changes). History messages are admitted as they enter
        history (emil.agent.context_port); the notes block and the memory note (summaries,
        digests) when they are rendered (:meth:`sequence`)."""
        return self.neutraliser.message(message)

    def _admit_head(self, message: Message | None) -> Message | None:
        if message is None:
            return None
        admitted = self._admitted.get(message.id)
        if admitted is None:
            if len(self._admitted) > 256:  # a head block changes only at trims: a few per session
                self._admitted.clear()
            admitted = self._admitted[message.id] = self.admit(message)
        return admitted

    def sequence(self, history: History) -> list[Message]:
        """The prompt's messages: system, pinned notes and memory note (if any, admitted), then
        the history."""
        head = [m for m in (self.system, self._admit_head(history.notes), self._admit_head(history.memory)) if m is not None]
        return head + [m for turn in history.turns for m in turn]

    def count(self, history: History) -> int:
        """Exact prompt tokens of this history as this manager would send it."""
        return self.incremental.count(self.sequence(history), self.tools)

    def effective_budget(self, limit: int | None = None) -> int:
        margin = max(self.budget.margin, self.calibration.margin)
        budget = self.budget.window - self.budget.output_reserve - margin
        return budget if limit is None else min(budget, limit)

    def _pinned(self, history: History) -> dict[str, int]:
        inc = self.incremental
        system = inc.head_tokens(self.system, None)
        with_tools = inc.head_tokens(self.system, self.tools)
        pinned = {"system": system, "tools": with_tools - system}
        if history.notes is not None:
            pinned["memory notes"] = inc.message_tokens(history.notes)
        pinned["current turn opening"] = inc.message_tokens(history.turns[-1][0])
        pinned["generation prompt"] = inc.generation_tokens()
        return pinned

    def _budget_error(self, budget: int, limit: int | None, pinned: dict[str, int], got: int | None) -> BudgetError:
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

    def assemble(self, history: History, *, limit: int | None = None, now: float | None = None) -> Assembly:
        """The prompt for this history, trimmed to fit; see :class:`Assembly`."""
        if not history.turns:
            raise ValueError("cannot assemble a prompt from an empty history")
        now = time.time() if now is None else now
        budget = self.effective_budget(limit)
        pinned = self._pinned(history)
        if sum(pinned.values()) > budget:
            raise self._budget_error(budget, limit, pinned, None)
        sequence = self.sequence(history)
        tokens, counts, keys = self.incremental.measure(sequence, self.tools)
        trims: list[TrimRecord] = []
        if tokens > budget:
            history, trims, tokens = run_ladder(
                history, self.rungs, self.count, target=int(budget * self.budget.low_water),
                ceiling=budget, tokens=tokens, now=now, config=self.ladder,
                tokens_of=self.counter.count,
            )
            if tokens > budget:
                raise self._budget_error(budget, limit, self._pinned(history), tokens)
            for r in trims:
                _log.info("trim %s: %d messages, %d tokens freed (%d -> %d), horizon %s s", r.rung,
                          r.messages_touched, r.tokens_freed, r.tokens_before, r.tokens_after, r.horizon_after_s)
            sequence = self.sequence(history)
            tokens, counts, keys = self.incremental.measure(sequence, self.tools)
        if not keys:  # whole-render mode: no block sizes, so no prefix figure either
            keys = [("whole", m.fingerprint) for m in sequence]
        shared, extends = _shared_prefix(self._previous_keys, keys, counts)
        self._previous_keys = keys
        return Assembly(
            history=history, sequence=sequence, predicted_tokens=tokens, trims=trims,
            shared_prefix_tokens=shared, horizon_s=history.horizon(now), prompt_budget=budget,
            extends_previous=extends, block_tokens=counts,
        )

    async def prepare(self, history: History, *, llm: LLM | None = None) -> None:
        """Between turns: every rung's :meth:`~emil.context.ladder.Rung.prepare` (e.g. a summary
        written by the model for the next trim). Never called from :meth:`assemble`."""
        rungs = [r for r in self.rungs if type(r).prepare is not Rung.prepare]
        if not history.turns or not rungs:  # nothing to prepare: not even a count
            return
        budget = self.effective_budget()
        preparation = Preparation(
            history=history, budget=budget, target=int(budget * self.budget.low_water),
            config=self.ladder, measure=self.count, tokens_of=self.counter.count, llm=llm,
        )
        for rung in rungs:
            await rung.prepare(preparation)

    def observe_usage(self, predicted: int, actual: int) -> None:
        """Feed the server's count for a prompt we predicted; widens the margin on disagreement."""
        self.calibration.observe(predicted, actual)
        if predicted != actual:
            _log.warning("prompt count mismatch: predicted %d, server %d (margin now %d)",
                         predicted, actual, self.calibration.margin)

    def calibration_report(self) -> CalibrationReport:
        return self.calibration.report()


def _shared_prefix(previous: list[BlockKey], keys: list[BlockKey], counts: list[int]) -> tuple[int, bool]:
    """Leading tokens of ``keys`` identical to ``previous`` (block-granular), and whether all of
    ``previous`` is a prefix (the request only appended)."""
    n = len(previous)
    # Mostly the very same key strings, so the list comparison runs at C speed.
    if n and n <= len(keys) and keys[:n] == previous:
        return sum(counts[:n]), True
    same = next(compress(count(), map(ne, previous, keys)), min(n, len(keys)))
    return sum(counts[:same]), False

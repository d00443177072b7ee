"""Fast exact prompt counts: cached per-message block counts, summed.

ChatML templates are additive across messages: every message renders to a block delimited by
special tokens, and a tokenizer never merges text across a special token, so the prompt's count
is the sum of its blocks. Messages are immutable, so each block is counted once and cached by
the message's fingerprint.

Blocks are measured with the template itself, by difference over tiny probe conversations, so
the counts stay exact for whatever the template renders. Where a block depends on its position
the position is part of the key:

- assistant messages render their ``<think>`` block only where the family's template shows it
  (after the last real user query, or always with ``preserve_thinking``): two variants, "kept"
  and "dropped";
- consecutive tool results share one user turn: each result is counted as a middle block and
  each run of results adds the constant cost of opening and closing that turn;
- the system message is counted together with the tools block the template puts in it;
- the generation prompt is a constant for the thinking setting.

On first use (and whenever :meth:`verify` is called) the sum is compared with a whole render;
if they ever differ the counter logs a warning and renders whole prompts from then on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from itertools import chain, compress, count, islice
from operator import attrgetter, is_, is_not, ne
from typing import Any

from emil.context.family import ModelFamily, ThinkRule, generic_family
from emil.context.history import Message
from emil.context.template import ChatTemplate, TemplateError, prepare_messages, prepare_tools
from emil.context.tokens import TokenCounter
from emil.context.turn_cache import PerTurn

__all__ = ["BlockKey", "BlockLayout", "IncrementalCounter", "MessageLike"]

_log = logging.getLogger(__name__)

MessageLike = Message | dict[str, Any]
BlockKey = tuple[str, str]
"""(variant, fingerprint) of one rendered block."""

_PROBE_USER: dict[str, Any] = {"role": "user", "content": "probe"}
_PROBE_TOOL: dict[str, Any] = {"role": "tool", "tool_call_id": "probe", "content": "probe"}


def _fingerprint(message: MessageLike) -> str:
    if isinstance(message, Message):
        return message.fingerprint
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def _wire(message: MessageLike) -> dict[str, Any]:
    return message.to_openai() if isinstance(message, Message) else message


def _is_query(rule: Callable[[Any], bool] | None, message: MessageLike) -> bool:
    """A real user query by the family's rule (any user message when it has none)."""
    if isinstance(message, Message):
        if message.role != "user":
            return False
        return rule is None or rule(message.text)
    if message.get("role") != "user":
        return False
    return rule is None or rule(message.get("content"))


class _TurnInfo:
    """What is cached about one turn (by identity): whether it holds a real user query, whether
    it opens with a tool result, and (filled on demand) its block counts, keys and total as it
    renders before the last query."""

    __slots__ = ("bad", "counts", "keys", "query", "total", "turn")

    def __init__(self, turn: tuple[Message, ...], rule: Callable[[Any], bool] | None) -> None:
        self.turn = turn
        self.query = any(_is_query(rule, m) for m in turn)
        self.bad = not turn or turn[0].role == "tool"
        self.counts: list[int] = []
        self.keys: list[BlockKey] = []
        self.total = -1


_BAD = attrgetter("bad")
_TOTAL = attrgetter("total")
_COUNTS = attrgetter("counts")
_KEYS = attrgetter("keys")


def _flat_shared(previous: list[BlockKey], keys: list[BlockKey], counts: list[int]) -> tuple[int, bool]:
    n = len(previous)
    # Mostly the very same key objects, so the list comparison runs at C speed.
    if n and n <= len(keys) and keys[:n] == previous:
        return sum(counts[:n]), True
    same = next(compress(count(), map(ne, previous, keys)), min(n, len(keys)))
    return sum(counts[:same]), bool(previous) and same == n


class BlockLayout:
    """Per-block token counts and keys of one measured prompt (equal keys at equal positions
    mean identical rendered text), kept in the parts they were measured in: the head and tail
    blocks, and the cached lists of the old turns between them. Flattened only when read, and
    compared with the previous prompt turn by turn, so a request costs O(turns), not
    O(messages)."""

    __slots__ = ("head", "old", "tail_counts", "tail_keys")

    def __init__(
        self,
        head: int,
        tail_counts: list[int],
        tail_keys: list[BlockKey],
        old: Sequence[_TurnInfo] = (),
    ) -> None:
        self.head = head
        """How many leading entries of the tail lists are the head (system, memory note)."""
        self.tail_counts = tail_counts
        self.tail_keys = tail_keys
        self.old = old

    @classmethod
    def flat(cls, counts: list[int], keys: list[BlockKey]) -> BlockLayout:
        return cls(len(counts), counts, keys)

    def counts(self) -> list[int]:
        h = self.head
        return list(chain(self.tail_counts[:h], *map(_COUNTS, self.old), self.tail_counts[h:]))

    def keys(self) -> list[BlockKey]:
        h = self.head
        return list(chain(self.tail_keys[:h], *map(_KEYS, self.old), self.tail_keys[h:]))

    def shared_prefix(self, previous: BlockLayout | None) -> tuple[int, bool]:
        """Leading tokens identical to ``previous`` (block-granular), and whether all of
        ``previous`` is a prefix of this prompt (the request only appends)."""
        if previous is None:
            return 0, False
        h = self.head
        if not (self.old or previous.old) or previous.head != h:
            return _flat_shared(previous.keys(), self.keys(), self.counts())
        if previous.tail_keys[:h] != self.tail_keys[:h]:
            return _flat_shared(previous.keys(), self.keys(), self.counts())
        # Same head; the old turns agree up to the first one that is not the same object
        # (the same object has the same blocks); from there on, block by block.
        old_p, old_c = previous.old, self.old
        i = next(compress(count(), map(is_not, old_p, old_c)), min(len(old_p), len(old_c)))
        tokens = sum(self.tail_counts[:h]) + sum(map(_TOTAL, old_c[:i]))
        rest_p = old_p[i:]
        rest_c = old_c[i:]
        n_p = sum(map(len, map(_KEYS, rest_p))) + len(previous.tail_keys) - h
        n_c = sum(map(len, map(_KEYS, rest_c))) + len(self.tail_keys) - h
        keys_p = chain(chain.from_iterable(map(_KEYS, rest_p)), islice(previous.tail_keys, h, None))
        keys_c = chain(chain.from_iterable(map(_KEYS, rest_c)), islice(self.tail_keys, h, None))
        same = next(compress(count(), map(ne, keys_p, keys_c)), min(n_p, n_c))
        counts_c = chain(chain.from_iterable(map(_COUNTS, rest_c)), islice(self.tail_counts, h, None))
        return tokens + sum(islice(counts_c, same)), same == n_p


class IncrementalCounter:
    """Exact prompt token counts in microseconds per turn, by cached per-message blocks."""

    def __init__(
        self,
        counter: TokenCounter,
        template: ChatTemplate | None = None,
        *,
        enable_thinking: bool = False,
        add_generation_prompt: bool = True,
        preserve_thinking: bool = False,
        family: ModelFamily | None = None,
    ) -> None:
        """``family`` gives the template (unless ``template`` is given), its reasoning placement
        and its fast path; without one, ``template`` is measured by probing only. A family
        without a template counts prompts with its ``prompt_count`` (the server's /tokenize)."""
        self.counter = counter
        if family is not None and template is None and family.template is not None:
            template = family.template()
        self.family = family or generic_family()
        prompt_count = self.family.prompt_count
        if template is None and prompt_count is None:
            raise TemplateError("no chat template and no prompt counter to count prompts with")
        self.template = template
        self._prompt_count = prompt_count
        self.enable_thinking = enable_thinking
        self.add_generation_prompt = add_generation_prompt
        self.preserve_thinking = preserve_thinking
        self._rule = self.family.is_query
        self._shows: ThinkRule = self.family.shows_think
        # The family's own template has a Python twin of its blocks (see qwen_blocks); others
        # are measured by probing the template (or the server) itself.
        own = family is not None and template is not None and family.template is not None
        self._fast = self.family.fast_path if own and self._is_family_template() else None
        self.mode = "incremental"
        """"incremental", or "whole" once additivity failed verification for this template."""
        self._verified = False
        self._blocks: dict[tuple[str, str], int] = {}
        self._heads: dict[tuple[str, str], int] = {}
        self._constants: dict[str, int] = {}
        self._tools_cache: tuple[list[dict[str, Any]], str] | None = None
        self._turns: dict[int, _TurnInfo] = {}
        self._infos = PerTurn(self._turn_info)
        # The last tail walked by measure_turns: the objects it was made of (held, so their
        # identities stay unique) and its block counts, keys and sum.
        self._tail: tuple[tuple[Any, ...], list[int], list[BlockKey], int] = ((), [], [], 0)
        # The last turn sequences known to take the cached path of measure_turns (no turn opens
        # with a tool result, some turn holds a query), with the index of their last query turn:
        # the ladder's current state and its latest candidate (kept or not).
        self._good: list[tuple[tuple[tuple[Message, ...], ...], int]] = []
        self.stats = {"misses": 0, "whole_renders": 0}
        self.max_blocks = 200_000
        """Block counts kept before the cache starts over (recounting is cheap; an offline
        sweep, which holds its whole session anyway, raises this and :attr:`max_turns`)."""
        self.max_turns = 50_000

    # -- whole render (the reference, and the fallback) ----------------------------------------

    def _is_family_template(self) -> bool:
        loader = self.family.template
        return loader is not None and self.template is not None and (
            loader().source == self.template.source
        )

    def _kwargs(self) -> dict[str, Any]:
        return {"preserve_thinking": True} if self.preserve_thinking else {}

    @property
    def origin(self) -> str:
        """Where counts come from (a template file, or the server)."""
        return self.template.origin if self.template is not None else self.counter.name

    def _count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> int:
        """Exact tokens of wire messages + tools: rendered here, or counted by the server."""
        if self.template is None:
            assert self._prompt_count is not None
            kwargs = {"enable_thinking": self.enable_thinking, **self._kwargs()}
            return self._prompt_count(messages, tools, add_generation_prompt, kwargs)
        text = self.template.render_prepared(
            prepare_messages(messages, self.template.content_format),
            prepare_tools(tools),
            add_generation_prompt=add_generation_prompt,
            enable_thinking=self.enable_thinking,
            **self._kwargs(),
        )
        return self.counter.count(text)

    def render(
        self,
        messages: Sequence[MessageLike],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool | None = None,
    ) -> str:
        """The whole prompt text, as the server renders it."""
        agp = self.add_generation_prompt if add_generation_prompt is None else add_generation_prompt
        if self.template is None:
            raise TemplateError(f"{self.origin} counts prompts without rendering them")
        return self.template.render(
            [_wire(m) for m in messages],
            tools,
            add_generation_prompt=agp,
            enable_thinking=self.enable_thinking,
            **self._kwargs(),
        )

    def count_whole(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Naive exact count: render everything and tokenize everything."""
        self.stats["whole_renders"] += 1
        return self._count_prompt([_wire(m) for m in messages], tools, self.add_generation_prompt)

    # -- probes ---------------------------------------------------------------------------------

    def _probe(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        return self._count_prompt(messages, tools, False)

    def _constant(self, name: str) -> int:
        value = self._constants.get(name)
        if value is not None:
            return value
        u, t = _PROBE_USER, _PROBE_TOOL
        if name == "base":
            value = self._probe([u])
        elif name == "tt":
            value = self._probe([u, t, t])
        elif name == "run":
            core_t = self._probe([u, t, t, t]) - self._constant("tt")
            value = self._probe([u, t]) - self._constant("base") - core_t
        elif name == "gen":
            value = self._count_prompt([u], None, True) - self._constant("base")
        else:  # pragma: no cover - internal names only
            raise KeyError(name)
        self._constants[name] = value
        return value

    def _block(self, message: MessageLike, variant: str) -> int:
        key = (_fingerprint(message), variant)
        cached = self._blocks.get(key)
        if cached is not None:
            return cached
        self.stats["misses"] += 1
        wire = _wire(message)
        u, t = _PROBE_USER, _PROBE_TOOL
        if self._fast is not None:
            # Only assistant messages change in preparation (tool-call arguments parsed,
            # reasoning mirrored); the others would just be deep-copied, and the twin reads them.
            prepared = prepare_messages([wire])[0]
            value = self.counter.count(self._fast(prepared, variant))
        elif variant == "kept" or variant == "user":
            value = self._probe([u, wire]) - self._constant("base")
        elif variant == "dropped":
            value = self._probe([wire, u]) - self._constant("base")
        elif variant == "tool":
            value = self._probe([u, t, wire, t]) - self._constant("tt")
        else:  # pragma: no cover - internal names only
            raise KeyError(variant)
        if len(self._blocks) > self.max_blocks:  # a bound for very long sessions
            self._blocks.clear()
        self._blocks[key] = value
        return value

    def _head(
        self,
        system: MessageLike | None,
        tools: list[dict[str, Any]] | None,
        tools_key: str | None = None,
    ) -> int:
        """System message and tools block together (the template merges them)."""
        if tools_key is None:
            tools_key = self._tools_key(tools)
        key = ("" if system is None else _fingerprint(system), tools_key)
        cached = self._heads.get(key)
        if cached is not None:
            return cached
        if system is None and not tools:
            value = 0
        else:
            head = [] if system is None else [_wire(system)]
            value = self._probe([*head, _PROBE_USER], tools) - self._constant("base")
        self._heads[key] = value
        return value

    # -- the fast path --------------------------------------------------------------------------

    def head_tokens(self, system: MessageLike | None, tools: list[dict[str, Any]] | None) -> int:
        """Tokens of the system turn: the system message and the tools block the template
        puts into it (0 when there is neither)."""
        return self._head(system, tools)

    def message_tokens(self, message: MessageLike) -> int:
        """Tokens of one user message's block (e.g. the opening of the current turn)."""
        return self._block(message, "user")

    def generation_tokens(self) -> int:
        """Tokens of the generation prompt (0 when it is not added)."""
        return self._constant("gen") if self.add_generation_prompt else 0

    def block_counts(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> list[int]:
        """Tokens attributed to each message (tool-turn framing goes to the run's first result;
        the tools block to the system message, or to the first message without one)."""
        return self.block_counts_and_keys(messages, tools)[0]

    def _tools_key(self, tools: list[dict[str, Any]] | None) -> str:
        # Serialising the tool specs costs ~50 us; the manager passes the same list every time.
        if not tools:
            return ""
        if self._tools_cache is None or self._tools_cache[0] is not tools:
            self._tools_cache = (tools, json.dumps(tools, sort_keys=True, ensure_ascii=False))
        return self._tools_cache[1]

    def block_counts_and_keys(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> tuple[list[int], list[BlockKey]]:
        """Per-message tokens and a key per rendered block: equal keys at equal positions mean
        identical rendered text, which is how shared prompt prefixes are measured."""
        if not messages:
            raise TemplateError("no messages to count")
        # Roles and fingerprints straight from Message objects: this loop runs over the whole
        # history every turn, so it avoids building wire dicts.
        roles = [m.role if isinstance(m, Message) else m.get("role") for m in messages]
        last_query = -1
        rule = self._rule
        for index in range(len(messages) - 1, -1, -1):
            if roles[index] == "user" and _is_query(rule, messages[index]):
                last_query = index
                break
        if last_query < 0:
            if self.family.query_required:
                # Let the template produce its own refusal (or its own count if it has none).
                self.count_whole(messages, tools)
                raise TemplateError("no user query in messages; the count is not defined")
            last_query = len(messages) - 1  # the template's default: no reasoning shown
        tools_key = self._tools_key(tools)
        counts: list[int] = []
        keys: list[BlockKey] = []
        start = 0
        if roles[0] == "system":
            counts.append(self._head(messages[0], tools, tools_key))
            keys.append(("head", tools_key + _fingerprint(messages[0])))
            start = 1
        head_without_system = self._head(None, tools, tools_key) if start == 0 else 0
        run = self._constant("run")
        blocks = self._blocks
        keep_all = self.preserve_thinking
        shows = self._shows
        last = len(messages) - 1
        previous_role = roles[start - 1] if start else None
        for index in range(start, len(messages)):
            role = roles[index]
            message = messages[index]
            fp = message.fingerprint if isinstance(message, Message) else _fingerprint(message)
            if role == "assistant":
                kept = shows(_wire(message), index > last_query, index == last, keep_all)
                variant = "kept" if kept else "dropped"
            elif role == "tool":
                variant = "tool"
            else:
                variant = "user"
            value = blocks.get((fp, variant))
            if value is None:
                value = self._block(message, variant)
            if role == "tool" and previous_role != "tool":
                value += run
                variant = "tool-run"
            counts.append(value)
            keys.append((variant, fp))
            previous_role = role
        if head_without_system:
            counts[0] += head_without_system
            keys[0] = ("head+" + keys[0][0], tools_key + keys[0][1])
        return counts, keys

    def measure(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> tuple[int, list[int], list[BlockKey]]:
        """Exact prompt tokens plus per-block counts and keys (empty in whole-render mode)."""
        if self.mode == "incremental" and not self._verified:
            self._verified = True
            self.verify(messages, tools)
        if self.mode == "whole":
            return self.count_whole(messages, tools), [], []
        blocks, keys = self.block_counts_and_keys(messages, tools)
        return sum(blocks) + self.generation_tokens(), blocks, keys

    def count_turns(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None = None,
    ) -> int:
        """Exact count of ``head + flattened turns`` (see :meth:`measure_turns`)."""
        return self.measure_turns(head, turns, tools, blocks=False)[0]

    def measure_turns(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None = None,
        *,
        blocks: bool = True,
    ) -> tuple[int, list[int], list[BlockKey]]:
        """:meth:`measure` of ``head + flattened turns`` (see :meth:`measure_layout`).
        ``blocks=False`` skips the per-block lists (returned empty) when only the total is
        wanted."""
        total, layout = self._layout(head, turns, tools, blocks=blocks)
        if layout is None:
            return total, [], []
        return total, layout.counts(), layout.keys()

    def measure_layout(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None = None,
    ) -> tuple[int, BlockLayout]:
        """Exact prompt tokens of ``head + flattened turns`` and its :class:`BlockLayout`
        (empty in whole-render mode)."""
        total, layout = self._layout(head, turns, tools, blocks=True)
        assert layout is not None
        if self.template is None and self.mode == "incremental":
            # Only the server knows its template, and block sums are exact only for additive
            # ones: every assembled prompt is also counted whole (one cached /tokenize), and
            # the first disagreement makes whole counts the rule (ladder candidates included).
            whole = self.count_whole([*head, *(m for turn in turns for m in turn)], tools)
            if whole != total:
                _log.warning(
                    "%s: block sum %d != whole count %d; counting whole prompts from now on",
                    self.origin, total, whole,
                )
                self.mode = "whole"
                return whole, BlockLayout.flat([], [])
        return total, layout

    def _layout(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None,
        *,
        blocks: bool,
    ) -> tuple[int, BlockLayout | None]:
        """:meth:`measure` of ``head + flattened turns``, with whole old turns cached.

        A turn wholly before the last user query renders the same wherever it sits, so its
        block counts, keys and total are cached by the turn itself (by identity: History keeps
        old turn tuples, and the trim ladder measures hundreds of candidates that differ in one
        turn). Only the head and the turns from the last query on are walked message by
        message; the rest costs one cache look-up per turn.
        """
        if self.mode == "whole" or not self._verified or not head:
            return self._layout_flat(head, turns, tools)
        first = head[0]
        if (first.role if isinstance(first, Message) else first.get("role")) != "system":
            return self._layout_flat(head, turns, tools)
        infos = self._infos.values(turns)
        split = len(turns)
        for index in range(len(infos) - 1, -1, -1):
            if infos[index].query:
                split = index
                break
        # Turns opening with a tool result would take their framing from the previous turn.
        if split == len(turns) or any(map(_BAD, infos)):
            return self._layout_flat(head, turns, tools)
        if isinstance(turns, tuple):
            self._good = [(turns, split)]
        tail_counts, tail_keys, tail_total = self._tail_blocks(head, turns[split:], tools)
        old = infos[:split]
        totals = list(map(_TOTAL, old))
        if totals and min(totals) < 0:
            for info in old:
                if info.total < 0:
                    self._fill(info)
            totals = list(map(_TOTAL, old))
        total = tail_total + sum(totals) + self.generation_tokens()
        if not blocks:
            return total, None
        return total, BlockLayout(len(head), tail_counts, tail_keys, old)

    def _layout_flat(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None,
    ) -> tuple[int, BlockLayout]:
        total, counts, keys = self._measure_flat(head, turns, tools)
        return total, BlockLayout.flat(counts, keys)

    def _old_total(self, turn: tuple[Message, ...]) -> int:
        info = self._turn_info(turn)
        if info.total < 0:
            self._fill(info)
        return info.total

    def swap_turn(
        self,
        turns: tuple[tuple[Message, ...], ...],
        index: int,
        turn: tuple[Message, ...],
    ) -> tuple[tuple[tuple[Message, ...], ...], int | None]:
        """``turns`` with ``turns[index]`` replaced, and the exact change that makes to
        :meth:`measure_turns` (any head opening with the system message), or None when it
        is not known without a full count.

        Known when ``turns`` was last measured (or built here) on the cached path and the
        turn sits before the last query: old turns render alike wherever they sit, so the
        prompt changes by exactly the difference of the two turns' cached totals.
        """
        out = (*turns[:index], turn, *turns[index + 1 :])
        split = self._good_split(turns)
        if split is None or index >= split or self._turn_info(turn).bad:
            return out, None
        delta = self._old_total(turn) - self._old_total(turns[index])
        self._good = [(turns, split), (out, split)]
        return out, delta

    def drop_oldest(
        self, turns: tuple[tuple[Message, ...], ...]
    ) -> tuple[tuple[tuple[Message, ...], ...], int | None]:
        """``turns`` without its first turn, and the exact change to :meth:`measure_turns`
        (head unchanged), or None when unknown (see :meth:`swap_turn`)."""
        out = turns[1:]
        split = self._good_split(turns)
        if split is None or split < 1:
            return out, None
        delta = -self._old_total(turns[0])
        self._good = [(turns, split), (out, split - 1)]
        return out, delta

    def _good_split(self, turns: tuple[tuple[Message, ...], ...]) -> int | None:
        if self.mode != "incremental":
            return None
        for good, split in self._good:
            if good is turns:
                return split
        return None

    def _tail_blocks(
        self,
        head: Sequence[MessageLike],
        tail: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None,
    ) -> tuple[list[int], list[BlockKey], int]:
        """Blocks of ``head`` + the turns from the last query on, reused while they are the
        very same objects: the trim ladder measures hundreds of candidates that differ only in
        an old turn or the memory note, with the same head and tail each time."""
        parts = (*head, *tail, tools)
        held, counts, keys, total = self._tail
        if (
            len(held) == len(parts)
            and all(map(is_, held, parts))
            and all(isinstance(m, Message) for m in head)  # dicts could be edited in place
        ):
            return counts, keys, total
        counts, keys = self.block_counts_and_keys(
            [*head, *(m for turn in tail for m in turn)], tools
        )
        total = sum(counts)
        self._tail = (parts, counts, keys, total)
        return counts, keys, total

    def measure_turns_reference(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None = None,
    ) -> tuple[int, list[int], list[BlockKey]]:
        """The plain path (every message walked, no per-turn cache); tests compare with it."""
        return self._measure_flat(head, turns, tools)

    def _measure_flat(
        self,
        head: Sequence[MessageLike],
        turns: Sequence[tuple[Message, ...]],
        tools: list[dict[str, Any]] | None,
    ) -> tuple[int, list[int], list[BlockKey]]:
        return self.measure([*head, *(m for turn in turns for m in turn)], tools)

    def _turn_info(self, turn: tuple[Message, ...]) -> _TurnInfo:
        info = self._turns.get(id(turn))
        if info is None or info.turn is not turn:
            info = _TurnInfo(turn, self._rule)
            if len(self._turns) > self.max_turns:  # a bound for very long sessions
                self._turns.clear()
            self._turns[id(turn)] = info  # holds the turn, so the id stays unique
        return info

    def _fill(self, info: _TurnInfo) -> None:
        # A probe query after the turn puts every assistant message before the last query, as
        # in the real prompt; no tools, so no head is attributed to it.
        counts, keys = self.block_counts_and_keys([*info.turn, _PROBE_USER])
        info.counts, info.keys = counts[:-1], keys[:-1]
        info.total = sum(info.counts)

    def count(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Exact prompt tokens (generation prompt included if configured)."""
        if self.mode == "whole":
            return self.count_whole(messages, tools)
        if not self._verified:
            self._verified = True
            if not self.verify(messages, tools):
                return self.count_whole(messages, tools)
        total = sum(self.block_counts(messages, tools))
        return total + (self._constant("gen") if self.add_generation_prompt else 0)

    def verify(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> bool:
        """Compare the block sum with a whole render; switch to whole renders if they differ."""
        whole = self.count_whole(messages, tools)
        summed = sum(self.block_counts(messages, tools))
        summed += self._constant("gen") if self.add_generation_prompt else 0
        if summed != whole:
            _log.warning(
                "chat template %s is not additive over these messages (sum %d != whole %d); "
                "counting by whole renders from now on",
                self.origin,
                summed,
                whole,
            )
            self.mode = "whole"
            return False
        return True

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
from typing import Any

from emil.context.history import Message
from emil.model.family import ModelFamily, ThinkRule, generic_family
from emil.model.prepare import prepare_messages, prepare_tools
from emil.model.template import ChatTemplate, TemplateError
from emil.model.tokens import TokenCounter

__all__ = ["BlockKey", "IncrementalCounter", "MessageLike"]

_log = logging.getLogger(__name__)

MessageLike = Message | dict[str, Any]
BlockKey = tuple[str, str]
"""(fingerprint, variant) of one rendered block."""

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
        self.stats = {"misses": 0, "whole_renders": 0}
        self.max_blocks = 200_000
        """Block counts kept before the cache starts over (a bound for very long sessions;
        recounting is cheap)."""

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
            assert self.template is not None  # a twin only comes with its own template
            prepared = prepare_messages([wire], self.template.content_format)[0]
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
        # Roles and fingerprints straight from Message objects: this runs over the whole prompt
        # on every request and on every candidate the trim ladder tries, so it avoids building
        # wire dicts and works list by list (the block look-ups run in C).
        roles = [m.role if isinstance(m, Message) else m.get("role") for m in messages]
        rule = self._rule
        n = len(roles)
        last_query = next((i for i in range(n - 1, -1, -1) if roles[i] == "user" and _is_query(rule, messages[i])), -1)
        if last_query < 0:
            if self.family.query_required:
                # Let the template produce its own refusal (or its own count if it has none).
                self.count_whole(messages, tools)
                raise TemplateError("no user query in messages; the count is not defined")
            last_query = n - 1  # the template's default: no reasoning shown
        tools_key = self._tools_key(tools)
        start = 1 if roles[0] == "system" else 0
        shows, keep_all = self._shows, self.preserve_thinking
        fps = [m.fingerprint if isinstance(m, Message) else _fingerprint(m) for m in messages]
        variants = [
            ("kept" if shows(_wire(m), i > last_query, i == n - 1, keep_all) else "dropped")
            if r == "assistant" else "tool" if r == "tool" else "user"
            for i, (r, m) in enumerate(zip(roles, messages, strict=True))
        ]
        keys: list[BlockKey] = list(zip(fps, variants, strict=True))
        found = map(self._blocks.get, keys[start:])
        counts = [
            value if value is not None else self._block(messages[i], variants[i])
            for i, value in enumerate(found, start)
        ]
        if start:
            counts.insert(0, self._head(messages[0], tools, tools_key))
            keys[0] = (tools_key + fps[0], "head")
        # Each run of tool results adds the cost of opening and closing its turn to its first.
        run = self._constant("run")
        for i in [i for i in range(start, n) if roles[i] == "tool" and (i == 0 or roles[i - 1] != "tool")]:
            counts[i] += run
            keys[i] = (fps[i], "tool-run")
        if not start and (head := self._head(None, tools, tools_key)):
            counts[0] += head
            keys[0] = (tools_key + keys[0][0], "head+" + keys[0][1])
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

    def count(
        self, messages: Sequence[MessageLike], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Exact prompt tokens (generation prompt included if configured)."""
        return self.measure(messages, tools)[0]

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

"""Model families: everything Emil must know about a served model to count its prompts exactly.

A :class:`ModelFamily` is one value: its tokenizer, its chat template (or none, when only the
server's ``/tokenize`` can count), the template kwargs the template reads, where the template
shows reasoning (which messages count as a real user query), an optional exact fast path and
the special tokens of its vocabulary. It is resolved once at start
(:func:`emil.model.resolve.resolve_family`) and everything else asks it; no other module
tests model names.

Shipped families (templates written for this project, in ``templates/``):

=======================  ==================================================================
``qwen3.6``              Qwen3.6 (e.g. Qwen3.6-35B-A3B): XML tool calls, preserve_thinking
``qwen3.5``              Qwen3.5: as Qwen3.6 without preserve_thinking
``qwen3``                hybrid-thinking Qwen3 (Qwen3-8B, Qwen3-30B-A3B, ...): JSON tool calls
``qwen3-instruct-2507``  Qwen3 Instruct-2507: JSON tool calls, no thinking switch
``qwen3-coder``          Qwen3-Coder (30B-A3B, 480B-A35B): XML tools and calls, no thinking
=======================  ==================================================================

Any other model is counted from a local model directory (tokenizer.json + its template) or,
with neither, by the server's ``/tokenize`` (:func:`server_family`). A model is
never counted with another family's template.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from emil.config.checks import register_check
from emil.exceptions import ConfigurationError
from emil.model.prepare import reasoning_of_request, text_of
from emil.model.qwen_blocks import BlockRenderer, qwen3_block, qwen35_block, qwen36_block
from emil.model.template import ChatTemplate, packaged_template
from emil.model.tokens import HeuristicCounter, TokenCounter, qwen_counter

__all__ = [
    "DEFAULT_FAMILY",
    "FAMILIES",
    "ModelFamily",
    "PromptCounting",
    "check_family_name",
    "family_by_name",
    "family_for_model",
    "family_names",
    "generic_family",
    "server_family",
    "template_family",
]




def _query_trimmed(content: Any) -> bool:
    """Qwen3.5/3.6: the user text, trimmed, is not one wrapped tool response."""
    text = text_of(content, "openai").strip()
    return not (text.startswith("<tool_response>") and text.endswith("</tool_response>"))


def _query_raw(content: Any) -> bool:
    """Qwen3: the user text as the template gets it (untrimmed) is not one wrapped tool
    response."""
    text = text_of(content, "string")
    return not (text.startswith("<tool_response>") and text.endswith("</tool_response>"))


def reasoning_of(wire: Mapping[str, Any]) -> str:
    """The reasoning the Qwen3 template reads from an assistant message (untrimmed): what the
    chat request carries (:func:`reasoning_of_request`), else the ``<think>`` block the template
    splits off the content."""
    reasoning = reasoning_of_request(wire)
    if isinstance(reasoning, str):
        return reasoning
    content = text_of(wire.get("content"), "string")
    if "</think>" in content:
        return content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
    return ""


PromptCount = Callable[
    [list[dict[str, Any]], list[dict[str, Any]] | None, bool, dict[str, Any]], int
]
"""(wire messages, tools, add_generation_prompt, template kwargs) -> exact prompt tokens: the
server's /tokenize, for a family without a local template."""

ThinkRule = Callable[[Mapping[str, Any], bool, bool, bool], bool]
"""(prepared assistant message, after the last query, is the last message, preserve_thinking)
-> whether the template renders its <think> block."""


def _think_qwen36(wire: Mapping[str, Any], after: bool, last: bool, preserve: bool) -> bool:
    return preserve or after


def _think_qwen35(wire: Mapping[str, Any], after: bool, last: bool, preserve: bool) -> bool:
    return after


def _think_qwen3(wire: Mapping[str, Any], after: bool, last: bool, preserve: bool) -> bool:
    return after and (last or bool(reasoning_of(wire)))


def _think_never(wire: Mapping[str, Any], after: bool, last: bool, preserve: bool) -> bool:
    return False


@dataclass(frozen=True)
class ModelFamily:
    """What Emil knows about one family of served models (see the module docstring)."""

    name: str
    """The ``model_family`` setting's value for this family."""
    label: str
    """What it covers, for logs and ``--print-config``."""
    tokenizer: Callable[[], TokenCounter] = field(repr=False)
    """Loads the family's exact token counter (cached by the loader)."""
    template: Callable[[], ChatTemplate] | None = field(repr=False)
    """Loads the family's chat template; None when only the server can count."""
    accepts: frozenset[str] = frozenset()
    """Template kwargs the template reads (``enable_thinking``, ``preserve_thinking``)."""
    is_query: Callable[[Any], bool] | None = field(default=None, repr=False)
    """The template's rule for a real user query (from a user message's content); None when
    the template does not place reasoning by it."""
    query_required: bool = False
    """The template refuses a prompt without a real user query."""
    shows_think: ThinkRule = field(default=_think_never, repr=False)
    """Where the template renders an assistant message's <think> block."""
    fast_path: BlockRenderer | None = field(default=None, repr=False)
    """A Python twin of the template's per-message blocks (speed only; verified)."""
    names: re.Pattern[str] | None = field(default=None, repr=False)
    """Served model names (last path component) that belong to this family."""
    prompt_count: PromptCount | None = field(default=None, repr=False)
    """Counts whole prompts when there is no local template (the server's /tokenize)."""
    example: str = ""
    """A served model name of this family (what the vLLM double calls itself as the family)."""

    @property
    def special_tokens(self) -> frozenset[str]:
        """Every added/special token string of the family's vocabulary, exact and complete."""
        return self.tokenizer().special_tokens

    def sends_preserve_thinking(self, *, enable_thinking: bool, preserve_thinking: bool) -> bool:
        """Whether requests carry ``preserve_thinking``: the setting asks for it and this
        family's template reads it (what is counted with is what is sent)."""
        return bool(self.template_kwargs(enable_thinking=enable_thinking,
                                         preserve_thinking=preserve_thinking).get("preserve_thinking"))

    def template_kwargs(self, *, enable_thinking: bool, preserve_thinking: bool) -> dict[str, bool]:
        """The chat_template_kwargs the template reads, from Emil's settings. A kwarg the
        template ignores is left out, so it can never change what Emil counts."""
        out: dict[str, bool] = {}
        if "enable_thinking" in self.accepts:
            out["enable_thinking"] = enable_thinking
        if "preserve_thinking" in self.accepts and preserve_thinking:
            out["preserve_thinking"] = True
        return out


@functools.lru_cache(maxsize=8)
def _packaged(name: str) -> ChatTemplate:
    return packaged_template(name)


def _suffix(body: str) -> re.Pattern[str]:
    # The last path component, then nothing or a separator: quantized and re-packaged variants
    # (-FP8, -AWQ, -GGUF, -NVFP4-Fast...) keep the family, a different model name does not.
    return re.compile(rf"^(?:{body})(?:$|[-_.@:])", re.IGNORECASE)


_QWEN3_SIZES = r"0\.6b|1\.7b|4b|8b|14b|32b|30b-a3b|235b-a22b"
_QWEN3_OTHER = r"(?!.*(?:instruct|thinking|base|coder|2507|vl|omni|embedding|reranker|guard))"

FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(
        name="qwen3.6",
        label="Qwen3.6 (e.g. Qwen3.6-35B-A3B)",
        tokenizer=functools.partial(qwen_counter, "qwen3.5"),
        template=functools.partial(_packaged, "qwen3_6.jinja"),
        accepts=frozenset({"enable_thinking", "preserve_thinking"}),
        is_query=_query_trimmed,
        query_required=True,
        shows_think=_think_qwen36,
        fast_path=qwen36_block,
        names=_suffix(r"qwen3[._]?6"),
        example="Qwen/Qwen3.6-35B-A3B",
    ),
    ModelFamily(
        name="qwen3.5",
        label="Qwen3.5 (e.g. Qwen3.5-35B-A3B, Qwen3.5-27B)",
        tokenizer=functools.partial(qwen_counter, "qwen3.5"),
        template=functools.partial(_packaged, "qwen3_5.jinja"),
        accepts=frozenset({"enable_thinking"}),
        is_query=_query_trimmed,
        query_required=True,
        shows_think=_think_qwen35,
        fast_path=qwen35_block,
        names=_suffix(r"qwen3[._]?5"),
        example="Qwen/Qwen3.5-35B-A3B",
    ),
    ModelFamily(
        name="qwen3-coder",
        label="Qwen3-Coder (Qwen3-Coder-30B-A3B-Instruct, Qwen3-Coder-480B-A35B-Instruct)",
        tokenizer=functools.partial(qwen_counter, "qwen3"),
        template=functools.partial(_packaged, "qwen3_coder.jinja"),
        names=_suffix(r"qwen3-coder-(?:30b-a3b|480b-a35b)-instruct"),
        example="Qwen/Qwen3-Coder-30B-A3B-Instruct",
    ),
    ModelFamily(
        name="qwen3-instruct-2507",
        label="Qwen3 Instruct-2507 (e.g. Qwen3-30B-A3B-Instruct-2507), no thinking switch",
        tokenizer=functools.partial(qwen_counter, "qwen3"),
        template=functools.partial(_packaged, "qwen3_instruct_2507.jinja"),
        fast_path=functools.partial(qwen3_block, thinking=False),
        names=_suffix(r"qwen3-(?:4b|30b-a3b|235b-a22b)-instruct-2507"),
        example="Qwen/Qwen3-30B-A3B-Instruct-2507",
    ),
    ModelFamily(
        name="qwen3",
        label="Qwen3 with hybrid thinking (Qwen3-8B, Qwen3-30B-A3B, Qwen3-32B, ...)",
        tokenizer=functools.partial(qwen_counter, "qwen3"),
        template=functools.partial(_packaged, "qwen3.jinja"),
        accepts=frozenset({"enable_thinking"}),
        is_query=_query_raw,
        shows_think=_think_qwen3,
        fast_path=functools.partial(qwen3_block, thinking=True),
        names=_suffix(rf"qwen3-(?:{_QWEN3_SIZES}){_QWEN3_OTHER}"),
        example="Qwen/Qwen3-30B-A3B",
    ),
)

_BY_NAME = {family.name: family for family in FAMILIES}

DEFAULT_FAMILY = "qwen3.6"
"""The family Emil's defaults assume where nothing names one: the model the operator's field
notes serve (Qwen3.6-35B-A3B), the offline tools' default tokenizer, and the family of
recordings written before families existed. Code outside emil.model names this constant,
never a family literal."""
_ALIASES = {"qwen3.5/3.6": "qwen3.6", "qwen36": "qwen3.6", "qwen35": "qwen3.5"}


def family_names() -> tuple[str, ...]:
    """The ``model_family`` names of the shipped families."""
    return tuple(_BY_NAME)


def check_family_name(name: str) -> str:
    """The ``model_family`` setting's check (emil.config.checks): a shipped family's name, or
    ValueError listing them (``auto`` and ``server`` are the setting's own words)."""
    if name not in _BY_NAME:
        raise ValueError(f"expected auto, server or one of {', '.join(family_names())}")
    return name


register_check("model_family", check_family_name)


def family_by_name(name: str) -> ModelFamily:
    """A shipped family by its ``model_family`` name; ConfigurationError listing them otherwise."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    family = _BY_NAME.get(key)
    if family is None:
        raise ConfigurationError(
            f"model_family {name!r} is not a shipped family; expected auto, server or one of "
            f"{', '.join(_BY_NAME)}"
        )
    return family


def family_for_model(model: str) -> ModelFamily | None:
    """The shipped family a served model name belongs to (by its last path component)."""
    last = model.strip().rstrip("/").rsplit("/", 1)[-1]
    for family in FAMILIES:
        if family.names is not None and family.names.match(last):
            return family
    return None


def template_family(counter: TokenCounter, template: ChatTemplate | None) -> ModelFamily:
    """A family from a counter and a template known only by its text (a model directory's, or
    one given as a file): blocks are measured by probing the template, reasoning placed the
    Qwen3.5/3.6 way, and both are checked against whole renders, which take over if they
    differ. ``template`` None: the generic rules alone."""
    return ModelFamily(
        name="model-dir",
        label=f"local files ({counter.name}; template {template.origin if template else None})",
        tokenizer=lambda: counter,
        template=(lambda: template) if template is not None else None,
        accepts=frozenset({"enable_thinking", "preserve_thinking"}),
        is_query=_query_trimmed,
        shows_think=_think_qwen36,
    )


class PromptCounting(TokenCounter, Protocol):
    """A counter that also counts whole chat prompts with the server's own template (the
    server's /tokenize: :class:`emil.llm.tokenize.ServerCounting`)."""

    def count_prompt(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool,
        template_kwargs: dict[str, Any],
    ) -> int: ...


def server_family(counting: PromptCounting) -> ModelFamily:
    """The family of a model only the server can count: its prompts and texts counted by
    ``counting`` (``/tokenize``), reasoning placement guessed as for a template known only by
    its text; every assembled prompt is also counted whole (see IncrementalCounter)."""
    return replace(
        template_family(counting, None),
        name="server",
        label=f"counted by the server ({counting.name}); no local template",
        prompt_count=counting.count_prompt,
    )


def generic_family() -> ModelFamily:
    """Rules for a template known only by its text (see :func:`template_family`)."""
    return template_family(HeuristicCounter(), None)

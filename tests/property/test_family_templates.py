"""Each shipped family against its model's REAL chat template (tests/fixtures/chat_templates).

For random conversations (reasoning kept and dropped, tool calls with every JSON value type,
runs of tool results, unusual Unicode and special-token look-alikes, list content, thinking on
and off, preserve_thinking, with and without tools and generation prompt), rendering the real
template with the project's jinja environment must give the same text as the family's own
template, and the family's exact count (whole render, incremental blocks with the Python twin,
incremental blocks by probing the template) must equal the real text's token count.
Families without a real template here (qwen3.5, qwen3-instruct-2507) are checked against their
own template: twin and probes equal whole renders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emil.context.incremental import IncrementalCounter
from emil.model.counting import count_prompt_tokens
from emil.model.family import FAMILIES, ModelFamily, family_by_name
from emil.model.template import ChatTemplate, TemplateError
from emil.offline.synthetic import emil_tool_specs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates"
REAL = {
    "qwen3.6": "Qwen3.6-35B-A3B.jinja",
    "qwen3": "Qwen-Qwen3-0.6B.jinja",
    "qwen3-coder": "Qwen3-Coder.jinja",
}
MODEL_NAMES = {
    "qwen3.6": "Qwen/Qwen3.6-35B-A3B",
    "qwen3.5": "Qwen/Qwen3.5-35B-A3B",
    "qwen3": "Qwen/Qwen3-8B",
    "qwen3-instruct-2507": "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "qwen3-coder": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
}
TOOLS = emil_tool_specs()[:5]
ODD_TOOL = {
    "type": "function",
    "function": {
        "name": "odd",
        "description": "  Keys a template must handle.  ",
        "parameters": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["a", "b"], "description": "one of"},
                "n": {"type": ["integer", "null"], "minimum": 0, "default": None},
                "pos": {"type": "array", "items": {"type": "integer"}, "x-unit": "blocks"},
                "opts": {"type": "object", "properties": {"k": {"type": "string"}},
                         "required": ["k"]},
            },
            "required": ["mode", "pos"],
        },
    },
}

_real_cache: dict[str, ChatTemplate] = {}


def _real(family: str) -> ChatTemplate:
    if family not in _real_cache:
        path = FIXTURES / REAL[family]
        _real_cache[family] = ChatTemplate(path.read_text(encoding="utf-8"), origin=str(path))
    return _real_cache[family]


odd_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=24
)
pieces = st.sampled_from(
    [
        "", " ", "\n", "  padded  ", "oak_log", "日本語", "🙂", "e\u0301", "\u0338", "Ω",
        "<think>", "</think>", "<tool_call>", "<tool_response>", "</tool_response>",
        "<|im_end|>", "<|im_start|>user", "<function=say>", "\u200b", "\u202e", "\t",
    ]
)
texts = st.lists(st.one_of(odd_text, pieces), max_size=5).map("".join)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32), texts,
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "x y"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def contents(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "text", "text", "parts", "none"]))
    if kind == "parts":
        return [{"type": "text", "text": draw(texts)} for _ in range(draw(st.integers(1, 3)))]
    if kind == "none":
        return None
    return draw(texts)


@st.composite
def assistant(draw: st.DrawFn, index: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    calls = []
    for k in range(draw(st.integers(0, 2))):
        args = draw(st.dictionaries(st.sampled_from(["x", "block", "pos", "say"]), json_value, max_size=3))
        raw = json.dumps(args, ensure_ascii=False) if draw(st.booleans()) else args
        calls.append({"id": f"c{index}_{k}", "type": "function",
                      "function": {"name": draw(st.sampled_from(["say", "go_to", "collect"])), "arguments": raw}})
    message: dict[str, Any] = {"role": "assistant", "content": draw(st.one_of(texts, st.none()))}
    if draw(st.booleans()):
        message["content"] = f"<think>{draw(texts)}</think>{draw(texts)}"
    if draw(st.booleans()):
        message["reasoning"] = draw(texts)
    if calls:
        message["tool_calls"] = calls
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": draw(contents())} for c in calls
    ]
    return message, results


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(contents())})
    for index in range(draw(st.integers(1, 4))):
        wrapped = draw(st.integers(0, 7)) == 0  # a user turn that looks like a tool response
        content = f"<tool_response>{draw(texts)}</tool_response>" if wrapped else draw(contents())
        messages.append({"role": "user", "content": content})
        for _ in range(draw(st.integers(0, 3))):
            message, results = draw(assistant(index))
            messages.append(message)
            messages.extend(results)
    tools = draw(st.sampled_from([None, TOOLS, [*TOOLS[:2], ODD_TOOL]]))
    return messages, tools


def _render(template: ChatTemplate, messages: list[dict[str, Any]], tools: Any, **kw: Any) -> str | None:
    try:
        return template.render(messages, tools, **kw)
    except TemplateError:
        return None


def _kwargs(family: ModelFamily, thinking: bool, preserve: bool) -> dict[str, Any]:
    return {"preserve_thinking": True} if preserve and "preserve_thinking" in family.accepts else {}


@pytest.mark.parametrize("name", sorted(REAL))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv=conversations(), thinking=st.booleans(), preserve=st.booleans(), gen=st.booleans())
def test_family_template_renders_as_the_real_one(
    name: str, conv: tuple[list[dict[str, Any]], Any], thinking: bool, preserve: bool, gen: bool
) -> None:
    family = family_by_name(name)
    messages, tools = conv
    kw = {"add_generation_prompt": gen, "enable_thinking": thinking, **_kwargs(family, thinking, preserve)}
    assert family.template is not None
    real = _render(_real(name), messages, tools, **kw)
    ours = _render(family.template(), messages, tools, **kw)
    assert ours == real
    if real is None:
        return
    counter = family.tokenizer()
    exact = counter.count(real)
    assert count_prompt_tokens(
        messages, tools, tokenizer=MODEL_NAMES[name], enable_thinking=thinking,
        add_generation_prompt=gen, preserve_thinking=bool(kw.get("preserve_thinking")),
    ) == exact
    for fast in (True, False):
        inc = IncrementalCounter(
            counter, _real(name) if not fast else None, family=family, enable_thinking=thinking,
            add_generation_prompt=gen, preserve_thinking=bool(kw.get("preserve_thinking")),
        )
        assert (inc._fast is not None) == (fast and family.fast_path is not None)
        inc._verified = True  # the block sum itself is under test, not the whole-render fallback
        assert inc.count(messages, tools) == exact


@pytest.mark.parametrize("name", [f.name for f in FAMILIES])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv=conversations(), thinking=st.booleans(), preserve=st.booleans())
def test_twin_and_probes_equal_whole_renders(
    name: str, conv: tuple[list[dict[str, Any]], Any], thinking: bool, preserve: bool
) -> None:
    family = family_by_name(name)
    messages, tools = conv
    kw = _kwargs(family, thinking, preserve)
    assert family.template is not None
    text = _render(family.template(), messages, tools, enable_thinking=thinking, **kw)
    if text is None:
        return
    exact = family.tokenizer().count(text)
    probing = IncrementalCounter(
        family.tokenizer(), ChatTemplate(family.template().source), family=family,
        enable_thinking=thinking, preserve_thinking=bool(kw),
    )
    fast = IncrementalCounter(
        family.tokenizer(), family=family, enable_thinking=thinking, preserve_thinking=bool(kw)
    )
    for inc in (probing, fast):
        inc._verified = True
        assert inc.count(messages, tools) == exact

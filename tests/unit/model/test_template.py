"""Chat templates render as transformers/vLLM do; the shipped Qwen3.5/3.6 template's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.model.family import family_by_name
from emil.model.prepare import prepare_messages
from emil.model.template import ChatTemplate, TemplateError, content_format

QWEN36 = family_by_name("qwen3.6")
SYSTEM = {"role": "system", "content": "You are Emil."}
USER = {"role": "user", "content": "hi"}


def test_environment_matches_transformers() -> None:
    source = (
        "{% for m in messages %}\n"
        "  {{ m.content | tojson }}\n"
        "{% endfor %}"
        "{% if tools is none %}none{% endif %}"
    )
    out = ChatTemplate.from_source(source).render([{"role": "user", "content": "<é & 'x'>"}])
    # trim_blocks + lstrip_blocks: the tag lines leave no whitespace; tojson keeps <>&' and é
    assert out == "  \"<é & 'x'>\"\nnone"


def test_tojson_keeps_key_order_and_accepts_indent() -> None:
    source = "{{ tools[0] | tojson(indent=2) }}"
    out = ChatTemplate.from_source(source).render([USER], [{"b": 1, "a": "ü"}])
    assert out == '{\n  "b": 1,\n  "a": "ü"\n}'


def test_raise_exception_becomes_template_error() -> None:
    template = ChatTemplate.from_source("{{ raise_exception('nope: ' + messages[0].role) }}")
    with pytest.raises(TemplateError, match="nope: user"):
        template.render([USER])


def test_strftime_now_and_loop_controls_and_generation_block() -> None:
    source = (
        "{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}"
        "{% generation %}[{{ m.content }}]{% endgeneration %}{% endfor %}"
        "{{ strftime_now('%Y') | length }}"
    )
    out = ChatTemplate.from_source(source).render([USER, {"role": "user", "content": "x"}])
    assert out == "[hi]4"


def test_syntax_errors_are_reported_with_origin() -> None:
    with pytest.raises(TemplateError, match="does not compile"):
        ChatTemplate.from_source("{% if %}", origin="bad.jinja")


def test_sandbox_refuses_mutation() -> None:
    template = ChatTemplate.from_source("{{ messages.append(1) }}")
    with pytest.raises(TemplateError):
        template.render([USER])


def test_prepare_messages_mirrors_vllm() -> None:
    messages = [
        {
            "role": "assistant",
            "content": "",
            "reasoning": "think",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
                {"id": "c", "type": "function", "function": {"name": "h", "arguments": "[1]"}},
                {"id": "d", "type": "function", "function": {"name": "i", "arguments": ""}},
            ],
        },
        {"role": "assistant", "content": "x", "tool_calls": []},
    ]
    prepared = prepare_messages(messages)
    args = [c["function"]["arguments"] for c in prepared[0]["tool_calls"]]
    assert args == [{"x": 1}, {}, {}, {}]
    assert prepared[0]["reasoning_content"] == "think"
    assert "tool_calls" not in prepared[1]
    # the caller's dicts are untouched (only what is edited is copied)
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'
    assert [c["function"]["arguments"] for c in messages[0]["tool_calls"]][1:] == ["not json", "[1]", ""]
    assert "reasoning_content" not in messages[0]
    assert messages[1]["tool_calls"] == []


def test_default_template_plain_chat() -> None:
    out = QWEN36.template().render([SYSTEM, USER], enable_thinking=False)
    assert out == (
        "<|im_start|>system\nYou are Emil.<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    thinking = QWEN36.template().render([USER], enable_thinking=True)
    assert thinking.endswith("<|im_start|>assistant\n<think>\n")
    bare = QWEN36.template().render([USER], add_generation_prompt=False)
    assert bare == "<|im_start|>user\nhi<|im_end|>\n"


def test_default_template_tools_in_system_turn() -> None:
    tools = [{"type": "function", "function": {"name": "dig", "parameters": {}}}]
    out = QWEN36.template().render([SYSTEM, USER], tools)
    head = out.split("<|im_end|>")[0]
    assert head.startswith("<|im_start|>system\n# Tools\n\nYou have access")
    assert (
        '\n<tools>\n{"type": "function", "function": {"name": "dig", "description": null, "parameters": {}}}\n</tools>'
        in head
    )
    assert head.endswith("</IMPORTANT>\n\nYou are Emil.")
    no_system = QWEN36.template().render([USER], tools)
    assert no_system.split("<|im_end|>")[0].endswith("</IMPORTANT>")


def _call(name: str, args: dict[str, object], call_id: str = "c") -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def test_default_template_tool_calls_and_grouped_results() -> None:
    messages = [
        USER,
        {
            "role": "assistant",
            "content": "On it.",
            "tool_calls": [_call("go", {"x": 1, "where": {"y": 2}}), _call("say", {"text": "hé"})],
        },
        {"role": "tool", "tool_call_id": "c", "content": " ok "},
        {"role": "tool", "tool_call_id": "c", "content": "said"},
    ]
    out = QWEN36.template().render(messages, add_generation_prompt=False)
    assert out == (
        "<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nOn it.\n\n"
        "<tool_call>\n<function=go>\n<parameter=x>\n1\n</parameter>\n"
        '<parameter=where>\n{"y": 2}\n</parameter>\n</function>\n</tool_call>'
        "\n<tool_call>\n<function=say>\n<parameter=text>\nhé\n</parameter>\n</function>\n</tool_call>"
        "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nok\n</tool_response>"
        "\n<tool_response>\nsaid\n</tool_response><|im_end|>\n"
    )


def test_reasoning_kept_only_after_the_last_query_unless_preserved() -> None:
    messages = [
        USER,
        {"role": "assistant", "content": "a", "reasoning": "old thought"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "b", "reasoning": "new thought"},
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
    ]
    out = QWEN36.template().render(messages, add_generation_prompt=False)
    assert "old thought" not in out
    assert "<|im_start|>assistant\na<|im_end|>" in out
    assert "<|im_start|>assistant\n<think>\nnew thought\n</think>\n\nb<|im_end|>" in out
    kept = QWEN36.template().render(
        messages, add_generation_prompt=False, preserve_thinking=True
    )
    assert "<think>\nold thought\n</think>\n\na" in kept


def test_reasoning_inside_content_is_split() -> None:
    messages = [USER, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer"}]
    out = QWEN36.template().render(messages, add_generation_prompt=False)
    assert "<think>\nhmm\n</think>\n\nanswer<|im_end|>" in out


def test_default_template_refusals() -> None:
    with pytest.raises(TemplateError, match="No user query"):
        QWEN36.template().render([SYSTEM])
    with pytest.raises(TemplateError, match="beginning"):
        QWEN36.template().render([USER, SYSTEM])
    with pytest.raises(TemplateError, match="No messages"):
        QWEN36.template().render([])


def test_text_parts_content() -> None:
    parts = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "b"}],
    }
    # vLLM 0.32 sees that render_content loops over a macro parameter filled with
    # message.content, so the Qwen3.6 template gets the parts and writes them one after another
    # (checked against the real server: tests/integration/real_vllm/test_exact_counts.py).
    assert QWEN36.template().content_format == "openai"
    out = QWEN36.template().render([parts], add_generation_prompt=False)
    assert out == "<|im_start|>user\nab<|im_end|>\n"
    # Qwen3's template gets text: the non-empty parts joined with newlines.
    qwen3 = family_by_name("qwen3").template()
    assert qwen3.content_format == "string"
    assert qwen3.render([parts], add_generation_prompt=False) == "<|im_start|>user\na\nb<|im_end|>\n"


def test_a_tool_result_in_parts_is_joined_with_newlines_even_for_qwen36() -> None:
    # vLLM turns a tool message's text parts back into one string (empty parts kept).
    tool = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "a"},
            {"type": "text", "text": ""}, {"type": "text", "text": "b"}]}
    prepared = prepare_messages([tool], "openai")
    assert prepared[0]["content"] == "a\n\nb"
    assert prepare_messages([tool], "string")[0]["content"] == "a\nb"


def test_reasoning_content_is_read_as_a_chat_request_renames_it() -> None:
    # vLLM 0.32's ChatCompletionRequest renames reasoning_content to reasoning unless reasoning
    # is set (found against the real server, whose /tokenize does not rename: see tokens.py).
    messages = [USER, {"role": "assistant", "content": "b", "reasoning_content": "thought"}, USER]
    prepared = prepare_messages(messages)
    assert prepared[1]["reasoning"] == prepared[1]["reasoning_content"] == "thought"
    both = [USER, {"role": "assistant", "content": "b", "reasoning": "r", "reasoning_content": "rc"}]
    assert prepare_messages(both)[1]["reasoning_content"] == "r"
    null = [USER, {"role": "assistant", "content": "b", "reasoning": None, "reasoning_content": "rc"}]
    assert prepare_messages(null)[1]["reasoning"] == "rc"


def test_content_format_follows_vllm_detection() -> None:
    loops = "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"
    aliased = "{% set ms = messages[1:] %}{% for m in ms %}{% for p in m['content'] %}x{% endfor %}{% endfor %}"
    macro = (
        "{% macro r(c) %}{% for p in c %}{{ p.text }}{% endfor %}{% endmacro %}"
        "{% for m in messages %}{{ r(m.content) }}{% endfor %}"
    )
    macro_kw = macro.replace("r(m.content)", "r(c=m.content)")
    unbound_macro = macro.replace("r(m.content)", "r(m.role)")
    top_level = "{% for m in messages %}{% set content = m.content %}{% endfor %}{% for p in content %}{% endfor %}"
    plain = "{% for m in messages %}{{ m.content }}{% endfor %}"
    assert [content_format(t) for t in (loops, aliased, macro, macro_kw, top_level)] == ["openai"] * 5
    assert [content_format(t) for t in (unbound_macro, plain, "{% for")] == ["string"] * 3


def test_from_model_dir_prefers_chat_template_jinja(tmp_path: Path) -> None:
    config = {"chat_template": "CONFIG {{ bos_token }}", "bos_token": {"content": "<s>"}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert ChatTemplate.from_model_dir(tmp_path).render([USER]) == "CONFIG <s>"
    (tmp_path / "chat_template.jinja").write_text("JINJA {{ bos_token }}")
    assert ChatTemplate.from_model_dir(tmp_path).render([USER]) == "JINJA <s>"


def test_from_model_dir_named_templates_and_missing(tmp_path: Path) -> None:
    config = {
        "chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ]
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert ChatTemplate.from_model_dir(tmp_path).render([USER]) == "D"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TemplateError, match="no chat template"):
        ChatTemplate.from_model_dir(empty)


def test_tools_are_normalised_as_vllm_dumps_them() -> None:
    tools = [
        {
            "function": {"parameters": {"type": "object"}, "name": "dig", "strict": True},
            "type": "function",
        },
        {"type": "function", "function": {"name": "say", "description": "Talk.", "parameters": {}}},
    ]
    out = QWEN36.template().render([USER], tools)
    # declared fields first in declaration order, a missing description as null, extras after
    assert (
        '{"type": "function", "function": {"name": "dig", "description": null, "parameters": {"type": "object"}, "strict": true}}'
        in out
    )
    assert (
        '{"type": "function", "function": {"name": "say", "description": "Talk.", "parameters": {}}}'
        in out
    )
    assert tools[0] == {
        "function": {"parameters": {"type": "object"}, "name": "dig", "strict": True},
        "type": "function",
    }

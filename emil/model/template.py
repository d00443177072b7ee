"""Chat templates rendered exactly as transformers and vLLM render them.

The environment matches ``transformers``' chat-template compiler: a sandboxed, immutable jinja2
environment with ``trim_blocks`` and ``lstrip_blocks``, a ``tojson`` filter that keeps non-ASCII
and HTML characters as they are (``json.dumps(ensure_ascii=False)``, keys in given order), the
``raise_exception`` and ``strftime_now`` globals, loop controls and a pass-through
``{% generation %}`` block. Messages are pre-processed as vLLM 0.32 does before rendering
(checked against a real vLLM server by tests/integration/real_vllm): content takes the
template's content format (vLLM's detection, :func:`content_format`: a template that loops over
a message's content, directly or through a macro parameter, gets OpenAI-style part lists, any
other gets text, non-empty text parts joined with newlines and a missing content as ""),
tool-call ``arguments`` JSON strings become mappings (invalid or non-object JSON becomes
``{}``), an empty ``tool_calls`` list is dropped, an assistant's reasoning (``reasoning``, else the deprecated
``reasoning_content``, as a chat request renames it) is handed over under both names, and tool specs are normalised as vLLM's pydantic round trip leaves them
(:func:`prepare_tools`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from emil.exceptions import ConfigurationError

__all__ = [
    "ChatTemplate",
    "TemplateError",
    "content_format",
    "packaged_template",
    "prepare_messages",
    "prepare_tools",
    "reasoning_of_request",
    "text_of",
]

_log = logging.getLogger(__name__)


class TemplateError(ConfigurationError):
    """A chat template could not be loaded, compiled or rendered over these messages."""


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # transformers' filter: no HTML escaping (jinja's own tojson escapes <>&'), UTF-8 kept.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` renders its body (transformers marks spans)."""

    tags = {"generation"}  # noqa: RUF012 - jinja's Extension API declares this as a class set

    def parse(self, parser: Any) -> nodes.Node | list[nodes.Node]:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols, _GenerationBlock],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """vLLM's rule: templates get a mapping; bad JSON or non-objects become ``{}``."""
    if not arguments:
        return {}
    if isinstance(arguments, dict):
        return arguments
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return {}
    return parsed if isinstance(parsed, dict) else {}


def _copy_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    out = dict(call)
    if isinstance(out.get("function"), dict):
        out["function"] = dict(out["function"])
    return out


def _is_name(node: nodes.Node, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name == name


def _is_item(node: nodes.Node, name: str, key: str) -> bool:
    """``name.key`` or ``name['key']``."""
    if isinstance(node, nodes.Getitem):
        arg = node.arg
        return _is_name(node.node, name) and isinstance(arg, nodes.Const) and arg.value == key
    return isinstance(node, nodes.Getattr) and _is_name(node.node, name) and node.attr == key


def _refers_to(node: nodes.Node, name: str, key: str | None = None) -> bool:
    """``name`` (or ``name.key``), possibly through a filter, a test or a slice."""
    if isinstance(node, nodes.Filter):
        return node.node is not None and _refers_to(node.node, name, key)
    if isinstance(node, nodes.Test):
        return _refers_to(node.node, name, key)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice):
        return _refers_to(node.node, name, key)
    return _is_item(node, name, key) if key else _is_name(node, name)


def _aliases(tree: nodes.Template, name: str) -> list[str]:
    """``name`` and every variable set from it (``{% set msgs = messages[1:] %}``), transitively."""
    found, queue = [name], [name]
    while queue:
        current = queue.pop(0)
        for assign in tree.find_all(nodes.Assign):
            target = assign.target
            if not (isinstance(target, nodes.Name) and _refers_to(assign.node, current)):
                continue
            if target.name not in found:
                found.append(target.name)
                queue.append(target.name)
    return found


def _message_names(tree: nodes.Template) -> list[str]:
    """Loop variables that range over the messages (``{% for message in messages %}``)."""
    lists = _aliases(tree, "messages")
    return [
        loop.target.name
        for loop in tree.find_all(nodes.For)
        if isinstance(loop.target, nodes.Name) and any(_refers_to(loop.iter, n) for n in lists)
    ]


def _macro_content_params(tree: nodes.Template, messages: list[str]) -> dict[int, set[str]]:
    """For each loop inside a macro: the macro's parameters some call passes a message's content
    to (Qwen3.5/3.6's ``render_content(message.content)``)."""
    by_loop: dict[int, set[str]] = {}
    for macro in tree.find_all(nodes.Macro):
        params = [arg.name for arg in macro.args]
        bound: set[str] = set()
        for call in tree.find_all(nodes.Call):
            if not (isinstance(call.node, nodes.Name) and call.node.name == macro.name):
                continue
            for i, arg in enumerate(call.args):
                if i < len(params) and any(_refers_to(arg, m, "content") for m in messages):
                    bound.add(params[i])
            for kwarg in call.kwargs:
                if kwarg.key in params and any(
                    _refers_to(kwarg.value, m, "content") for m in messages
                ):
                    bound.add(kwarg.key)
        for loop in macro.find_all(nodes.For):
            by_loop[id(loop)] = bound
    return by_loop


def content_format(source: str) -> str:
    """"openai" when the template loops over a message's content parts, else "string": what
    vLLM 0.32's ``--chat-template-content-format auto`` decides (``_detect_content_format`` in
    vllm/renderers/hf.py, ported). A loop counts when it ranges over ``message.content`` (a
    message being a loop variable over ``messages`` or a variable set from it), over a macro
    parameter that a call fills with a message's content (Qwen3.5/3.6's ``render_content``), or,
    outside macros, over a variable named ``content``."""
    try:
        tree = _environment().parse(source)
    except jinja2.TemplateSyntaxError:
        return "string"
    messages = _message_names(tree)
    in_macros = _macro_content_params(tree, messages)
    for loop in tree.find_all(nodes.For):
        it = loop.iter
        if any(_refers_to(it, m, "content") for m in messages):
            return "openai"
        bound = in_macros.get(id(loop))
        if bound is not None:
            if isinstance(it, nodes.Name) and it.name in bound:
                return "openai"
        elif isinstance(it, nodes.Name) and it.name == "content":
            return "openai"
    return "string"


_TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text",
               "refusal": "refusal", "thinking": "thinking"}  # fmt: skip
"""Content part types vLLM reads as text, and the key that holds the text."""


def _part_text(part: Any) -> str | None:
    """The text of a text part (None for media parts and text parts without text)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return None
    key = _TEXT_PARTS.get(part.get("type", ""))
    text = part.get(key) if key is not None else None
    return text if isinstance(text, str) else None


def _content(content: Any, fmt: str, role: Any) -> Any:
    """Content as vLLM hands it to the template (``_parse_chat_message_content``).

    "string": the text parts joined with newlines, an empty text part dropped (vLLM keeps only
    parts that parse to a non-empty value). "openai": a list of ``{"type": "text", "text": ..}``
    parts (a string becomes one part; other parts pass through), except a tool message's text
    parts, which vLLM joins back into one string with newlines (empty parts kept).
    """
    parts: list[Any] = [] if content is None else [content] if isinstance(content, str) else list(content)
    if fmt == "string":
        return "\n".join(t for p in parts if (t := _part_text(p)))
    wrapped = [
        {"type": "text", "text": t} if (t := _part_text(p)) is not None else p for p in parts
    ]
    if role == "tool" and all(_part_text(p) is not None for p in parts):
        return "\n".join(p["text"] for p in wrapped)
    return wrapped


def reasoning_of_request(message: Mapping[str, Any]) -> Any:
    """An assistant message's reasoning as a vLLM chat request reads it: ``reasoning``, or the
    deprecated ``reasoning_content`` when ``reasoning`` is missing or null. (vLLM 0.32's
    ``/tokenize`` does not do this rename: there a ``reasoning_content`` is dropped, so Emil's
    /tokenize bodies carry ``reasoning`` only; see ``emil.model.tokens``.)"""
    reasoning = message.get("reasoning")
    return message.get("reasoning_content") if reasoning is None else reasoning


def text_of(content: Any, fmt: str) -> str:
    """The text a Qwen template makes of a message's content: for a template vLLM hands text
    (``fmt`` "string"), vLLM's joined text; for one that gets parts ("openai": Qwen3.5/3.6),
    the parts' texts one after another, as their ``render_content`` macro writes them."""
    if fmt == "string":
        text: str = _content(content, "string", None)
        return text
    parts: list[Any] = [] if content is None else [content] if isinstance(content, str) else list(content)
    return "".join(t for p in parts if (t := _part_text(p)) is not None)


def prepare_messages(messages: list[dict[str, Any]], fmt: str = "string") -> list[dict[str, Any]]:
    """Copy OpenAI-format messages into what the server hands the template (``fmt``: the
    template's :func:`content_format`)."""
    prepared: list[dict[str, Any]] = []
    for original in messages:
        # Only what is edited below is copied (the top level, and an assistant's tool calls):
        # the sandboxed template cannot edit the rest, and a deep copy of every message was the
        # largest cost of counting a fresh assistant message.
        message = dict(original)
        content = message.get("content")
        if not isinstance(content, str) or fmt != "string":
            message["content"] = _content(content, fmt, message.get("role"))
        if message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                if not calls:
                    message.pop("tool_calls", None)
                calls = [_copy_call(call) for call in calls]
                if calls:
                    message["tool_calls"] = calls
                for call in calls:
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict):
                        function["arguments"] = _parse_arguments(function.get("arguments"))
            # A chat request renames ``reasoning_content`` to ``reasoning`` unless ``reasoning``
            # is set (vLLM 0.32's ChatCompletionRequest), and the renderer hands the template
            # ``reasoning`` under both names.
            reasoning = reasoning_of_request(message)
            message.pop("reasoning_content", None)
            message.pop("reasoning", None)
            if reasoning is not None:
                message["reasoning"] = reasoning
                message["reasoning_content"] = reasoning
        prepared.append(message)
    return prepared


def prepare_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tool specs as vLLM hands them to the template: ``ChatCompletionToolsParam.model_dump()``.

    vLLM parses each tool into a pydantic model and dumps it back, so the template sees the
    declared fields first, in declaration order (``type``, then ``function`` with ``name``,
    ``description``, ``parameters``; a missing one as null), then any extra keys. For tools
    written in that canonical shape this changes nothing.
    """
    if tools is None:
        return None
    prepared: list[dict[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            prepared.append(tool)
            continue
        fn: dict[str, Any] = {
            "name": function.get("name"),
            "description": function.get("description"),
            "parameters": function.get("parameters"),
        }
        fn.update({k: v for k, v in function.items() if k not in fn})
        spec: dict[str, Any] = {"type": tool.get("type", "function"), "function": fn}
        spec.update({k: v for k, v in tool.items() if k not in spec})
        prepared.append(spec)
    return prepared


def _token_text(value: Any) -> str | None:
    if isinstance(value, dict):
        content = value.get("content")
        return content if isinstance(content, str) else None
    return value if isinstance(value, str) else None


class ChatTemplate:
    """A compiled chat template plus the special-token variables it may reference."""

    def __init__(
        self,
        source: str,
        *,
        origin: str = "<string>",
        special_tokens: dict[str, str] | None = None,
    ) -> None:
        self.source = source
        self.origin = origin
        self.special_tokens: dict[str, str] = dict(special_tokens or {})
        self.content_format = content_format(source)
        """How vLLM hands this template message content ("string" or "openai")."""
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"chat template from {origin} does not compile: {exc}") from exc

    def __repr__(self) -> str:
        return f"ChatTemplate(origin={self.origin!r})"

    @classmethod
    def from_source(cls, text: str, *, origin: str = "<string>") -> ChatTemplate:
        """Compile Jinja source text."""
        return cls(text, origin=origin)

    @classmethod
    def from_file(cls, path: str | Path) -> ChatTemplate:
        """Compile a template file (``.jinja``)."""
        p = Path(path)
        return cls(p.read_text(encoding="utf-8"), origin=str(p))

    @classmethod
    def from_model_dir(cls, path: str | Path) -> ChatTemplate:
        """The template of a Hugging Face model directory.

        ``chat_template.jinja`` wins (newer transformers save it there); otherwise
        ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named templates
        from which "default" is taken). bos/eos/pad/unk tokens are passed as variables.
        """
        directory = Path(path)
        config: dict[str, Any] = {}
        config_path = directory / "tokenizer_config.json"
        if config_path.is_file():
            config = json.loads(config_path.read_text(encoding="utf-8"))
        specials = {
            key: text
            for key in ("bos_token", "eos_token", "pad_token", "unk_token")
            if (text := _token_text(config.get(key))) is not None
        }
        jinja_path = directory / "chat_template.jinja"
        if jinja_path.is_file():
            return cls(
                jinja_path.read_text(encoding="utf-8"),
                origin=str(jinja_path),
                special_tokens=specials,
            )
        source = config.get("chat_template")
        if isinstance(source, list):
            named = {item.get("name"): item.get("template") for item in source}
            source = named.get("default")
        if isinstance(source, str):
            return cls(source, origin=str(config_path), special_tokens=specials)
        raise TemplateError(
            f"no chat template in {directory}: expected chat_template.jinja or a "
            "'chat_template' string in tokenizer_config.json"
        )

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        enable_thinking: bool = False,
        **template_kwargs: Any,
    ) -> str:
        """The prompt text the server builds from these OpenAI-format messages and tools."""
        return self.render_prepared(
            prepare_messages(messages, self.content_format),
            prepare_tools(tools),
            add_generation_prompt=add_generation_prompt,
            enable_thinking=enable_thinking,
            **template_kwargs,
        )

    def render_prepared(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        enable_thinking: bool = False,
        **template_kwargs: Any,
    ) -> str:
        """Render messages and tools already passed through :func:`prepare_messages` and
        :func:`prepare_tools` (no copies)."""
        variables: dict[str, Any] = dict(self.special_tokens)
        variables.update(template_kwargs)
        try:
            return self._template.render(
                messages=messages,
                tools=tools,
                add_generation_prompt=add_generation_prompt,
                enable_thinking=enable_thinking,
                **variables,
            )
        except jinja2.TemplateError as exc:
            raise TemplateError(f"chat template {self.origin} failed to render: {exc}") from exc


def packaged_template(name: str) -> ChatTemplate:
    """One of Emil's own templates (emil/model/templates/NAME), compiled."""
    text = resources.files("emil.model").joinpath("templates", name).read_text(encoding="utf-8")
    return ChatTemplate(text, origin=f"emil/model/templates/{name}")

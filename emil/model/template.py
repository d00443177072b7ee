"""Chat templates rendered exactly as transformers and vLLM render them.

The environment matches ``transformers``' chat-template compiler: a sandboxed, immutable jinja2
environment with ``trim_blocks`` and ``lstrip_blocks``, a ``tojson`` filter that keeps non-ASCII
and HTML characters as they are (``json.dumps(ensure_ascii=False)``, keys in given order), the
``raise_exception`` and ``strftime_now`` globals, loop controls and a pass-through
``{% generation %}`` block. Messages are pre-processed as vLLM does before rendering: content
takes the template's content format (vLLM's detection: a template that loops over
``message.content`` gets OpenAI-style part lists, any other gets text, text parts joined with
newlines and a missing content as ""), tool-call ``arguments`` JSON strings become mappings
(invalid or non-object JSON becomes ``{}``), an empty ``tool_calls`` list is dropped,
``reasoning`` / ``reasoning_content`` mirror each other, and tool specs are normalised as
vLLM's pydantic round trip leaves them (:func:`prepare_tools`).
"""

from __future__ import annotations

import json
import logging
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


def _loops_over_content(node: nodes.Node, messages: set[str]) -> bool:
    """vLLM's test: a ``for`` over ``m.content`` / ``m['content']`` where ``m`` ranges over
    the messages."""
    for loop in node.find_all(nodes.For):
        it = loop.iter
        target = it.node if isinstance(it, nodes.Getattr | nodes.Getitem) else None
        key = it.attr if isinstance(it, nodes.Getattr) else None
        if isinstance(it, nodes.Getitem) and isinstance(it.arg, nodes.Const):
            key = it.arg.value
        if key == "content" and isinstance(target, nodes.Name) and target.name in messages:
            return True
    return False


def content_format(source: str) -> str:
    """"openai" when the template loops over a message's content parts, else "string" (what
    vLLM's ``--chat-template-content-format auto`` decides)."""
    try:
        tree = _environment().parse(source)
    except jinja2.TemplateSyntaxError:
        return "string"
    names = {"messages"}
    for loop in tree.find_all(nodes.For):
        it, target = loop.iter, loop.target
        if isinstance(it, nodes.Name) and it.name == "messages" and isinstance(target, nodes.Name):
            names.add(target.name)
    names.discard("messages")
    return "openai" if _loops_over_content(tree, names) else "string"


def _text_parts(content: list[Any]) -> list[str]:
    return [
        str(part.get("text", "")) if isinstance(part, dict) else str(part)
        for part in content
        if not isinstance(part, dict) or part.get("type", "text") == "text" or "text" in part
    ]


def _content(content: Any, fmt: str) -> Any:
    if fmt == "string":
        if content is None:
            return ""
        if isinstance(content, list):
            return "\n".join(_text_parts(content))
        return content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content


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
            message["content"] = _content(content, fmt)
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
            reasoning = message.get("reasoning_content", message.get("reasoning"))
            if isinstance(reasoning, str):
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

"""Chat templates rendered exactly as transformers and vLLM render them.

The environment matches ``transformers``' chat-template compiler: a sandboxed, immutable jinja2
environment with ``trim_blocks`` and ``lstrip_blocks``, a ``tojson`` filter that keeps non-ASCII
and HTML characters as they are (``json.dumps(ensure_ascii=False)``, keys in given order), the
``raise_exception`` and ``strftime_now`` globals, loop controls and a pass-through
``{% generation %}`` block. Messages and tools are first prepared as vLLM 0.32 prepares them
(:mod:`emil.model.prepare`), in the content format this module detects in the template's source
as vLLM does (:func:`content_format`: a template that loops over a message's content, directly
or through a macro parameter, gets OpenAI-style part lists, any other gets text).
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
from emil.model.prepare import prepare_messages, prepare_tools

__all__ = ["ChatTemplate", "TemplateError", "content_format", "packaged_template"]

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

"""Which model family Emil counts with: resolved once at start, said where it came from.

Order: the ``model_family`` setting; else explicit local files (the ``tokenizer`` and
``chat_template`` settings: a model directory or tokenizer.json and its template); else the
served model's ``root`` in ``/v1/models``, then its ``id``; else the server's ``/tokenize``.
Never another family's template (see :mod:`emil.model.family`). A family is then checked
against the server's own count of a probe prompt (:func:`verify_family`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emil.config import Settings
from emil.exceptions import (
    ConfigurationError,
    EndpointConfigError,
    EndpointUnavailable,
    UnknownTokenizerError,
)
from emil.model.family import (
    ModelFamily,
    family_by_name,
    family_for_model,
    family_names,
    template_family,
)
from emil.model.template import ChatTemplate
from emil.model.tokens import ServerTokenizeCounter, get_token_counter

__all__ = [
    "ResolvedFamily",
    "describe_family",
    "model_dir_family",
    "resolve_family",
    "verify_family",
]

_log = logging.getLogger("emil.startup")


def model_dir_family(tokenizer: str, chat_template: str | None) -> ModelFamily:
    """A family from local files: a tokenizer (model directory or tokenizer.json) and the chat
    template (a file, else the model directory's own). Reasoning placement is the template's
    own business here: blocks are measured by probing it, and verified against whole renders."""
    counter = get_token_counter(tokenizer)
    path = Path(tokenizer).expanduser()
    if chat_template:
        template = ChatTemplate.from_file(chat_template)
    elif path.is_dir():
        template = ChatTemplate.from_model_dir(path)
    else:
        raise ConfigurationError(
            f"tokenizer {tokenizer} is not a model directory, so it has no chat template; set "
            "chat_template to the model's template file"
        )
    return template_family(counter, template)


@dataclass(frozen=True)
class ResolvedFamily:
    """A family and where it came from (for the startup log and ``--print-config``)."""

    family: ModelFamily
    source: str


def resolve_family(
    *,
    setting: str,
    served: tuple[str | None, str | None] = (None, None),
    tokenizer: str = "auto",
    chat_template: str | None = None,
    server: Callable[[], ModelFamily] | None = None,
) -> ResolvedFamily:
    """Resolve the family once: the ``model_family`` setting, else explicit local files
    (``tokenizer`` / ``chat_template`` settings), else the served model's root then id, else
    the server's /tokenize (``server`` builds that family). Never another family's template."""
    value = setting.strip().lower()
    root, model_id = served
    if value == "server":
        if server is None:
            raise ConfigurationError("model_family server needs an endpoint to count with")
        return ResolvedFamily(server(), "setting model_family=server")
    if value not in ("", "auto"):
        return ResolvedFamily(family_by_name(value), f"setting model_family={setting}")
    if tokenizer not in ("", "auto"):
        path = Path(tokenizer).expanduser()
        if path.exists():
            return ResolvedFamily(
                model_dir_family(tokenizer, chat_template), f"setting tokenizer={tokenizer}"
            )
        family = family_for_model(tokenizer)
        if family is None:
            raise UnknownTokenizerError(
                f"tokenizer {tokenizer!r} is neither a path nor a model of a shipped family "
                f"({', '.join(family_names())}); point it at a model directory or leave it on auto"
            )
        return ResolvedFamily(family, f"setting tokenizer={tokenizer}")
    if chat_template:
        raise ConfigurationError(
            "chat_template is set but tokenizer is auto: set tokenizer to the model directory "
            "(or its tokenizer.json) that goes with the template"
        )
    for what, name in (("root", root), ("id", model_id)):
        if name:
            family = family_for_model(name)
            if family is not None:
                return ResolvedFamily(family, f"served model {what} {name!r}")
    if server is None:
        raise ConfigurationError(
            f"no model family matches the served model ({root or model_id!r}) and there is no "
            "server to count with; set model_family or tokenizer"
        )
    return ResolvedFamily(
        server(),
        f"served model {root or model_id!r} matches no family and no tokenizer is set: "
        "counted by the server's /tokenize",
    )


def describe_family(s: Settings) -> str:
    """Which model family the settings select and why, as far as is known before contacting
    the server (``--print-config``; the startup log gives the final answer)."""
    try:
        resolved = resolve_family(
            setting=s.model_family,
            served=(None, None if s.model == "auto" else s.model),
            tokenizer=s.tokenizer,
            chat_template=str(s.chat_template) if s.chat_template else None,
        )
    except ConfigurationError as exc:
        if s.model_family == "server" or "no model family matches" in str(exc):
            return ("at start: the served model's root (then id) if it names a shipped family, "
                    "else counted by the server's /tokenize")
        return f"error: {exc}"
    return f"{resolved.family.name}: {resolved.family.label} ({resolved.source})"


_PROBE_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "go_to",
            "description": "Walk to a place.",
            "parameters": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer"},
                    "sprint": {"type": "boolean"},
                    "note": {"type": "string", "description": "why"},
                },
                "required": ["x"],
            },
        },
    }
]


def _probe_messages() -> list[dict[str, Any]]:
    """A short conversation that exercises what templates differ in: system and tools, a call
    with string, boolean and number arguments, reasoning, a tool result, a second query."""
    arguments = json.dumps({"x": 12, "sprint": True, "note": "über den Fluss"}, ensure_ascii=False)
    return [
        {"role": "system", "content": "You are a probe."},
        {"role": "user", "content": "[events]\n- alex says: come here"},
        {
            "role": "assistant",
            "content": "On my way.",
            "reasoning": "alex wants me near.",
            "tool_calls": [{"id": "p1", "type": "function",
                            "function": {"name": "go_to", "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": "p1", "content": "arrived at (12, 64, -3)"},
        {"role": "user", "content": "[events]\n- alex says: thanks"},
    ]


async def verify_family(
    resolved: ResolvedFamily,
    counter: ServerTokenizeCounter,
    *,
    enable_thinking: bool,
    preserve_thinking: bool,
    server: Callable[[], ModelFamily],
) -> ResolvedFamily:
    """Check a family against the server's own count of a probe prompt (``/tokenize``).

    A served name can belong to a family while the server renders another template (a
    re-packaging with a "fixed" template, another revision). Then a family chosen by the
    operator is a configuration error, and one guessed from the served name gives way to the
    server's /tokenize, with a warning. A server without /tokenize leaves the family as it is.
    """
    family = resolved.family
    if family.template is None:
        return resolved
    kwargs = family.template_kwargs(enable_thinking=enable_thinking, preserve_thinking=preserve_thinking)
    preserve = kwargs.get("preserve_thinking")
    messages = _probe_messages()
    text = family.template().render(
        messages, _PROBE_TOOLS, enable_thinking=enable_thinking,
        **({"preserve_thinking": True} if preserve else {}),
    )
    local = family.tokenizer().count(text)
    try:
        remote = await counter.count_prompt(
            messages, _PROBE_TOOLS, enable_thinking=enable_thinking, preserve_thinking=preserve
        )
    except (EndpointConfigError, EndpointUnavailable) as exc:
        _log.info("model family %s not checked against the server (/tokenize: %s)", family.name, exc)
        return resolved
    if local == remote:
        return ResolvedFamily(family, f"{resolved.source}; the server's /tokenize agrees")
    why = (
        f"model family {family.name} ({resolved.source}) counts a probe prompt as {local} "
        f"tokens but the server counts {remote}: the served chat template is not that family's"
    )
    if resolved.source.startswith("setting"):
        raise ConfigurationError(
            f"{why}; set model_family = \"server\" to count with the server's /tokenize, or point "
            "tokenizer at the served model's directory"
        )
    _log.warning("%s; counting with the server's /tokenize instead", why)
    return ResolvedFamily(server(), f"{why}; counted by the server's /tokenize")

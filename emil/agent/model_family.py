"""Which model family Emil counts with: resolved once at start, said where it came from.

Order: the ``model_family`` setting; else explicit local files (the ``tokenizer`` and
``chat_template`` settings: a model directory or tokenizer.json and its template); else the
served model's ``root`` in ``/v1/models``, then its ``id``; else the server's ``/tokenize``.
Never another family's template (see :mod:`emil.context.family`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emil.config import Settings
from emil.context.family import (
    ModelFamily,
    family_by_name,
    family_for_model,
    family_names,
    template_family,
)
from emil.context.template import ChatTemplate
from emil.context.tokens import get_token_counter
from emil.exceptions import ConfigurationError, UnknownTokenizerError

__all__ = ["ResolvedFamily", "describe_family", "model_dir_family", "resolve_family"]


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

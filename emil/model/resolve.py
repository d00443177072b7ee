"""From a name to what counts it: model names, settings and recordings resolved to a family.

Everything that turns words into a :class:`~emil.model.family.ModelFamily` or a token counter
lives here, so no other package tests model names:

- :func:`get_token_counter`: a model name (of a shipped family), a tokenizer.json, a model
  directory or ``"heuristic"`` -> its exact counter (never a silent fallback);
- :func:`resolve_family`: a live session's family, once at start, said where it came from:
  the ``model_family`` setting; else explicit local files (the ``tokenizer`` and
  ``chat_template`` settings); else the served model's ``root`` in ``/v1/models``, then its
  ``id``; else the server's ``/tokenize``. Never another family's template;
- :func:`family_for_recording`: the family a recording was counted with, from its header
  (offline tools and replay).

The startup check of a resolved family against the server's own count is
:mod:`emil.model.verify`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from emil.exceptions import ConfigurationError, UnknownTokenizerError
from emil.model.family import (
    DEFAULT_FAMILY,
    ModelFamily,
    family_by_name,
    family_for_model,
    family_names,
    template_family,
)
from emil.model.template import ChatTemplate
from emil.model.tokens import TokenCounter, counter_from_files

__all__ = [
    "ModelSettings",
    "RecordedModel",
    "ResolvedFamily",
    "counter_for_recording",
    "describe_family",
    "family_for_recording",
    "get_token_counter",
    "model_dir_family",
    "resolve_family",
]

_OPTIONS = (
    "a model name of a shipped family (e.g. 'qwen3.6', 'Qwen/Qwen3.6-35B-A3B', "
    "'unsloth/Qwen3.6-35B-A3B-NVFP4-Fast', 'Qwen/Qwen3-8B', 'Qwen/Qwen3-30B-A3B-Instruct-2507', "
    "'Qwen/Qwen3-Coder-30B-A3B-Instruct'), a path to a tokenizer.json, a model directory "
    "containing tokenizer.json, or 'heuristic' (4 chars/token, for comparisons only)"
)


def get_token_counter(spec: str) -> TokenCounter:
    """The exact counter for a model name (of a shipped family), a tokenizer.json path or a
    model directory.

    ``"heuristic"`` returns the 4-chars estimate (comparisons only). Anything else that is not
    recognised raises :class:`UnknownTokenizerError` naming the options; there is no fallback.
    Counters are cached, so every name of one vocabulary shares one loaded instance.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownTokenizerError(f"no tokenizer given; expected {_OPTIONS}")
    try:
        counter = counter_from_files(spec)
    except UnknownTokenizerError as e:
        raise UnknownTokenizerError(f"{e}; expected {_OPTIONS}") from e
    if counter is not None:
        return counter
    family = family_for_model(spec)
    if family is not None:
        return family.tokenizer()
    raise UnknownTokenizerError(f"unknown tokenizer {spec!r}; expected {_OPTIONS}")


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


class ModelSettings(Protocol):
    """The settings that choose a model family (a typed slice of :class:`emil.config.Settings`)."""

    @property
    def model_family(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def tokenizer(self) -> str: ...
    @property
    def chat_template(self) -> Path | None: ...


def describe_family(s: ModelSettings) -> str:
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


class RecordedModel(Protocol):
    """What a recording's header says about the model (:class:`emil.recording.HeaderRecord`)."""

    @property
    def settings(self) -> Mapping[str, Any]: ...
    @property
    def model(self) -> str | None: ...
    @property
    def tokenizer(self) -> str | None: ...
    @property
    def chat_template(self) -> str | None: ...
    @property
    def model_family(self) -> str | None: ...


_OLD_QWEN_COUNTER = "qwen3.5/3.6"
"""How the Qwen3.5/3.6 counter named itself in headers written before families existed."""


def _named(header: RecordedModel, model_family: str | None) -> ModelFamily | None:
    setting = header.settings.get("model_family")
    for name in (model_family, header.model_family, setting):
        if isinstance(name, str) and name not in ("", "auto", "server", "model-dir"):
            return family_by_name(name)
    for spec in (header.settings.get("tokenizer"), header.model, header.tokenizer):
        if isinstance(spec, str) and spec not in ("", "auto"):
            family = family_for_model(spec)
            if family is not None:
                return family
    if header.tokenizer and header.tokenizer.lower().startswith(_OLD_QWEN_COUNTER):
        return family_by_name(DEFAULT_FAMILY)  # before families, that counter meant Qwen3.6's template
    return None


def family_for_recording(
    header: RecordedModel | None,
    override: str | None = None,
    *,
    model_family: str | None = None,
) -> ModelFamily:
    """The family to count a recording with: ``override`` (a model name, or a tokenizer.json /
    model directory, used with the recorded chat template), else ``model_family``, else what the
    header says (its family, its settings, its served model, the counter it named). Never a
    silent default: a recording that names nothing usable raises, asking for --tokenizer."""
    recorded = (
        ChatTemplate.from_source(header.chat_template, origin="the recording's chat template")
        if header is not None and header.chat_template
        else None
    )
    if override:
        if Path(override).expanduser().exists() or override == "heuristic":
            counter = get_token_counter(override)
            if recorded is not None:
                return template_family(counter, recorded)
            if Path(override).expanduser().is_dir():
                return template_family(counter, ChatTemplate.from_model_dir(override))
            raise ConfigurationError(
                f"--tokenizer {override} has no chat template and the recording holds none; "
                "pass a model directory"
            )
        family = family_for_model(override)
        if family is None:
            raise UnknownTokenizerError(f"--tokenizer {override!r} is no model of a shipped family")
        return family
    if model_family is not None and header is None:
        return family_by_name(model_family)
    if header is not None:
        family = _named(header, model_family)
        if recorded is not None:
            if family is not None:
                return template_family(family.tokenizer(), recorded)
            if header.tokenizer:
                return template_family(get_token_counter(header.tokenizer), recorded)
        if family is not None:
            return family
    raise UnknownTokenizerError(
        "cannot tell which model family this recording was counted with "
        f"(model {header.model if header else None!r}); pass --tokenizer "
        "(e.g. Qwen/Qwen3.6-35B-A3B, Qwen/Qwen3-8B, or a model directory)"
    )


def counter_for_recording(header: RecordedModel | None, override: str | None = None) -> TokenCounter:
    """The token counter of :func:`family_for_recording` (tools that only count text)."""
    if override and (Path(override).expanduser().exists() or override == "heuristic"):
        return get_token_counter(override)
    return family_for_recording(header, override).tokenizer()

"""Which model family (tokenizer, chat template) a recording was counted with, from its header."""

from __future__ import annotations

from pathlib import Path

from emil.exceptions import ConfigurationError, UnknownTokenizerError
from emil.model.family import (
    ModelFamily,
    family_by_name,
    family_for_model,
    template_family,
)
from emil.model.template import ChatTemplate
from emil.model.tokens import TokenCounter, get_token_counter
from emil.recording import HeaderRecord

__all__ = ["counter_for", "family_for"]

_OLD_QWEN_COUNTER = "qwen3.5/3.6"
"""How the Qwen3.5/3.6 counter named itself in headers written before families existed."""


def _named(header: HeaderRecord, model_family: str | None) -> ModelFamily | None:
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
        return family_by_name("qwen3.6")  # before families, that counter meant Qwen3.6's template
    return None


def family_for(
    header: HeaderRecord | None,
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


def counter_for(header: HeaderRecord | None, override: str | None = None) -> TokenCounter:
    """The token counter of :func:`family_for` (tools that only count text)."""
    if override and (Path(override).expanduser().exists() or override == "heuristic"):
        return get_token_counter(override)
    return family_for(header, override).tokenizer()

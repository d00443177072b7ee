"""Which tokenizer a recording was counted with, from its header."""

from __future__ import annotations

from emil.context.tokens import TokenCounter, get_token_counter
from emil.exceptions import UnknownTokenizerError
from emil.recording import HeaderRecord

__all__ = ["counter_for"]

_QWEN_NAME_PREFIX = "qwen3.5/3.6"
"""How the Qwen3.5/3.6 counter names itself (a header records the counter's name)."""


def _candidates(header: HeaderRecord | None) -> list[str]:
    if header is None:
        return []
    out: list[str] = []
    setting = header.settings.get("tokenizer")
    if isinstance(setting, str) and setting not in ("", "auto"):
        out.append(setting)
    if header.model:
        out.append(header.model)
    if header.tokenizer:
        out.append(header.tokenizer)
        if header.tokenizer.lower().startswith(_QWEN_NAME_PREFIX):
            out.append("qwen3.6")
    return out


def counter_for(header: HeaderRecord | None, override: str | None = None) -> TokenCounter:
    """The counter named by ``override``, else the one the session used (its tokenizer setting,
    its served model, or the counter name it recorded). Never a silent default: a recording
    that names nothing usable raises UnknownTokenizerError asking for --tokenizer."""
    if override:
        return get_token_counter(override)
    tried = _candidates(header)
    for spec in tried:
        try:
            return get_token_counter(spec)
        except UnknownTokenizerError:
            continue
    raise UnknownTokenizerError(
        "cannot tell which tokenizer this recording used "
        f"(tried {', '.join(map(repr, tried)) or 'nothing: no header'}); pass --tokenizer "
        "(e.g. qwen3.6, a tokenizer.json path or a model directory)"
    )

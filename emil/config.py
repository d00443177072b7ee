"""Typed settings from three layers: emil.toml < EMIL_* environment < command-line flags.

Every field of :class:`Settings` is one key in emil.toml, one ``EMIL_<NAME>`` variable and one
``--<name>`` flag (underscores become dashes); the flags are derived from the model, never
written twice. :func:`load_settings` keeps, for each field, where its value came from, so
``--print-config`` can show it. A bad value raises :class:`~emil.exceptions.ConfigurationError`
naming the field, the value, its source and the fix.
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from emil.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "LoadedSettings",
    "Settings",
    "add_settings_flags",
    "flags_from_namespace",
    "format_settings",
    "load_settings",
]

DEFAULT_CONFIG_FILE = Path("emil.toml")
_ENV_PREFIX = "EMIL_"
_SECRET_FIELDS = frozenset({"api_key"})

class Settings(BaseModel):
    """Everything an operator can set. Defaults match the field notes' serving setup."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    # --- LLM endpoint -------------------------------------------------------------------
    endpoint: str = "http://127.0.0.1:8000/v1"
    """OpenAI-compatible base URL of the vLLM server (ends in /v1)."""
    api_key: str = "EMPTY"
    model: str = "auto"
    """Served model id; "auto" takes the one the server serves (it must serve exactly one)."""
    tokenizer: str = "auto"
    """Tokenizer spec for exact counting; "auto" derives it from the model name."""
    chat_template: Path | None = None
    """Jinja chat template file; unset = the shipped default for the model family."""
    window: int | None = Field(default=None, gt=0)
    """Context window; unset ("auto") = the server's max_model_len. Only ever lowers it."""
    output_reserve: int = Field(default=6144, gt=0)
    """Tokens reserved for the model's answer (max_completion_tokens)."""
    prompt_budget: int | None = Field(default=None, gt=0)
    """Prompt budget; unset = window - output_reserve - safety margin."""
    enable_thinking: bool = False
    preserve_thinking: bool = True
    """Keep earlier turns' reasoning in the prompt (``chat_template_kwargs.preserve_thinking``).

    Only matters when enable_thinking is on: Qwen3.5/3.6's template otherwise strips old
    <think> blocks once a new user message arrives, so each prompt rewrites the previous one
    and the server's prefix cache misses. The served template must support the kwarg; if it
    ignores it, the calibration sees the difference between predicted and actual prompt
    tokens and widens the margin.
    """
    temperature: float | None = Field(default=None, ge=0)
    request_timeout_s: float = Field(default=120.0, gt=0)
    max_overflow_retries: int = Field(default=2, ge=0, le=5)
    endpoint_wait_s: float | None = Field(default=None, gt=0)
    """How long to wait for an unreachable endpoint at start; unset = wait until stopped."""

    # --- Minecraft ----------------------------------------------------------------------
    mc_host: str = "127.0.0.1"
    mc_port: int = Field(default=25565, gt=0, lt=65536)
    mc_version: str = "1.20.4"
    bot_name: str = "Emil"
    operators: tuple[str, ...] = ()
    """Player names allowed operator-only behaviour."""
    allow_commands: bool = False
    """Let say/whisper send text starting with "/"."""
    reflexes: tuple[Literal["defend", "flee", "eat", "unstuck"], ...] = ("defend", "flee", "eat", "unstuck")
    """Reflexes switched on in the bot module (they act without the model)."""

    # --- Agent loop ---------------------------------------------------------------------
    step_limit: int = Field(default=8, ge=1)
    """Model calls per turn before the turn ends anyway."""
    action_timeout_s: float = Field(default=240.0, gt=0)
    """Backstop per tool call; each tool has its own, shorter limit in the bot bridge."""
    chat_debounce_s: float = Field(default=0.4, ge=0)
    """Wait this long after a chat line for more lines before starting a turn."""
    low_health: float = Field(default=6.0, ge=0)
    """Health at or below this is urgent (20 = full)."""
    hostile_urgent_distance: float = Field(default=8.0, ge=0)
    prompts_dir: Path | None = None
    """Persona and rules templates; unset = the prompts/ shipped with Emil."""
    recording_dir: Path = Path("recordings")
    data_dir: Path = Path("data")
    """Emil's notes that survive a restart (memory.sqlite3); one running Emil per directory."""
    memory_tokens: int = Field(default=800, ge=0)
    """Token bound of the pinned notes block in every prompt; 0 = notes kept but not shown."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)")
        return v.rstrip("/")

    @field_validator("window", "prompt_budget", "endpoint_wait_s", "chat_template", "prompts_dir", "temperature", mode="before")
    @classmethod
    def _auto_is_unset(cls, v: Any) -> Any:
        return None if isinstance(v, str) and v.strip().lower() in ("auto", "", "none") else v

    @field_validator("operators", "reflexes", mode="before")
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(p.strip() for p in v.split(",") if p.strip())
        return v

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    def public_dump(self) -> dict[str, Any]:
        """Settings as JSON-able data with secrets masked (for recordings and logs)."""
        data = self.model_dump(mode="json")
        for k in _SECRET_FIELDS:
            if data.get(k) not in (None, "", "EMPTY"):
                data[k] = "***"
        return data


class LoadedSettings(BaseModel):
    """Settings plus where each value came from."""

    model_config = ConfigDict(frozen=True)

    settings: Settings
    sources: dict[str, str]
    """field -> "default" | "file <path>" | "env EMIL_X" | "flag --x"."""
    config_file: Path | None = None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per settings field (values stay strings; pydantic validates them)."""
    group = parser.add_argument_group("settings (emil.toml < EMIL_* env < flags)")
    group.add_argument("--config", metavar="PATH", help=f"settings file (default ./{DEFAULT_CONFIG_FILE} if present; env EMIL_CONFIG)")
    for name, info in Settings.model_fields.items():
        helptext = (info.description or "").split("\n")[0] or None
        dest = f"set_{name}"
        if info.annotation is bool:
            group.add_argument(_flag(name), dest=dest, action=argparse.BooleanOptionalAction, default=None, help=helptext)
        else:
            group.add_argument(_flag(name), dest=dest, metavar="VALUE", default=None, help=helptext)


def _explain(err: ValidationError, sources: Mapping[str, str], raw: Mapping[str, Any]) -> str:
    first = err.errors()[0]
    loc = str(first["loc"][0]) if first["loc"] else "?"
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(loc, list(Settings.model_fields), n=1)
        hint = f"did you mean '{close[0]}'?" if close else "see `run_emil.py --print-config` for the known settings"
        return f"unknown setting '{loc}' ({sources.get(loc, 'file')}): {hint}"
    src = sources.get(loc, "default")
    value = raw.get(loc, "<default>")
    info = Settings.model_fields.get(loc)
    default = info.default if info is not None else None
    return (
        f"bad setting {loc}={value!r} ({src}): {first['msg']}; "
        f"fix it there or remove it to use the default ({default!r})"
    )


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigurationError(f"cannot read config file {path}: {e.strerror}; fix the path or pass --config") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"config file {path} is not valid TOML ({e}); fix the syntax") from e
    # Sections are allowed for readability; their keys are flattened ([llm] window = ... -> window).
    flat: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            flat.update(v)
        else:
            flat[k] = v
    return flat


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_file: str | Path | None = None,
) -> LoadedSettings:
    """Merge defaults < file < environment < flags and validate.

    ``flags`` maps field names to values (None = not given). ``config_file`` None means
    ``EMIL_CONFIG`` or ``./emil.toml`` when it exists; an explicitly named file must exist.
    """
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}

    explicit = config_file if config_file is not None else env.get(f"{_ENV_PREFIX}CONFIG")
    path: Path | None = Path(explicit) if explicit else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    if path is not None:
        for k, v in _read_file(path).items():
            raw[k] = v
            sources[k] = f"file {path}"
    for name in Settings.model_fields:
        key = f"{_ENV_PREFIX}{name.upper()}"
        if key in env:
            raw[name] = env[key]
            sources[name] = f"env {key}"
    for name, v in (flags or {}).items():
        if v is not None:
            raw[name] = v
            sources[name] = f"flag {_flag(name)}"
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as e:
        raise ConfigurationError(_explain(e, sources, raw)) from e
    full = {name: sources.get(name, "default") for name in Settings.model_fields}
    return LoadedSettings(settings=settings, sources=full, config_file=path)


def flags_from_namespace(ns: argparse.Namespace) -> dict[str, Any]:
    """The settings flags given on a parsed command line (see :func:`add_settings_flags`)."""
    return {name: getattr(ns, f"set_{name}", None) for name in Settings.model_fields}


def format_settings(loaded: LoadedSettings, resolved: Mapping[str, Any] | None = None) -> str:
    """``--print-config`` text: every effective value and its source, one per line.

    ``resolved`` adds values discovered at start (served model, window) for fields left on auto.
    """
    data = loaded.settings.public_dump()
    width = max(len(n) for n in data)
    lines = []
    if loaded.config_file is not None:
        lines.append(f"# config file: {loaded.config_file}")
    for name, value in data.items():
        shown = "auto" if value is None and name in ("window", "prompt_budget", "endpoint_wait_s", "chat_template", "prompts_dir", "temperature") else value
        text = f"{name:<{width}} = {_toml_value(shown)}"
        note = loaded.sources[name]
        if resolved and name in resolved:
            note += f"; resolved: {resolved[name]}"
        lines.append(f"{text:<60}  # {note}")
    return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, Sequence):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return str(v)

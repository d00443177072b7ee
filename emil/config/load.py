"""Settings from three layers, emil.toml < EMIL_* environment < command-line flags, with sources.

Every field of :class:`~emil.config.settings.Settings` is one key in emil.toml, one
``EMIL_<NAME>`` variable and one ``--<name>`` flag (underscores become dashes); the flags are
derived from the model, never written twice. :func:`load_settings` keeps, for each field, where
its value came from, so ``--print-config`` can show it (:func:`format_settings`).
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from emil.config.settings import AUTO_FIELDS, ENV_PREFIX, Settings
from emil.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "OTHER_ENV_VARS",
    "LoadedSettings",
    "add_settings_flags",
    "flags_from_namespace",
    "format_settings",
    "load_settings",
]

DEFAULT_CONFIG_FILE = Path("emil.toml")

OTHER_ENV_VARS = frozenset({"EMIL_CONFIG", "EMIL_NO_BOOTSTRAP", "EMIL_JS_DIR", "EMIL_JS_MODULES", "EMIL_TEST_RUN",
                            "EMIL_VLLM_CPU_ENV", "EMIL_REAL_MODEL_DIR", "EMIL_REAL_MODEL_URL"})
"""EMIL_* variables that are not settings (config file, bootstrap, Node module folders, the test
run a process belongs to: emil.testing.processes; where the CPU vLLM and the real model are
cached, a running real-model server for its tier: docs/serving.md); any other EMIL_* variable
must name a setting, so a typo is an error instead of being ignored."""


class LoadedSettings(BaseModel):
    """Settings plus where each value came from."""

    model_config = ConfigDict(frozen=True)

    settings: Settings
    sources: dict[str, str]
    """field -> "default" | "file <path>" | "env EMIL_X" | "flag --x"."""
    config_file: Path | None = None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _default_text(name: str) -> str:
    """A field's default as an operator writes it (auto, comma lists, plain values)."""
    info = Settings.model_fields[name]
    default = info.get_default(call_default_factory=True)
    if default is None:
        return "auto"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return ",".join(str(x) for x in default) or "none"
    return str(default)


def _help(name: str) -> str:
    """--help text of a settings flag: the field's docstring (first paragraph), its default and
    its environment variable."""
    info = Settings.model_fields[name]
    doc = " ".join((info.description or "").split("\n\n")[0].split())
    # argparse %-formats help strings
    doc = doc.replace("%", "%%")
    return f"{doc} (default: {_default_text(name)}; env {ENV_PREFIX}{name.upper()})".strip()


def _metavar(name: str) -> str:
    annotation = Settings.model_fields[name].annotation
    choices = get_args(annotation) if get_origin(annotation) is Literal else ()
    if choices:
        return "{" + ",".join(str(c) for c in choices) + "}"
    text = str(annotation)
    if "Path" in text:
        return "PATH"
    if "int" in text:
        return "N"
    if "float" in text:
        return "SECONDS" if name.endswith("_s") else "NUMBER"
    return "VALUE"


def add_settings_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per settings field (values stay strings; pydantic validates them)."""
    group = parser.add_argument_group("settings (emil.toml < EMIL_* env < flags)")
    group.add_argument("--config", metavar="PATH", help=f"settings file (default: ./{DEFAULT_CONFIG_FILE} if present; env EMIL_CONFIG)")
    for name, info in Settings.model_fields.items():
        dest = f"set_{name}"
        if info.annotation is bool:
            group.add_argument(_flag(name), dest=dest, action=argparse.BooleanOptionalAction, default=None, help=_help(name))
        else:
            group.add_argument(_flag(name), dest=dest, metavar=_metavar(name), default=None, help=_help(name))


def _did_you_mean(word: str, options: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean '{close[0]}'?" if close else "see `python3 run_emil.py --help` for the known settings"


def _explain(err: ValidationError, sources: Mapping[str, str], raw: Mapping[str, Any]) -> str:
    first = err.errors()[0]
    if not first["loc"]:  # a check across fields (the budget arithmetic)
        msg = str(first["msg"]).removeprefix("Value error, ")
        where = [f"{n}: {sources[n]}" for n in Settings.model_fields if n in msg and n in sources]
        return f"bad settings: {msg}" + (f" ({'; '.join(where)})" if where else "")
    loc = str(first["loc"][0])
    if first["type"] == "extra_forbidden":
        return f"unknown setting '{loc}' ({sources.get(loc, 'file')}): {_did_you_mean(loc, list(Settings.model_fields))}"
    src = sources.get(loc, "default")
    value = raw.get(loc, "<default>")
    return (
        f"bad setting {loc}={value!r} ({src}): {first['msg']}; "
        f"fix it there or remove it to use the default ({_default_text(loc) if loc in Settings.model_fields else '?'})"
    )


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The file's settings, flattened, and where in the file each one was set."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigurationError(f"cannot read config file {path}: {e.strerror}; fix the path or pass --config") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"config file {path} is not valid TOML ({e}); fix the syntax") from e
    # Sections are allowed for readability; their keys are flattened ([llm] window = ... -> window).
    flat: dict[str, Any] = {}
    where: dict[str, str] = {}
    for k, v in data.items():
        items = v.items() if isinstance(v, dict) else [(k, v)]
        place = f"[{k}]" if isinstance(v, dict) else "the top level"
        for key, value in items:
            if key in where:
                raise ConfigurationError(
                    f"setting '{key}' is set twice in {path}: at {where[key]} and in {place}; keep one of them"
                )
            flat[key] = value
            where[key] = place
    return flat, where


def _check_env_names(env: Mapping[str, str]) -> None:
    known = {f"{ENV_PREFIX}{n.upper()}" for n in Settings.model_fields} | OTHER_ENV_VARS
    for key in sorted(env):
        if key.startswith(ENV_PREFIX) and key not in known:
            raise ConfigurationError(
                f"unknown environment variable {key}: {_did_you_mean(key, sorted(known))} "
                f"(every setting NAME is {ENV_PREFIX}NAME; unset {key} or fix its name)"
            )


def load_settings(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_file: str | Path | None = None,
) -> LoadedSettings:
    """Merge defaults < file < environment < flags and validate.

    ``flags`` maps field names to values (None = not given). ``config_file`` None means
    ``EMIL_CONFIG`` or ``./emil.toml`` when it exists; an explicitly named file must exist.
    An ``EMIL_*`` variable that names no setting, or a key set twice in the file, is an error.
    """
    env = os.environ if env is None else env
    _check_env_names(env)
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}

    explicit = config_file if config_file is not None else env.get(f"{ENV_PREFIX}CONFIG")
    path: Path | None = Path(explicit) if explicit else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    if path is not None:
        values, where = _read_file(path)
        for k, v in values.items():
            raw[k] = v
            sources[k] = f"file {path}" + (f" {where[k]}" if where[k].startswith("[") else "")
    for name in Settings.model_fields:
        key = f"{ENV_PREFIX}{name.upper()}"
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
        shown = "auto" if value is None and name in AUTO_FIELDS else value
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

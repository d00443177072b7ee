"""Settings from three layers, emil.toml < EMIL_* environment < command-line flags, with sources.

Every field of :class:`~emil.config.settings.Settings` is one key in emil.toml, one
``EMIL_<NAME>`` variable and one ``--<name>`` flag (underscores become dashes); the flags are
derived from the model, never written twice. :func:`load_settings` keeps, for each field, where
its value came from, so ``--print-config`` can show it (:func:`format_settings`).

A fleet (docs/fleet.md) is the same file with ``[[npc]]`` tables, one per NPC: its ``name``
(the NPC's ``bot_name``), ``metrics_port`` (the port of ``metrics_address``) and any setting it
overrides. One NPC's settings are the same three layers with its table laid over the file's top
level (file top < its [[npc]] table < EMIL_* env < flags): ``load_settings(npc=NAME)``, what
``run_emil.py live --npc NAME`` and every generated unit run. The fleet's other names are added
to each NPC's ``npc_players`` (Emils know each other as NPCs, docs/trust.md).
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from emil.config.settings import (
    AUTO_FIELDS,
    ENV_PREFIX,
    SECRET_FIELDS,
    Settings,
    parse_address,
    valid_name,
)
from emil.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "NPC_ENV",
    "OTHER_ENV_VARS",
    "ConfigFile",
    "LoadedSettings",
    "NpcTable",
    "SettingsError",
    "add_settings_flags",
    "config_path",
    "flags_from_namespace",
    "format_settings",
    "load_recorded_settings",
    "load_settings",
    "read_config_file",
    "validate_settings",
]

DEFAULT_CONFIG_FILE = Path("emil.toml")

NPC_ENV = "EMIL_NPC"
"""Which NPC of the config file's fleet to run (what ``--npc NAME`` says; a container's way)."""
OTHER_ENV_VARS = frozenset({"EMIL_CONFIG", NPC_ENV, "EMIL_NO_BOOTSTRAP", "EMIL_JS_DIR", "EMIL_JS_MODULES",
                            "EMIL_TEST_RUN", "EMIL_VLLM_CPU_ENV", "EMIL_REAL_MODEL_DIR", "EMIL_REAL_MODEL_URL"})
"""EMIL_* variables that are not settings (config file, the fleet's NPC, bootstrap, Node module
folders, the test run a process belongs to: emil.testing.processes; where the CPU vLLM and the
real model are cached, a running real-model server for its tier: docs/serving.md); any other
EMIL_* variable must name a setting, so a typo is an error instead of being ignored."""

NPC_TABLE = "npc"
"""The key of the fleet's tables: ``[[npc]]``."""
NPC_KEYS = frozenset({"name", "metrics_port"})
"""Keys of an ``[[npc]]`` table that are not settings: ``name`` is its bot_name,
``metrics_port`` the port of its metrics_address."""


class SettingsError(ConfigurationError):
    """Settings that do not validate, with every problem found (``str()`` is the first one)."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(problems[0])
        self.problems = tuple(problems)


@dataclass(frozen=True)
class NpcTable:
    """One ``[[npc]]`` table of a config file: the NPC's name and its settings, as written."""

    name: str
    values: dict[str, Any]
    """Its settings (sections flattened), ``metrics_port`` included; ``name`` left out."""
    where: str
    """Where it is, for messages: ``[[npc]] Mira``."""


@dataclass(frozen=True)
class ConfigFile:
    """A config file read: the top level's settings and the fleet's tables (none: one Emil)."""

    path: Path
    values: dict[str, Any]
    where: dict[str, str]
    """Where in the file each top-level setting was set (``the top level``, ``[llm]``)."""
    npcs: tuple[NpcTable, ...] = ()

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.npcs]


class LoadedSettings(BaseModel):
    """Settings plus where each value came from."""

    model_config = ConfigDict(frozen=True)

    settings: Settings
    sources: dict[str, str]
    """field -> "default" | "file <path>" | "file <path> [[npc]] <name>" | "env EMIL_X" | "flag --x"."""
    config_file: Path | None = None
    npc: str | None = None
    """The NPC of the file's fleet these settings are (None: the file has no fleet)."""


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


def _explain(err: ValidationError, sources: Mapping[str, str], raw: Mapping[str, Any]) -> list[str]:
    """Every problem of ``err``, one line each naming the setting, its source and the fix."""
    out = []
    for error in err.errors():
        if not error["loc"]:  # a check across fields (the budget arithmetic)
            msg = str(error["msg"]).removeprefix("Value error, ")
            where = [f"{n}: {sources[n]}" for n in Settings.model_fields if n in msg and n in sources]
            out.append(f"bad settings: {msg}" + (f" ({'; '.join(where)})" if where else ""))
            continue
        loc = str(error["loc"][0])
        if error["type"] == "extra_forbidden":
            out.append(f"unknown setting '{loc}' ({sources.get(loc, 'file')}): "
                       f"{_did_you_mean(loc, list(Settings.model_fields))}")
            continue
        src = sources.get(loc, "default")
        value = raw.get(loc, "<default>")
        out.append(
            f"bad setting {loc}={value!r} ({src}): {error['msg']}; "
            f"fix it there or remove it to use the default ({_default_text(loc) if loc in Settings.model_fields else '?'})"
        )
    return list(dict.fromkeys(out))


def _flatten(path: Path, data: Mapping[str, Any], *, inside: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """Sections are allowed for readability; their keys are flattened ([llm] window = ... -> window)."""
    flat: dict[str, Any] = {}
    where: dict[str, str] = {}
    for k, v in data.items():
        items = v.items() if isinstance(v, dict) else [(k, v)]
        place = f"[{k}]" if isinstance(v, dict) else "the top level"
        for key, value in items:
            if key in where:
                raise ConfigurationError(
                    f"setting '{key}' is set twice in {path}{inside}: at {where[key]} and in {place}; keep one of them"
                )
            flat[key] = value
            where[key] = place
    return flat, where


def read_config_file(path: Path) -> ConfigFile:
    """The file's settings, flattened, where each was set, and its ``[[npc]]`` tables."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigurationError(f"cannot read config file {path}: {e.strerror}; fix the path or pass --config") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"config file {path} is not valid TOML ({e}); fix the syntax") from e
    tables = data.pop(NPC_TABLE, [])
    if isinstance(tables, dict):
        raise ConfigurationError(f"{path} has an [npc] table; write [[npc]] (two brackets), one table per NPC")
    if not isinstance(tables, list) or not all(isinstance(x, dict) for x in tables):
        raise ConfigurationError(f"npc in {path} must be [[npc]] tables, one per NPC (docs/fleet.md)")
    flat, where = _flatten(path, data)
    npcs: list[NpcTable] = []
    for i, table in enumerate(tables, start=1):
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"[[npc]] number {i} in {path} has no name; give it name = \"...\" (its bot_name)")
        if name in {n.name for n in npcs}:
            raise ConfigurationError(f"two [[npc]] tables in {path} are named {name}; every NPC needs its own name")
        values, _ = _flatten(path, {k: v for k, v in table.items() if k != "name"}, inside=f" [[npc]] {name}")
        npcs.append(NpcTable(name, values, f"[[npc]] {name}"))
    return ConfigFile(path, flat, where, tuple(npcs))


def config_path(config_file: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The config file in force: ``config_file``, else ``EMIL_CONFIG``, else ``./emil.toml`` if
    it exists (None: no file)."""
    env = os.environ if env is None else env
    explicit = config_file if config_file is not None else env.get(f"{ENV_PREFIX}CONFIG")
    return Path(explicit) if explicit else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)


def _npc_layer(file: ConfigFile, name: str) -> tuple[dict[str, Any], list[str]]:
    """One NPC's table as settings (``name`` -> bot_name, ``metrics_port`` -> metrics_address),
    and the problems of its fleet-only keys."""
    table = next(n for n in file.npcs if n.name == name)
    values = dict(table.values)
    problems = []
    if not valid_name(name):
        problems.append(f"name {name!r} ({table.where}) is not a Minecraft name (1-16 letters, digits or _); rename it")
    if "bot_name" in values:
        problems.append(f"bot_name in {table.where}: an NPC's bot_name is its name; remove bot_name from the table")
        values.pop("bot_name")
    values["bot_name"] = name
    if "metrics_port" in values:
        port = values.pop("metrics_port")
        if "metrics_address" in values:
            problems.append(f"{table.where} sets both metrics_port and metrics_address; keep one of them")
        elif isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            problems.append(f"bad metrics_port={port!r} ({table.where}): must be a port, 0..65535 (0 = any free port); "
                            "fix it there")
        else:
            base = file.values.get("metrics_address", Settings.model_fields["metrics_address"].default)
            try:
                parsed = parse_address(str(base))
            except ValueError:
                parsed = None  # the top level's own error says it
            host = parsed[0] if parsed else "127.0.0.1"
            values["metrics_address"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return values, problems


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, (list, tuple)):
        return [str(p) for p in value]
    return []


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
    npc: str | None = None,
) -> LoadedSettings:
    """Merge defaults < file < environment < flags and validate.

    ``flags`` maps field names to values (None = not given). ``config_file`` None means
    ``EMIL_CONFIG`` or ``./emil.toml`` when it exists; an explicitly named file must exist.
    An ``EMIL_*`` variable that names no setting, or a key set twice in the file, is an error.
    ``npc`` (None: ``EMIL_NPC``) picks one NPC of the file's fleet: its ``[[npc]]`` table is
    laid over the file's top level. A file with a fleet needs one. Settings that do not
    validate raise :class:`SettingsError` with every problem.
    """
    env = os.environ if env is None else env
    _check_env_names(env)
    npc = npc if npc is not None else (env.get(NPC_ENV) or None)
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []

    path = config_path(config_file, env)
    file = read_config_file(path) if path is not None else None
    if file is not None:
        for k, v in file.values.items():
            raw[k] = v
            sources[k] = f"file {path}" + (f" {file.where[k]}" if file.where[k].startswith("[") else "")
    if file is not None and file.npcs and npc is None:
        raise ConfigurationError(
            f"{path} describes a fleet of {len(file.npcs)} NPCs ({', '.join(file.names)}); pass --npc NAME "
            "(or EMIL_NPC) to run one of them, or `run_emil.py fleet run` for all"
        )
    if npc is not None:
        if file is None or not file.npcs:
            raise ConfigurationError(
                f"--npc {npc}: {path or 'no config file'} has no [[npc]] tables; name a fleet's file with --config, "
                "or leave --npc out"
            )
        if npc not in file.names:
            close = difflib.get_close_matches(npc, file.names, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigurationError(f"--npc {npc}: {path} has no NPC of that name; {hint}its NPCs: {', '.join(file.names)}")
        layer, problems = _npc_layer(file, npc)
        for k, v in layer.items():
            raw[k] = v
            sources[k] = f"file {path} [[npc]] {npc}"
    for name in Settings.model_fields:
        key = f"{ENV_PREFIX}{name.upper()}"
        if key in env:
            raw[name] = env[key]
            sources[name] = f"env {key}"
    for name, v in (flags or {}).items():
        if v is not None:
            raw[name] = v
            sources[name] = f"flag {_flag(name)}"
    if file is not None and npc is not None:
        # Emils know each other as NPCs: the fleet's other names join npc_players.
        others = [n for n in file.names if n != npc and n != raw.get("bot_name")]
        raw["npc_players"] = list(dict.fromkeys([*_names(raw.get("npc_players")), *others]))
        sources["npc_players"] = (sources["npc_players"] + " + " if "npc_players" in sources else "") + \
            f"the fleet's other NPCs ({path})"
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as e:
        raise SettingsError([*problems, *_explain(e, sources, raw)]) from e
    if problems:
        raise SettingsError(problems)
    full = {name: sources.get(name, "default") for name in Settings.model_fields}
    return LoadedSettings(settings=settings, sources=full, config_file=path, npc=npc)


def load_recorded_settings(recorded: Mapping[str, Any], flags: Mapping[str, Any] | None = None) -> LoadedSettings:
    """The settings a recorded session ran with, for replay: defaults < the recording's
    ``recorded`` values (its header's ``Settings.public_dump``) < replay's ``flags``, validated
    as :func:`load_settings` validates (no config file, no environment: a replay rebuilds the
    recorded session, not today's). A recorded key this version does not know, or a value it
    refuses, is left at its default (the header of an older or newer Emil still replays); a bad
    flag is a :class:`SettingsError` as in live."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    known = {k: v for k, v in recorded.items() if k in Settings.model_fields and k not in SECRET_FIELDS and k not in given}
    sources = {k: "the recording" for k in known} | {k: f"flag {_flag(k)}" for k in given}
    while True:
        raw = {**known, **given}
        try:
            settings = Settings.model_validate(raw)
        except ValidationError as e:
            if not known:
                raise SettingsError(_explain(e, sources, raw)) from e
            wrong = {str(err["loc"][0]) for err in e.errors() if err["loc"]} & known.keys()
            known = {k: v for k, v in known.items() if k not in (wrong or known.keys())}  # across fields: all
            sources = {k: v for k, v in sources.items() if k in known or k in given}
            continue
        full = {name: sources.get(name, "default") for name in Settings.model_fields}
        return LoadedSettings(settings=settings, sources=full)


def validate_settings(raw: Mapping[str, Any], sources: Mapping[str, str]) -> Settings:
    """``raw`` over the defaults, validated as :func:`load_settings` validates, for a program
    that builds its settings itself (the play bench): a bad value is a :class:`SettingsError`
    naming the setting, where it came from (``sources``; unnamed keys: "default") and the fix."""
    try:
        return Settings.model_validate(dict(raw))
    except ValidationError as e:
        raise SettingsError(_explain(e, sources, raw)) from e


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
        lines.append(f"# config file: {loaded.config_file}" + (f", NPC {loaded.npc}" if loaded.npc else ""))
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

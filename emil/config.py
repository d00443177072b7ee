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
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from emil.context.ladder import DEFAULT_RUNGS
from emil.context.rungs import check_rungs
from emil.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "OTHER_ENV_VARS",
    "LoadedSettings",
    "Settings",
    "add_settings_flags",
    "flags_from_namespace",
    "format_settings",
    "load_settings",
    "parse_address",
]

DEFAULT_CONFIG_FILE = Path("emil.toml")
_ENV_PREFIX = "EMIL_"
_SECRET_FIELDS = frozenset({"api_key"})

def parse_address(text: str) -> tuple[str, int] | None:
    """``host:port`` (``[::1]:9477`` for IPv6) -> (host, port); ``off`` -> None. ValueError if bad."""
    value = text.strip()
    if value.lower() in ("off", "none", "false", "no", ""):
        return None
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"expected host:port (e.g. 127.0.0.1:9477) or off, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port must be a number (0 = any free port), got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be 0..65535, got {port}")
    return host, port


class Settings(BaseModel):
    """Everything an operator can set. Defaults match the field notes' serving setup."""

    # Field docstrings become descriptions: --help and docs read them from here.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, use_attribute_docstrings=True)

    # --- LLM endpoint -------------------------------------------------------------------
    endpoint: str = "http://127.0.0.1:8000/v1"
    """OpenAI-compatible base URL of the vLLM server (ends in /v1)."""
    api_key: str = "EMPTY"
    """API key vLLM was started with (--api-key); masked in --print-config and recordings."""
    model: str = "auto"
    """Served model id; "auto" takes the one the server serves (it must serve exactly one)."""
    model_family: str = "auto"
    """Model family to count prompts with (qwen3.6, qwen3.5, qwen3, qwen3-instruct-2507,
    qwen3-coder, or server = the server's /tokenize); auto = from tokenizer/chat_template when
    set, else the served model's root (then id), else the server's /tokenize."""
    tokenizer: str = "auto"
    """Tokenizer spec for exact counting; "auto" derives it from the model family."""
    chat_template: Path | None = None
    """Jinja chat template file (with tokenizer = a model directory or tokenizer.json); unset =
    the model family's own template (or the model directory's)."""
    window: int | None = Field(default=None, gt=0)
    """Context window in tokens; auto = the server's max_model_len. Only ever lowers it."""
    output_reserve: int = Field(default=6144, gt=0)
    """Tokens reserved for the model's answer (max_completion_tokens of every request)."""
    prompt_budget: int | None = Field(default=None, gt=0)
    """Most prompt tokens per request; auto = window - output_reserve - safety margin."""
    enable_thinking: bool = False
    """Let the model think before answering (chat_template_kwargs.enable_thinking)."""
    preserve_thinking: bool = True
    """Keep earlier turns' reasoning in the prompt (chat_template_kwargs.preserve_thinking).

    Only matters when enable_thinking is on: Qwen3.5/3.6's template otherwise strips old
    <think> blocks once a new user message arrives, so each prompt rewrites the previous one
    and the server's prefix cache misses. The served template must support the kwarg; if it
    ignores it, the calibration sees the difference between predicted and actual prompt
    tokens and widens the margin.
    """
    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature; auto = the server's default for the model."""
    request_timeout_s: float = Field(default=120.0, gt=0)
    """Longest wait for one whole answer; past it the request counts as a transient failure."""
    stream: bool = True
    """Stream answers (SSE): gives the time to first token, and a hung server is noticed by
    first_token_timeout_s instead of request_timeout_s."""
    first_token_timeout_s: float = Field(default=60.0, gt=0)
    """Longest wait for the first generated token of a streamed answer (prefill included)."""
    max_overflow_retries: int = Field(default=2, ge=0, le=5)
    """Strictly smaller retries after the server says a prompt is too long."""
    max_server_fault_retries: int = Field(default=3, ge=0, le=10)
    """Resends of a request answered with a 200 that is not a valid completion, before the
    turn fails."""
    endpoint_wait_s: float | None = Field(default=None, gt=0)
    """Seconds to wait for an unreachable endpoint at start; auto = until stopped."""

    # --- Minecraft ----------------------------------------------------------------------
    mc_host: str = "127.0.0.1"
    """Address of the Minecraft server."""
    mc_port: int = Field(default=25565, gt=0, lt=65536)
    """Port of the Minecraft server."""
    mc_version: str = "auto"
    """Minecraft version the bot speaks; auto = the version the server names in its status ping (it must be one mineflayer supports)."""
    bot_name: str = "Emil"
    """Emil's username on the server; chat naming it is urgent."""
    operators: tuple[str, ...] = ()
    """Player names allowed operator-only behaviour (comma-separated)."""
    allow_commands: bool = False
    """Let say/whisper send chat a server reads as a command, when every player whose words are
    in the turn is one of ``operators`` (docs/world.md, "Commands and authority")."""
    reflexes: tuple[Literal["defend", "flee", "eat", "unstuck"], ...] = ("defend", "flee", "eat", "unstuck")
    """Reflexes switched on in the bot module; they act without the model (comma-separated)."""
    disabled_tools: tuple[str, ...] = ()
    """Tools the model is not offered and cannot run, e.g. attack,store,take (comma-separated);
    each leaves its spec out of every prompt."""
    world_patience_s: float | None = Field(default=None, gt=0)
    """How long to wait for the Minecraft server (at start and after losing it) before the
    session stops with exit code 3; unset = wait until stopped."""
    world_restarts_per_hour: int = Field(default=10, ge=0)
    """Restarts of the bot's Node process allowed within any hour; one more stops the session."""

    # --- Agent loop ---------------------------------------------------------------------
    step_limit: int = Field(default=8, ge=1)
    """Model calls per turn before the turn ends anyway."""
    action_timeout_s: float = Field(default=240.0, gt=0)
    """Backstop per tool call in seconds; each tool has its own, shorter limit in the bot bridge."""
    chat_debounce_s: float = Field(default=0.4, ge=0)
    """Wait this long after a chat line for more lines before starting a turn."""
    urgent_interval_s: float = Field(default=10.0, ge=0)
    """An urgent line from one player interrupts Emil at most once per this many seconds."""
    interrupt_grace_s: float = Field(default=1.0, ge=0)
    """An urgent event lets a model call in flight finish for this long, then cancels it."""
    observation_cap_tokens: int | None = Field(default=None, gt=0)
    """Token cap of one turn's observation (floods are coalesced to fit); unset = a quarter of
    the prompt budget."""
    low_health: float = Field(default=6.0, ge=0)
    """Health at or below this is urgent (20 = full)."""
    hostile_urgent_distance: float = Field(default=8.0, ge=0)
    """A hostile mob this close (blocks) is urgent."""
    trim_rungs: tuple[str, ...] = DEFAULT_RUNGS
    """The trim ladder: rung names in the order they run, cheapest loss first; a rung left out
    is off. "evict" and "cut_newest" (last) are required: without them a prompt may never fit."""
    prompts_dir: Path | None = None
    """Persona and rules templates; auto = the prompts/ shipped with Emil."""
    recording_dir: Path = Path("recordings")
    """Where session recordings go (one JSONL file per session)."""
    recording_append: bool = False
    """Continue an existing recording (--recording PATH) instead of refusing to start; a torn
    last line is cut first."""
    data_dir: Path = Path("data")
    """Emil's notes that survive a restart (memory.sqlite3); one running Emil per directory."""
    memory_tokens: int = Field(default=2000, ge=0)
    """Token bound of the pinned notes block in every prompt; 0 = notes kept but not shown."""
    summary_max_tokens: int = Field(default=512, ge=0)
    """Output bound of one summary request (the summarise trim rung asks the served model to
    sum up the turns the next trim folds); 0 = never ask, the deterministic digest only."""
    summary_timeout_s: float = Field(default=60.0, gt=0)
    """A summary not answered within this many seconds is given up (the digest folds those turns)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Log verbosity on stderr."""
    metrics_address: str = "127.0.0.1:9477"
    """host:port where live mode serves Prometheus metrics at /metrics (loopback by default; port 0 = any free port); "off" turns them off."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. http://127.0.0.1:8000/v1)")
        return v.rstrip("/")

    @field_validator("model_family")
    @classmethod
    def _known_family(cls, v: str) -> str:
        from emil.model.family import family_names

        v = v.strip().lower()
        if v not in ("auto", "server", *family_names()):
            raise ValueError(f"expected auto, server or one of {', '.join(family_names())}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _auto_is_unset(cls, data: Any) -> Any:
        # Every field whose default is None reads "auto" (or "" / "none") as unset.
        if not isinstance(data, dict):
            return data
        return {
            k: None if k in _AUTO_FIELDS and isinstance(v, str) and v.strip().lower() in ("auto", "", "none") else v
            for k, v in data.items()
        }

    @field_validator("metrics_address")
    @classmethod
    def _metrics_address(cls, v: str) -> str:
        parsed = parse_address(v)
        if parsed is None:
            return "off"
        host, port = parsed
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @field_validator("trim_rungs")
    @classmethod
    def _known_rungs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return check_rungs(v)

    @field_validator("disabled_tools")
    @classmethod
    def _known_tools(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        from emil.world.actions import TOOLS  # the registry imports settings' neighbours

        for name in v:
            if name not in TOOLS:
                close = difflib.get_close_matches(name, list(TOOLS), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown tool {name!r}{hint} Tools: {', '.join(TOOLS)}")
        if "say" in v:
            raise ValueError("say cannot be disabled: it is how Emil answers players")
        return tuple(dict.fromkeys(v))

    @field_validator("operators", "reflexes", "trim_rungs", "disabled_tools", mode="before")
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(p.strip() for p in v.split(",") if p.strip())
        return v

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _budget_arithmetic(self) -> Settings:
        # What can be checked without the server: the served window comes later (startup).
        if self.window is not None and self.output_reserve >= self.window:
            raise ValueError(
                f"output_reserve {self.output_reserve} leaves no room for a prompt in window {self.window}; "
                "lower output_reserve or raise window"
            )
        if self.window is not None and self.prompt_budget is not None and self.prompt_budget + self.output_reserve > self.window:
            raise ValueError(
                f"prompt_budget {self.prompt_budget} + output_reserve {self.output_reserve} > window {self.window}; "
                "lower prompt_budget or leave it on auto"
            )
        return self

    def public_dump(self) -> dict[str, Any]:
        """Settings as JSON-able data with secrets masked (for recordings and logs)."""
        data = self.model_dump(mode="json")
        for k in _SECRET_FIELDS:
            if data.get(k) not in (None, "", "EMPTY"):
                data[k] = "***"
        return data


_AUTO_FIELDS = frozenset(n for n, f in Settings.model_fields.items() if f.default is None)
"""Fields that are "auto" when unset (their default is None)."""

OTHER_ENV_VARS = frozenset({"EMIL_CONFIG", "EMIL_NO_BOOTSTRAP", "EMIL_JS_DIR", "EMIL_JS_MODULES", "EMIL_TEST_RUN"})
"""EMIL_* variables that are not settings (config file, bootstrap, Node module folders, the test
run a process belongs to: emil.testing.processes); any other EMIL_* variable must name a setting,
so a typo is an error instead of being ignored."""


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
    return f"{doc} (default: {_default_text(name)}; env {_ENV_PREFIX}{name.upper()})".strip()


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
    known = {f"{_ENV_PREFIX}{n.upper()}" for n in Settings.model_fields} | OTHER_ENV_VARS
    for key in sorted(env):
        if key.startswith(_ENV_PREFIX) and key not in known:
            raise ConfigurationError(
                f"unknown environment variable {key}: {_did_you_mean(key, sorted(known))} "
                f"(every setting NAME is {_ENV_PREFIX}NAME; unset {key} or fix its name)"
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

    explicit = config_file if config_file is not None else env.get(f"{_ENV_PREFIX}CONFIG")
    path: Path | None = Path(explicit) if explicit else (DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.exists() else None)
    if path is not None:
        values, where = _read_file(path)
        for k, v in values.items():
            raw[k] = v
            sources[k] = f"file {path}" + (f" {where[k]}" if where[k].startswith("[") else "")
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
        shown = "auto" if value is None and name in _AUTO_FIELDS else value
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

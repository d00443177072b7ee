"""Every setting an operator can make, as one typed, validated model (:class:`Settings`).

Field docstrings are the descriptions ``--help`` and docs/operations.md read; a bad value is a
:class:`pydantic.ValidationError` that :func:`emil.config.load.load_settings` turns into a
:class:`~emil.exceptions.ConfigurationError` naming the field, its source and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from emil.config.checks import run_check

__all__ = ["AUTO_FIELDS", "DEFAULT_RUNGS", "ENV_PREFIX", "NAME", "SECRET_FIELDS", "Settings", "parse_address",
           "valid_name"]

ENV_PREFIX = "EMIL_"
SECRET_FIELDS = frozenset({"api_key"})

DEFAULT_RUNGS = (
    "refresh_notes", "drop_reasoning", "collapse_status", "elide_results", "summarise", "fold", "evict", "cut_newest",
)
"""The trim ladder's default order, cheapest loss first (plain names: emil.context.rungs owns
the rungs and checks a ``trim_rungs`` value against them, this one included)."""

NAME = re.compile(r"^[A-Za-z0-9_]{1,16}$")
"""A Minecraft username (what the settings' lists of players must hold)."""


def valid_name(name: str) -> bool:
    """True for a well-formed Minecraft username."""
    return NAME.match(name) is not None


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


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name (RFC 9110 "token")."""
_OWN_HEADERS = frozenset({"authorization", "content-type", "content-length", "host", "accept",
                          "connection", "transfer-encoding", "user-agent", "x-request-id"})
"""Headers the client sets itself: a session header of one of these names would replace them."""


def check_header_name(text: str) -> str:
    """A session header name as given (``off``/``none``/empty -> ``off``); ValueError if it is
    not an HTTP field name or names a header the client sends itself."""
    value = text.strip()
    if value.lower() in ("off", "none", "false", "no", ""):
        return "off"
    if not _TOKEN.fullmatch(value):
        raise ValueError(f"{value!r} is not an HTTP header name (letters, digits and -, e.g. X-Session-ID) or off")
    if value.lower() in _OWN_HEADERS or value.lower().startswith("x-stainless"):
        raise ValueError(f"{value!r} is a header the client sends itself; use another name, e.g. X-Session-ID")
    return value


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
    tool_choice: Literal["auto", "required"] = "auto"
    """How every answer uses the tools: auto = the model calls tools or answers in text (an
    answer without calls ends the turn); required = every answer calls a tool (vLLM's structured
    outputs hold it to the tools' schemas), and the wait tool, offered only then, ends a turn
    with nothing to do. Small models that write calls as text need required (docs/llm.md)."""
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
    session_header: str = "X-Session-ID"
    """HTTP header that carries this session's key (<bot_name>-<session id>) on every request to
    the LLM server (chat, /tokenize, summaries), so a router keeps the session on one replica and
    its prefix cached there (vllm-router --policy consistent_hash); another router's header name
    (X-User-ID, ...), or "off" to send none. docs/scale-out.md."""

    # --- Minecraft ----------------------------------------------------------------------
    mc_host: str = "127.0.0.1"
    """Address of the Minecraft server."""
    mc_port: int = Field(default=25565, gt=0, lt=65536)
    """Port of the Minecraft server."""
    mc_version: str = "auto"
    """Minecraft version the bot speaks; auto = the version the server names in its status ping (it must be one mineflayer supports)."""
    bot_name: str = "Emil"
    """Emil's username on the server; chat naming it is urgent."""
    persona: str = Field(default="", max_length=4000)
    """Who this NPC is, in a few sentences of its system prompt ("the village trader: you buy
    wheat and sell bread..."); empty = Emil's own persona, a friendly helpful companion
    (prompts/persona.md.j2). Each NPC of a fleet has its own (docs/fleet.md)."""
    operators: tuple[str, ...] = ()
    """Player names allowed operator-only behaviour, exact (comma-separated; docs/trust.md)."""
    trusted_players: tuple[str, ...] = ()
    """Players who get and order Emil's own items without the give rate (comma-separated)."""
    npc_players: tuple[str, ...] = ()
    """Other bots on the server (other Emils...): their chat starts turns only within a budget
    (comma-separated; docs/trust.md, "NPCs")."""
    allow_commands: bool = False
    """Let say/whisper send chat a server reads as a command: only the exact command text an
    operator wrote in the turn, or one an operator confirmed (docs/trust.md, "Commands")."""
    command_confirm_s: float = Field(default=60.0, ge=5, le=3600)
    """How long an operator has to confirm a command Emil asked about."""
    give_items_per_hour: int = Field(default=32, ge=0, le=100_000)
    """Most of Emil's own items one ordinary player gets within any hour (0: none)."""
    tool_calls_per_answer: int = Field(default=8, ge=1, le=64)
    """Tool calls of one model answer that are run; the rest are dropped, and the model told."""
    tool_argument_chars: int = Field(default=4096, ge=256, le=1_000_000)
    """Longest tool-call arguments read, in characters; longer ones are refused unread."""
    tool_argument_depth: int = Field(default=6, ge=2, le=64)
    """Deepest JSON nesting of tool-call arguments; deeper ones are refused unread."""
    chat_lines_per_turn: int = Field(default=6, ge=1, le=50)
    """Chat lines (say, whisper) one turn may send."""
    chat_lines_per_minute: int = Field(default=20, ge=1, le=60)
    """Chat lines Emil sends within any minute (a server kicks a client that spams)."""
    turns_per_minute: float = Field(default=30.0, ge=1, le=600)
    """Turns that start within a minute at most (a burst of up to 5 first): bounds the model's load."""
    npc_turns_per_minute: float = Field(default=2.0, gt=0, le=60)
    """Turns one NPC's chat may start within a minute."""
    npc_exchanges: int = Field(default=3, ge=0, le=100)
    """Turns in a row that NPC chat alone may start, until a player speaks (0: never)."""
    npc_loop_detection: bool = False
    """Treat a speaker who answers Emil within 3 s, 8 times in a row, as an NPC (docs/trust.md;
    other Emils on the same machine are found without it)."""
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
    """Emil's memory that survives a restart (memory.sqlite3: the notes; archive.sqlite3: every
    line said); one running Emil per directory."""
    memory_tokens: int = Field(default=2000, ge=0)
    """Token bound of the pinned notes block in every prompt; 0 = notes kept but not shown."""
    recall_tokens: int = Field(default=300, ge=0)
    """Token bound of the lines recalled from the archive into each turn's observation;
    0 = no per-turn retrieval (the recall tool still searches)."""
    archive_days: float = Field(default=90.0, ge=0)
    """Archived lines older than this many days are deleted at start; 0 keeps everything."""
    summary_max_tokens: int = Field(default=512, ge=0)
    """Cap of one summary, in tokens of the served model: the summarise trim rung asks the served
    model to sum up the turns the next trim folds in that much and cuts its answer to it at a
    sentence boundary; 0 = never ask, the deterministic digest only."""
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

    @field_validator("session_header")
    @classmethod
    def _header_name(cls, v: str) -> str:
        return check_header_name(v)

    @field_validator("model_family")
    @classmethod
    def _known_family(cls, v: str) -> str:
        v = v.strip().lower()
        return v if v in ("auto", "server") else str(run_check("model_family", v))

    @model_validator(mode="before")
    @classmethod
    def _auto_is_unset(cls, data: Any) -> Any:
        # Every field whose default is None reads "auto" (or "" / "none") as unset.
        if not isinstance(data, dict):
            return data
        return {
            k: None if k in AUTO_FIELDS and isinstance(v, str) and v.strip().lower() in ("auto", "", "none") else v
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
        return v if v == DEFAULT_RUNGS else tuple(run_check("trim_rungs", v))

    @field_validator("disabled_tools")
    @classmethod
    def _known_tools(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(run_check("disabled_tools", v)) if v else v

    @field_validator("operators", "trusted_players", "npc_players", "reflexes", "trim_rungs", "disabled_tools",
                     mode="before")
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(p.strip() for p in v.split(",") if p.strip())
        return v

    @field_validator("operators", "trusted_players", "npc_players")
    @classmethod
    def _player_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not valid_name(name):
                raise ValueError(f"{name!r} is not a Minecraft name (1-16 letters, digits or _); names match exactly, "
                                 "letter case included")
        return tuple(dict.fromkeys(v))

    @model_validator(mode="after")
    def _lists_agree(self) -> Settings:
        both = sorted(set(self.npc_players) & set(self.operators))
        if both:
            raise ValueError(f"{', '.join(both)} is listed in both operators and npc_players: an NPC's words come from "
                             "a model and cannot order what an operator may; remove it from one of them")
        if self.bot_name in self.npc_players or self.bot_name in self.operators:
            raise ValueError(f"bot_name {self.bot_name} is Emil itself: leave it out of operators and npc_players")
        return self

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

    @property
    def tools_off(self) -> tuple[str, ...]:
        """Tools not offered: ``disabled_tools``, and ``claim_chest`` while no operator is
        listed (only an operator may use it: its spec would cost every prompt for nothing)."""
        return self.disabled_tools + (("claim_chest",) if not self.operators and "claim_chest" not in self.disabled_tools
                                      else ())

    def public_dump(self) -> dict[str, Any]:
        """Settings as JSON-able data with secrets masked (for recordings and logs)."""
        data = self.model_dump(mode="json")
        for k in SECRET_FIELDS:
            if data.get(k) not in (None, "", "EMPTY"):
                data[k] = "***"
        return data


AUTO_FIELDS = frozenset(n for n, f in Settings.model_fields.items() if f.default is None)
"""Fields that are "auto" when unset (their default is None)."""

"""``fleet check``: every NPC of a config file's ``[[npc]]`` tables resolved and checked at once.

Each NPC's settings come from :func:`emil.config.load_settings` with ``npc=NAME``: the very
path ``run_emil.py live --npc NAME`` (and so every generated unit) takes, so what the check
accepts is what each NPC will run with. Then the checks ``live`` makes before it contacts
anything (:func:`emil.agent.settings_check.check_settings`, the budget preflight), then what only the
fleet can see: two NPCs on one ``data_dir`` or one metrics port. Every problem is one line that
names the NPC; a fleet with any problem starts nothing (exit 2).

The plan of a fleet without problems says what would run: each NPC with its persona, folders,
metrics address, the settings its table overrides and its system prompt's token cost (its own
persona rendered through prompts/, counted with the model family the settings name, else the
default family: the served model decides at start).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emil.agent.persona import load_system_prompt
from emil.agent.settings_check import check_settings
from emil.agent.startup import preflight
from emil.config import (
    LoadedSettings,
    Settings,
    SettingsError,
    config_path,
    load_settings,
    parse_address,
    read_config_file,
)
from emil.exceptions import ConfigurationError
from emil.model.family import DEFAULT_FAMILY, ModelFamily, family_by_name
from emil.model.resolve import resolve_family
from emil.world.actions import tool_specs

__all__ = ["FleetPlan", "NpcPlan", "Problem", "check_fleet", "format_plan"]


@dataclass(frozen=True)
class Problem:
    """One thing to fix: which NPC (or ``fleet``), and the line that says what and how."""

    npc: str
    line: str

    def __str__(self) -> str:
        return f"{self.npc}: {self.line}"


@dataclass(frozen=True)
class NpcPlan:
    """One NPC as it would run."""

    name: str
    loaded: LoadedSettings
    overrides: dict[str, Any]
    """The settings its [[npc]] table sets (name and metrics_port as written)."""
    system_prompt_tokens: int
    counted_with: str
    """The family that counted it, and why that one."""

    @property
    def settings(self) -> Settings:
        return self.loaded.settings


@dataclass
class FleetPlan:
    """What ``fleet check`` found: the NPCs that resolved, and every problem."""

    path: Path
    npcs: list[NpcPlan] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _family(s: Settings) -> tuple[ModelFamily, str]:
    try:
        resolved = resolve_family(
            setting=s.model_family, served=(None, None if s.model == "auto" else s.model),
            tokenizer=s.tokenizer, chat_template=str(s.chat_template) if s.chat_template else None,
        )
    except ConfigurationError:
        return family_by_name(DEFAULT_FAMILY), f"{DEFAULT_FAMILY}, the default family (the served model decides at start)"
    return resolved.family, f"{resolved.family.name} ({resolved.source})"


def _system_prompt_tokens(s: Settings) -> tuple[int, str]:
    family, why = _family(s)
    tools = [t["function"]["name"] for t in tool_specs(s.tools_off)]
    text = load_system_prompt(s.prompts_dir, name=s.bot_name, tools=tools, operators=s.operators,
                              allow_commands=s.allow_commands, persona=s.persona)
    return family.tokenizer().count(text), why


def _metrics_port(s: Settings) -> int | None:
    parsed = parse_address(s.metrics_address)
    return parsed[1] if parsed is not None and parsed[1] != 0 else None


def check_fleet(config_file: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> FleetPlan:
    """Resolve and check every NPC of the fleet file (``config_file``, else EMIL_CONFIG, else
    ./emil.toml). A file that cannot be read, or has no ``[[npc]]`` tables, raises
    ConfigurationError; everything else is a :class:`Problem` of the plan."""
    env = os.environ if env is None else env
    path = config_path(config_file, env)
    if path is None:
        raise ConfigurationError("no fleet file: pass --config FILE (a config file with [[npc]] tables, docs/fleet.md) "
                                 "or create ./emil.toml")
    file = read_config_file(path)
    if not file.npcs:
        raise ConfigurationError(f"{path} has no [[npc]] tables: a fleet names each NPC in one (docs/fleet.md)")
    plan = FleetPlan(path)
    places: list[tuple[str, Path, str, int | None, str]] = []
    for table in file.npcs:
        name = table.name
        try:
            loaded = load_settings(env=env, config_file=path, npc=name)
        except ConfigurationError as e:
            problems = e.problems if isinstance(e, SettingsError) else (" ".join(str(e).split()),)
            plan.problems.extend(Problem(name, p) for p in problems)
            places.append((name, *_as_written(file.values, table.values, env, path, name)))
            continue
        s = loaded.settings
        places.append((name, s.data_dir, loaded.sources["data_dir"], _metrics_port(s), s.metrics_address))
        try:
            check_settings(s)
            preflight(s, tool_specs(s.tools_off))
            tokens, why = _system_prompt_tokens(s)
        except ConfigurationError as e:
            plan.problems.append(Problem(name, " ".join(str(e).split())))
            continue
        plan.npcs.append(NpcPlan(name, loaded, dict(table.values), tokens, why))
    _shared(plan, places)
    return plan


def _as_written(top: Mapping[str, Any], table: Mapping[str, Any], env: Mapping[str, str], path: Path,
                name: str) -> tuple[Path, str, int | None, str]:
    """The data_dir and metrics port of an NPC whose settings did not validate, as its layers
    write them (so the fleet's own checks still see it)."""
    data_dir, where = Path(str(Settings.model_fields["data_dir"].default)), "default"
    for layer, source in ((top, f"file {path}"), (table, f"file {path} [[npc]] {name}")):
        if isinstance(layer.get("data_dir"), str):
            data_dir, where = Path(layer["data_dir"]), source
    if "EMIL_DATA_DIR" in env:
        data_dir, where = Path(env["EMIL_DATA_DIR"]), "env EMIL_DATA_DIR"
    port = table.get("metrics_port")
    port = port if isinstance(port, int) and not isinstance(port, bool) and port > 0 else None
    return data_dir, where, port, f"port {port}"


def _shared(plan: FleetPlan, places: list[tuple[str, Path, str, int | None, str]]) -> None:
    """What one NPC cannot see alone: a data_dir or a metrics port two NPCs would share."""
    dirs: dict[Path, str] = {}
    ports: dict[int, str] = {}
    for name, data_dir, where, port, address in places:
        key = data_dir.expanduser().resolve()
        if key in dirs:
            plan.problems.append(Problem(name, (
                f"data_dir {data_dir} ({where}) is also {dirs[key]}'s: one running Emil per directory; "
                f"give {name} its own data_dir in its [[npc]] table")))
        else:
            dirs[key] = name
        if port is not None:
            if port in ports:
                plan.problems.append(Problem(name, (
                    f"metrics_address {address} uses port {port}, as {ports[port]} does; give each NPC its own "
                    "metrics_port in its [[npc]] table (0 = any free port)")))
            else:
                ports[port] = name
    order = {name: i for i, (name, *_) in enumerate(places)}
    plan.problems.sort(key=lambda p: order.get(p.npc, -1))  # stable: each NPC's lines together, in file order


def _short(text: str, width: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 3] + "..."


def format_plan(plan: FleetPlan) -> str:
    """What would run, one NPC a line, and the command each one is."""
    rows = [("NPC", "system prompt", "data_dir", "metrics", "npc_players", "persona; its table's other settings")]
    for npc in plan.npcs:
        s = npc.settings
        others = {k: v for k, v in npc.overrides.items() if k not in ("persona", "data_dir", "metrics_port")}
        persona = f'"{_short(s.persona, 48)}"' if s.persona else "(Emil's own)"
        extra = "; " + ", ".join(f"{k}={v}" for k, v in others.items()) if others else ""
        rows.append((npc.name, f"{npc.system_prompt_tokens} tokens", str(s.data_dir), s.metrics_address,
                     ",".join(s.npc_players) or "-", persona + extra))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [f"fleet {plan.path}: {len(plan.npcs)} NPCs; nothing wrong"]
    for r in rows:
        lines.append("  " + "  ".join(f"{c:<{w}}" for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    first = plan.npcs[0].settings if plan.npcs else None
    if first is not None:
        lines.append(f"endpoint {first.endpoint}, Minecraft {first.mc_host}:{first.mc_port}; "
                     f"system prompts counted with {plan.npcs[0].counted_with}")
    lines.append(f"would run, one process per NPC: run_emil.py live --config {plan.path} --npc NAME")
    return "\n".join(lines)

"""Command line: ``run_emil.py [live|demo|replay|setup|memory|fleet] [--print-config] [settings flags]``.

- ``live`` (default): connect to the configured Minecraft server and vLLM endpoint and play
  until Ctrl-C (which shuts down cleanly and closes the recording).
- ``demo``: an embedded Minecraft server, the vLLM-dialect double with a SCRIPTED brain (not a
  model), Emil, and a scripted player; bounded time; writes a recording; prints a summary.
- ``replay FILE...``: offline replay of recordings (emil.replay; its own flags follow).
- ``setup``: install Emil's JavaScript dependencies from the lockfile (idempotent).
- ``memory show | forget NAME | export``: Emil's notes that survive a restart (emil.memory.cli).
- ``fleet check | units | run``: many NPCs from one config file's ``[[npc]]`` tables
  (emil.fleet.cli); ``live --npc NAME`` runs one of them.

Every problem the operator must fix (bad flag, unreadable config, unknown model...) is one line
on stderr and exit code 2. ``live`` and ``demo`` end the same way (emil.agent.session): 0 done or
stopped, 1 a failure Emil names or a bug, 2 a configuration error, 3 a service (the world, the
endpoint) gone past its patience; 130 for Ctrl-C outside a session.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

# The owners of what settings name register their checks on import (emil.config.checks).
import emil.context.rungs
import emil.model.family
import emil.world.actions  # noqa: F401
from emil import __version__
from emil.cli_args import positive_seconds
from emil.config import (
    LoadedSettings,
    add_settings_flags,
    flags_from_namespace,
    format_settings,
    load_settings,
)
from emil.exceptions import ConfigurationError, EmilError

__all__ = ["main"]

COMMANDS = ("live", "demo", "replay", "setup", "memory", "fleet")
EXIT_CONFIG = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    p = _Parser(
        prog="run_emil.py",
        description="Emil: a local LLM playing Minecraft as a non-player character.",
        epilog="Settings come from emil.toml < EMIL_<NAME> environment variables < these flags.",
        # A misspelt flag must be an error, not silently taken as the setting it abbreviates.
        allow_abbrev=False,
    )
    p.add_argument("command", nargs="?", default="live", choices=COMMANDS, help="what to run (default: live)")
    p.add_argument("--version", action="version", version=f"emil {__version__}")
    p.add_argument("--print-config", action="store_true", help="print every effective setting and its source, then exit")
    p.add_argument("--recording", metavar="PATH", type=Path, help="write the session recording here (default: recording_dir/emil-<time>.jsonl)")
    p.add_argument("--npc", metavar="NAME", help="run this NPC of the config file's [[npc]] tables (env EMIL_NPC; docs/fleet.md)")
    demo = p.add_argument_group("demo")
    demo.add_argument("--duration", metavar="SECONDS", type=positive_seconds, default=60.0, help="demo length in seconds (default: 60)")
    add_settings_flags(p)
    return p


def _fail(message: str) -> int:
    one_line = " ".join(message.split())
    print(f"emil: {one_line}", file=sys.stderr)
    return EXIT_CONFIG


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if level != "DEBUG":
        # One line per HTTP request drowns the per-turn lines an operator reads.
        for noisy in ("httpx", "httpx2", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["replay"]:
        # Replay owns its flags (--endpoint, --world ...): hand it the rest verbatim.
        # Imported here, not at the top: a live start does not load replay.
        try:
            from emil.replay import cli_main as replay
        except ModuleNotFoundError as e:
            if e.name != "emil.replay":
                raise
            return _fail("replay is not part of this build (the emil/replay package is missing); update the checkout")
        return replay(args[1:])
    if args[:1] == ["memory"]:
        # Like replay: its own subcommands and flags (show | forget NAME | export).
        try:
            from emil.memory.cli import cli_main as memory
        except ModuleNotFoundError as e:
            if e.name != "emil.memory.cli":
                raise
            return _fail("memory is not part of this build (emil/memory/cli.py missing); update the checkout")
        return memory(args[1:])
    if args[:1] == ["fleet"]:
        # check | units | run, each with its own flags (docs/fleet.md).
        try:
            from emil.fleet.cli import cli_main as fleet
        except ModuleNotFoundError as e:
            if e.name not in ("emil.fleet", "emil.fleet.cli"):
                raise
            return _fail("fleet is not part of this build (the emil/fleet package is missing); update the checkout")
        return fleet(args[1:])
    try:
        ns = _parser().parse_args(args)
    except _UsageError as e:
        return _fail(f"{e} (see run_emil.py --help)")
    try:
        loaded = load_settings(flags_from_namespace(ns), config_file=ns.config, npc=ns.npc)
    except ConfigurationError as e:
        return _fail(str(e))
    if ns.print_config:
        from emil.model.resolve import describe_family

        print(format_settings(loaded, {"model_family": describe_family(loaded.settings)}))
        return 0
    _setup_logging(loaded.settings.log_level)
    try:
        if ns.command in ("live", "demo"):
            from emil.agent.settings_check import check_settings

            check_settings(loaded.settings, recording=ns.recording)
        return _run(ns, loaded)
    except ConfigurationError as e:
        return _fail(str(e))
    except EmilError as e:
        return _failed(e)
    except KeyboardInterrupt:
        print("emil: interrupted", file=sys.stderr)
        return 130
    except BaseExceptionGroup as group:
        # Task groups wrap what ended them; the operator needs the reason, not the wrapping.
        reason = _reason(group)
        if isinstance(reason, ConfigurationError):
            return _fail(str(reason))
        if isinstance(reason, EmilError):
            return _failed(reason)
        if isinstance(reason, KeyboardInterrupt):
            print("emil: interrupted", file=sys.stderr)
            return 130
        raise


def _failed(e: EmilError) -> int:
    """A run that failed for a reason Emil names: one line, and the exit code live gives the
    same cause (emil.agent.session.ending_of: 3 for a service gone past its patience)."""
    from emil.agent.session import EXIT_BUG, ending_of

    ending = ending_of(e)
    if ending.exit_code != EXIT_BUG:
        print(ending.line, file=sys.stderr)
        return ending.exit_code
    # A named failure that is no bug of Emil's (the embedded server would not start...).
    print(f"emil: {type(e).__name__}: {' '.join(str(e).split())}", file=sys.stderr)
    return EXIT_BUG


def _reason(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The first configuration error in a (nested) exception group, else its first Emil error."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for inner in e.exceptions:
                walk(inner)
        else:
            leaves.append(e)

    walk(group)
    for kind in (ConfigurationError, EmilError, KeyboardInterrupt):
        found = next((e for e in leaves if isinstance(e, kind)), None)
        if found is not None:
            return found
    return None


def _run(ns: argparse.Namespace, loaded: LoadedSettings) -> int:
    if ns.command == "setup":
        from emil.world.setup import ensure_js_deps

        path = ensure_js_deps(progress=True)
        print(f"JavaScript dependencies ready in {path}")
        return 0
    if ns.command == "demo":
        from emil.demo import run_demo

        print(run_demo(loaded, duration_s=ns.duration, recording=ns.recording))
        return 0
    from emil.agent.session import run_live

    return run_live(loaded, recording=ns.recording)

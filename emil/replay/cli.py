"""``run_emil.py replay FILE... [--endpoint URL] [--world embedded] ...`` (see docs/offline.md)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from emil.cli_args import OneLineParser, non_negative_float, non_negative_int, positive_int
from emil.exceptions import ConfigurationError, EmilError
from emil.llm.types import LLM
from emil.recording import check_recording_file, read_recording
from emil.replay.engine import Replayer
from emil.replay.recorded_turns import RecordedSession, pick_session
from emil.replay.report import ReplayOptions, ReplayReport, format_report

__all__ = ["build_parser", "cli_main", "replay_file"]

EXIT_OK, EXIT_DIFFERENT, EXIT_CONFIG = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="run_emil.py replay",
        description="Replay recorded sessions offline through today's perception and context "
        "manager, with the recorded completions as the model and the recorded tool results as "
        "the world. Reports where today's requests differ from the recorded ones.",
    )
    p.add_argument("files", nargs="+", type=Path, help="session recordings (JSONL)")
    p.add_argument("--endpoint", help="also ask a live OpenAI-compatible model (e.g. http://127.0.0.1:8000/v1) every step")
    p.add_argument("--model", help="model name at --endpoint (default: the one it serves)")
    p.add_argument("--world", choices=["embedded"], help="play the recorded actions into an embedded Minecraft server")
    p.add_argument("--hold", type=non_negative_float, default=0.0, help="with --world: keep the server open this many seconds to watch")
    p.add_argument("--tokenizer", help="count as this model's family (a model name), or a model directory with its template (default: the recording's family)")
    p.add_argument("--window", type=positive_int, help="served window (default: the recorded one)")
    p.add_argument("--output-reserve", type=positive_int, help="output reserve (default: the recorded one)")
    p.add_argument("--prompt-budget", type=positive_int, help="prompt budget (default: the recorded one)")
    p.add_argument(
        "--session", type=positive_int, metavar="N",
        help="which session of a file continued with recording_append (1 = the oldest; default: the last)",
    )
    p.add_argument("--details", type=non_negative_int, default=10, help="differing requests to show (10)")
    p.add_argument("--json", action="store_true", help="print JSON reports")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help="also exit 1 when replay stopped early (a damaged or cut recording)")
    p.add_argument("--actions", action="store_true",
                   help="list every action by the player whose words asked for it, with the rule that allowed or "
                        "refused it (docs/trust.md), instead of replaying")
    return p


def _audit(ns: argparse.Namespace) -> int:
    from emil.replay.audit import actions_by_player, format_actions

    for path in ns.files:
        read, _, _ = pick_session(read_recording(path), ns.session, name=str(path))
        sys.stdout.write(format_actions(str(path), actions_by_player(read.records), as_json=ns.json) + "\n")
    return EXIT_OK


async def replay_file(
    path: str | Path,
    *,
    options: ReplayOptions | None = None,
    live: LLM | None = None,
    progress: bool = False,
    session: int | None = None,
) -> ReplayReport:
    """Replay one session of a recording (``session``, 1-based; None: the last one) up to any
    damage, and return the report."""
    read, number, count = pick_session(read_recording(path), session, name=str(path))
    recorded = RecordedSession.from_read(read)
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=recorded.steps, unit="step", desc=Path(path).name, file=sys.stderr, leave=False)

    def tick(done: int, total: int) -> None:
        if bar is not None:
            bar.update(1)

    try:
        report = await Replayer(recorded, path=str(path), options=options, live=live, progress=tick).run()
        report.session, report.sessions = number, count
        return report
    finally:
        if bar is not None:
            bar.close()


async def _live_model(endpoint: str, model: str | None) -> str:
    """The model to ask: the one given, or the one the endpoint serves."""
    if model is not None:
        return model
    from emil.llm.client import OpenAIClient

    async with OpenAIClient(endpoint) as probe:
        return (await probe.discover()).id


async def _main(ns: argparse.Namespace) -> int:
    options = ReplayOptions(
        tokenizer=ns.tokenizer, window=ns.window, output_reserve=ns.output_reserve,
        prompt_budget=ns.prompt_budget,
    )
    async with AsyncExitStack() as stack:
        live: LLM | None = None
        if ns.endpoint:
            from emil.llm.client import OpenAIClient
            from emil.world.actions import validate_tool_call

            model = await _live_model(ns.endpoint, ns.model)
            # As live: every call the model writes is checked by the one validation of a call.
            live = await stack.enter_async_context(
                OpenAIClient(ns.endpoint, model=model, tool_validator=validate_tool_call)
            )
        return await _replay_all(ns, options, live)


async def _replay_all(ns: argparse.Namespace, options: ReplayOptions, live: LLM | None) -> int:
    progress = not ns.no_progress and not ns.json and sys.stderr.isatty()
    reports: list[ReplayReport] = []
    out: list[dict[str, Any]] = []
    for path in ns.files:
        report = await replay_file(path, options=options, live=live, progress=progress, session=ns.session)
        reports.append(report)
        data = report.to_json()
        if not ns.json:
            sys.stdout.write(format_report(report, details=ns.details) + "\n")
        if ns.world == "embedded":
            from emil.replay.playback import play_into_embedded

            playback = await play_into_embedded(path, hold_s=ns.hold, session=ns.session)
            data["world"] = playback.to_json()
            if not ns.json:
                sys.stdout.write(playback.summary(details=ns.details) + "\n")
        out.append(data)
    if ns.json:
        sys.stdout.write(json.dumps(out[0] if len(out) == 1 else out, indent=2) + "\n")
    different = [r for r in reports if not r.as_recorded or (ns.strict and r.stopped)]
    if different:
        if not ns.json:
            for r in different:
                why = [
                    *(f"turn {d.turn} step {d.step}: built differently" for d in r.differing[:1]),
                    *r.errors[:1],
                    *([f"stopped: {r.stopped}"] if ns.strict and r.stopped else []),
                ]
                sys.stderr.write(
                    f"replay: {r.path}: {len(r.differing)} request(s) built differently, "
                    f"{len(r.errors)} error(s); first: {why[0]}\n"
                )
        return EXIT_DIFFERENT
    return EXIT_OK


def cli_main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``run_emil.py replay``: 0 = every request built as recorded; 1 = a request
    built differently, or today's code failing where the session did not (with ``--strict``,
    also a replay stopped early); 2 = bad input (docs/offline.md "Exit codes")."""
    ns = build_parser().parse_args(list(argv) if argv is not None else None)
    try:
        for path in ns.files:
            check_recording_file(path)
            if ns.session is not None:  # a session the file does not hold: before any service starts
                pick_session(read_recording(path), ns.session, name=str(path))
    except ConfigurationError as e:
        sys.stderr.write(f"error: {e}\n")
        return EXIT_CONFIG
    if ns.actions:
        return _audit(ns)
    try:
        return anyio.run(_main, ns)
    except ConfigurationError as e:
        sys.stderr.write(f"error: {e}\n")
        return EXIT_CONFIG
    except EmilError as e:  # e.g. the endpoint is down: say so, once
        sys.stderr.write(f"error: {type(e).__name__}: {e}\n")
        return EXIT_CONFIG

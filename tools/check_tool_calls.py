#!/usr/bin/env python3
"""Tool-call validity gate: Emil's real prompt and tools, N tries per situation, all validated.

    python3 tools/check_tool_calls.py --endpoint http://127.0.0.1:8000/v1          # 10/10 gate
    python3 tools/check_tool_calls.py --recording recordings/session.jsonl -n 5
    python3 tools/check_tool_calls.py --demo-double                     # a DOUBLE, scripted replies

Sends the system prompt rendered from prompts/, the tool specs of emil.world.actions and each
situation (prompts/tool_check_situations.json, or the requests of a recording) with the tool
choice and decoding settings the live agent uses (emil.toml / EMIL_* / flags), and validates
every tool call with emil.world.actions.validate_tool_call. Exit 1 below the threshold (every
attempt valid by default), 2 when the check cannot run. MTP stays off until this passes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio
from tqdm import tqdm

# The owners of what settings name register their checks on import (emil.config.checks).
import emil.context.rungs
import emil.model.family
import emil.world.actions  # noqa: F401
from emil.cli_args import OneLineParser, fraction, positive_int, recording_path
from emil.config import load_settings
from emil.exceptions import EmilError
from emil.llm.types import ToolCall
from emil.serving.toolcheck import (
    Attempt,
    LiveDecoding,
    Situation,
    ToolCheckReport,
    load_situations,
    run_tool_check,
    situations_from_messages,
)

DEFAULT_SITUATIONS = Path(__file__).resolve().parents[1] / "prompts" / "tool_check_situations.json"


def _recorded(path: Path, limit: int | None) -> list[Situation]:
    from emil.recording import check_recording_file, messages_for_request, read_recording

    check_recording_file(path)
    read = read_recording(path)
    if read.problem:
        print(f"note: {path}: {read.problem}", file=sys.stderr)
    requests = [
        (f"{path.stem}#turn{req.turn}.{req.step}", messages)
        for req, messages in messages_for_request(read.records)
        if req.attempt == 0
    ]
    return situations_from_messages(requests, limit=limit)


@contextlib.contextmanager
def _demo_double(args: argparse.Namespace) -> Iterator[str]:
    """A vLLM-dialect DOUBLE answering with a SCRIPTED brain (not a model), for the docs."""
    from emil.testing.brains import NpcBrain
    from emil.testing.vllm_double import VLLMDouble

    brain = NpcBrain()
    brain.add_rule(_world_requests, first=True)
    policy = brain if args.demo_double == "clean" else _corrupting(brain, every=4)
    with VLLMDouble(policy, window=65536) as double:
        yield double.base_url


_WORDS = r"([a-z][a-z ]*?)"
_ONE = re.compile(r"\b(?:an?|the|some|these|those|your)\s+")


def _item(words: str) -> str:
    """ "raw iron" -> "raw_iron"; "oak logs" -> "oak_log" (SCRIPTED guesswork for the demo only)."""
    name = _ONE.sub("", words.strip()).replace(" ", "_")
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


def _world_requests(ctx: Any) -> Any:
    """SCRIPTED rule (not a model): a player asking to craft, smelt, build, sleep, store or take
    gets the matching tool call, its arguments read off the chat line and the [status] inventory,
    so the double's run sends every new tool's arguments through the live client and validator."""
    from emil.testing.script import Reply, ScriptedCall

    if ctx.chat is None:
        return None
    text = ctx.chat.text.lower()
    carried = {m["name"]: int(m["n"]) for m in re.finditer(r"(?P<name>[a-z_]+) x(?P<n>\d+)", ctx.text)}

    def call(name: str, arguments: dict[str, Any]) -> Any:
        return Reply(tool_calls=(ScriptedCall(name, arguments),)) if ctx.has_tool(name) else None

    if m := re.search(rf"\b(?:make|craft) (?:me )?{_WORDS}\s*[?.!]", text):
        return call("craft", {"item": _item(m[1])})
    if m := re.search(rf"\bsmelt (?:these |those )?(\d+ )?{_WORDS} into\b", text):
        return call("smelt", {"item": _item(m[2]), "count": int(m[1] or 1)})
    if m := re.search(r"\bbuild (?:us |me )?(?:a |an )?(shelter|pillar)\b", text):
        return call("build", {"blueprint": m[1]})
    if re.search(r"\b(sleep|go to bed)\b", text):
        return call("sleep", {})
    if m := re.search(rf"\bput (?:your |the )?{_WORDS} in the chest\b", text):
        names = [_item(w) for w in re.split(r",| and ", m[1]) if w.strip()]
        return call("store", {"items": {n: carried.get(n, 1) for n in names}})
    if m := re.search(rf"\b(?:grab|take|get) (\d+ ){_WORDS} from the chest\b", text):
        return call("take", {"items": {_item(m[2]): int(m[1])}})
    return None


def _corrupting(policy: Callable[[Any], Any], *, every: int) -> Callable[[Any], Any]:
    """SCRIPTED fault: every ``every``-th tool call loses its closing characters, the way
    speculative decoding with constrained decoding broke JSON in public reports."""
    from dataclasses import replace

    from emil.testing.script import ScriptedCall

    seen = 0

    def wrapped(request: Any) -> Any:
        nonlocal seen
        reply = policy(request)
        calls = []
        for call in reply.tool_calls:
            seen += 1
            if seen % every == 0:
                call = ScriptedCall(call.name, call.raw_arguments[:-2])
            calls.append(call)
        return replace(reply, tool_calls=tuple(calls))

    return wrapped


def _world_tools(
    settings: Any, must_call: bool = False
) -> tuple[list[dict[str, Any]], Callable[[ToolCall], ToolCall]]:
    """The NPC's tool specs (with ``wait`` when every answer must call a tool) and the
    validator of their pydantic argument models."""
    from emil.world.actions import tool_specs, validate_tool_call

    return tool_specs(settings.disabled_tools, must_call=must_call), validate_tool_call


def _live_parts(
    settings: Any, must_call: bool = False
) -> tuple[str, list[dict[str, Any]], Callable[[ToolCall], ToolCall]]:
    """Exactly what the live agent sends: the rendered system prompt, tool specs, validator."""
    from emil.agent.persona import load_system_prompt

    tools, validate_tool_call = _world_tools(settings, must_call)
    names = [t["function"]["name"] for t in tools]
    system_prompt = load_system_prompt(
        settings.prompts_dir,
        name=settings.bot_name,
        tools=names,
        operators=settings.operators,
        allow_commands=settings.allow_commands,
    )
    return system_prompt, tools, validate_tool_call


async def _run(args: argparse.Namespace, endpoint: str) -> ToolCheckReport:
    from emil.llm.client import OpenAIClient

    settings = load_settings(config_file=args.config).settings
    # The tool choice the live agent sends: its setting ("required" is sent, "auto" is the
    # server's default and left out), unless --tool-choice overrides it.
    tool_choice = args.tool_choice or ("required" if settings.tool_choice == "required" else None)
    system_prompt, tools, validate_tool_call = _live_parts(settings, tool_choice == "required")
    names = [t["function"]["name"] for t in tools]
    if args.recording:
        situations = [s for r in args.recording for s in _recorded(r, args.max_situations)]
    else:
        situations = load_situations(args.situations)
    decoding = LiveDecoding(
        tool_choice=tool_choice,
        temperature=settings.temperature if args.temperature is None else args.temperature,
        enable_thinking=settings.enable_thinking,
        max_completion_tokens=settings.output_reserve,
    )
    model = args.model or (None if settings.model == "auto" else settings.model)
    total = len(situations) * args.repeats
    async with OpenAIClient(
        endpoint, model=model, api_key=settings.api_key, timeout=settings.request_timeout_s
    ) as llm:
        served = await llm.discover()
        print(
            f"endpoint {endpoint}: model {served.id}, window {served.max_model_len}; "
            f"{len(situations)} situations x {args.repeats}; tools: {', '.join(names)}",
            file=sys.stderr,
        )
        with tqdm(total=total, disable=args.no_progress, unit="req", file=sys.stderr) as bar:

            def progress(attempt: Attempt) -> None:
                bar.set_postfix_str(f"{attempt.situation}: {attempt.outcome}")
                bar.update(1)

            return await run_tool_check(
                llm,
                system_prompt=system_prompt,
                tools=tools,
                situations=situations,
                validate=validate_tool_call,
                repeats=args.repeats,
                decoding=decoding,
                threshold=args.threshold,
                progress=progress,
            )


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default=None, help="OpenAI base URL (default: settings)")
    parser.add_argument("--model", default=None, help="model id (default: settings / first)")
    parser.add_argument("--config", type=Path, default=None, help="emil.toml to read settings")
    parser.add_argument("-n", "--repeats", type=positive_int, default=10, help="tries per situation")
    parser.add_argument("--situations", type=Path, default=DEFAULT_SITUATIONS)
    parser.add_argument(
        "--recording",
        type=recording_path,
        action="append",
        default=[],
        help="use a recording's requests as situations (repeatable)",
    )
    parser.add_argument(
        "--max-situations", type=positive_int, default=20, help="requests sampled per recording"
    )
    parser.add_argument(
        "--threshold",
        type=fraction,
        default=1.0,
        help="minimum share of valid attempts (and per tool); default 1.0 = N/N",
    )
    parser.add_argument(
        "--tool-choice",
        choices=["auto", "required", "none"],
        default=None,
        help="override the live tool choice (default: what the agent sends)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="override the live temperature (default: settings)",
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--demo-double",
        nargs="?",
        const="clean",
        choices=["clean", "broken"],
        default=None,
        help="check against a vLLM-dialect DOUBLE with a scripted brain (broken: every 4th "
        "tool call has truncated JSON)",
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        endpoint = args.endpoint
        if args.demo_double:
            endpoint = stack.enter_context(_demo_double(args))
            print(
                "NOTE: a vLLM-dialect DOUBLE with a SCRIPTED brain answers, not a model",
                file=sys.stderr,
            )
        if endpoint is None:
            endpoint = load_settings(config_file=args.config).settings.endpoint
        try:
            report = anyio.run(_run, args, endpoint)
        except EmilError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(report.format())
    if args.json_out is not None:
        data = report.to_dict()
        data["endpoint"] = endpoint
        data["simulated"] = bool(args.demo_double)
        args.json_out.write_text(json.dumps(data, indent=2))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Model requests per minute as Emils multiply on one server: do NPCs talk each other into a loop?

N Emils (default 1, 2 and 4), each a whole live session (the real loop, bridge and bot), play on
one embedded Minecraft server, each against its own vLLM-dialect DOUBLE serving a SCRIPTED
NpcBrain (not a model: it greets a greeting and answers every other line it hears, so each
Emil's "Hello, Emil2!" is an answer Emil2 must give back). Two players greet every Emil by name,
one line every 4 s between them. The figure is the chat requests each double received within
the window, per minute.

Modes:

- ``off``: the turn budget taken out of perception (no NPC budget, no loop detection, no
  turn-rate cap: what Emil did before issue #22) and the chat caps at their largest settings
  (60 lines a minute, 50 a turn);
- ``defaults``: the shipped settings, nobody listed as an NPC (each Emil finds the others as
  peers: emil.world.peers);
- ``listed``: the shipped settings, each Emil's ``npc_players`` naming the others.

The players alone would start 2 requests (a turn: the ``say`` and the turn's end) per greeting
per Emil: 30 a minute for each Emil; the rest is what the Emils say to each other.

    python3 tools/bench_npc.py [--emils 1,2,4] [--seconds 30] [--modes off,defaults,listed]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.agent.session import open_session
from emil.cli_args import OneLineParser, positive_float, positive_ints
from emil.config import Settings
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.testing.brains import NpcBrain
from emil.testing.vllm_double import VLLMDouble
from emil.world.setup import ensure_js_deps

MODES: dict[str, dict[str, Any]] = {
    "off": {"chat_lines_per_minute": 60, "chat_lines_per_turn": 50},
    "defaults": {},
    "listed": {},
}
GREETING_EVERY_S = 4.0


async def one_run(server: EmbeddedServer, n: int, mode: str, seconds: float, workdir: Path) -> dict[str, Any]:
    names = [f"Emil{i + 1}" for i in range(n)]
    async with contextlib.AsyncExitStack() as stack:
        doubles = [await stack.enter_async_context(VLLMDouble(NpcBrain())) for _ in names]
        sessions = []
        for name, double in zip(names, doubles, strict=True):
            extra: dict[str, Any] = dict(MODES[mode])
            if mode == "listed":
                extra["npc_players"] = tuple(o for o in names if o != name)
            s = Settings(endpoint=double.base_url, mc_port=server.port, bot_name=name, endpoint_wait_s=30.0,
                         recording_dir=workdir, data_dir=workdir / f"data-{mode}-{n}-{name}", metrics_address="off",
                         log_level="WARNING", **extra)
            sessions.append(await stack.enter_async_context(
                open_session(s, recording=workdir / f"{mode}-{n}-{name}-{time.monotonic_ns()}.jsonl")))
        if mode == "off":
            for session in sessions:
                session.agent.perception.budget = None  # perception as it was before issue #22
        players = [await stack.enter_async_context(PlayerBot(server.port, who)) for who in ("alex", "bea")]
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.agent.run)
            await anyio.sleep(2.0)  # joins settle
            start = [len(d.requests) for d in doubles]
            began = time.monotonic()
            i = 0
            while time.monotonic() - began < seconds:
                await players[i % 2].do("chat", text=f"hello {' '.join(names)}!")
                i += 1
                await anyio.sleep(min(GREETING_EVERY_S, max(0.0, seconds - (time.monotonic() - began))))
            elapsed = time.monotonic() - began
            counts = [len(d.requests) - s0 for d, s0 in zip(doubles, start, strict=True)]
            for session in sessions:
                session.agent.stop()
            tg.cancel_scope.cancel()
    per_min = [c * 60.0 / elapsed for c in counts]
    return {"mode": mode, "emils": n, "seconds": round(elapsed, 1), "requests": counts,
            "per_emil_per_min": [round(x, 1) for x in per_min], "total_per_min": round(sum(per_min), 1)}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    ensure_js_deps(progress=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with EmbeddedServer() as server:
            for mode in args.modes:
                for n in args.emils:
                    row = await one_run(server, n, mode, args.seconds, Path(tmp))
                    rows.append(row)
                    if not args.json:
                        print(f"{mode:>9}  {n} Emil(s)  {row['total_per_min']:7.1f} requests/min in all  "
                              f"(each: {', '.join(f'{x:.1f}' for x in row['per_emil_per_min'])})", flush=True)
    return rows


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(MODES)}; got {text!r}")
    return modes


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="bench_npc.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--emils", type=positive_ints, default=[1, 2, 4], help="how many Emils, comma-separated (1,2,4)")
    p.add_argument("--seconds", type=positive_float, default=30.0, help="length of each run's window (30)")
    p.add_argument("--modes", type=_modes, default=list(MODES), help="off, defaults, listed (all)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    rows = anyio.run(main_async, args)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

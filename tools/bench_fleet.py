#!/usr/bin/env python3
"""What one more NPC costs: a fleet of N Emils under ``fleet run``'s own supervisor, on one server.

For each fleet size N (default 1, 4 and 16) the bench writes a fleet file of N NPCs (docs/fleet.md),
starts them with :class:`emil.fleet.Supervisor` exactly as ``run_emil.py fleet run`` does (each
NPC a ``run_emil.py live`` process with its own Node bot), on one embedded Minecraft server
(flying-squid) against one vLLM-dialect DOUBLE serving a SCRIPTED NpcBrain (not a model: it
answers every chat line; the fleet's NPCs are in each other's npc_players, so their chat to each
other is budgeted). Two players say a line naming the next NPC in turn, so each NPC is spoken to
``--rate`` times a minute (an ordinary chat rate: 3). Then, over ``--seconds``:

- memory: resident set (RSS) and proportional set (PSS: shared pages split between the
  processes that map them, what one more process really adds) of each Emil's Python process
  and of its Node bot, at the end of the window;
- CPU: each process's user+system CPU over the window, per turn the NPC finished, and per
  second while idle (a window of ``--idle`` seconds with nobody talking, before the chat);
- loop overhead: the latency (event -> first action) of each turn that acted (a line naming
  the NPC: urgent, so no chat debounce) minus its first model call: what Emil's own loop, its
  bot and the contention of the machine's cores add;
- model requests per minute per NPC (chat completions the double received, by session key).

    python3 tools/bench_fleet.py [--npcs 1,4,16] [--seconds 60] [--rate 3] [--runs 1] [--json]

Run it under ``nice`` on a shared machine; 32 NPCs take about 8 GiB and a minute of start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from typing import TYPE_CHECKING

import anyio

from emil.cli_args import OneLineParser, positive_float, positive_int, positive_ints

if TYPE_CHECKING:
    from emil.sandbox.server import EmbeddedServer
    from emil.testing.vllm_double import VLLMDouble

TICK = 100  # os.sysconf("SC_CLK_TCK") on Linux


@dataclass
class Proc:
    """CPU and memory of one process, read from /proc."""

    pid: int

    def cpu_s(self) -> float:
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / TICK

    def memory_mib(self) -> tuple[float, float]:
        """(RSS, PSS) in MiB."""
        rss = pss = 0.0
        try:
            for line in Path(f"/proc/{self.pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) / 1024
        except OSError:
            pass
        return rss, pss


def _node_of(pid: int) -> Proc | None:
    """The Node bot of the Emil ``pid``: a node process in its process group (fleet run gives
    each NPC its own)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        child = int(stat.parent.name)
        if int(fields[2]) != pid or child == pid:
            continue
        try:  # node names its main thread "MainThread": its comm says nothing
            program = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if Path(program.decode(errors="replace")).name == "node":
            return Proc(child)
    return None


def _fleet_file(folder: Path, n: int, endpoint: str, mc_port: int) -> tuple[Path, list[str]]:
    names = [f"Npc{i + 1}" for i in range(n)]
    lines = [f'endpoint = "{endpoint}"', f"mc_port = {mc_port}", 'recording_dir = "recordings"',
             'metrics_address = "127.0.0.1:0"', "endpoint_wait_s = 60"]
    for name in names:
        lines += ["", "[[npc]]", f'name = "{name}"', f'persona = "You are {name}, one of {n} villagers."',
                  f'data_dir = "data/{name.lower()}"', "metrics_port = 0"]
    path = folder / f"fleet-{n}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path, names


def _playing(log: Path, name: str) -> bool:
    return log.exists() and f"playing as {name}" in log.read_text(errors="replace")


async def one_run(server: EmbeddedServer, double: VLLMDouble, n: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from emil.fleet import Supervisor, check_fleet, live_command
    from emil.fleet.restart import RestartPolicy
    from emil.recording import CompletionRecord, TurnRecord, read_recording
    from emil.testing.emil_processes import Chat
    from emil.testing.processes import child_env

    config, names = _fleet_file(folder, n, double.base_url, server.port)
    plan = check_fleet(config, env={})
    assert plan.ok, plan.problems
    env = child_env({k: v for k, v in __import__("os").environ.items() if not k.startswith("EMIL_")})
    sup = Supervisor({name: live_command(config.resolve(), name) for name in names}, folder / "logs",
                     policy=RestartPolicy(burst=1), say=lambda _line: None, env=env, cwd=folder)
    started = time.monotonic()
    row: dict[str, Any] = {"npcs": n}
    async with anyio.create_task_group() as tg:
        tg.start_soon(sup.run)
        with anyio.fail_after(60 + 15 * n):
            while not all(_playing(npc.log, npc.name) for npc in sup.npcs):
                assert not any(npc.final for npc in sup.npcs), [(x.name, x.final) for x in sup.npcs]
                await anyio.sleep(0.5)
        row["start_s"] = round(time.monotonic() - started, 1)
        await anyio.sleep(3.0)  # joins settle
        pythons = {npc.name: Proc(npc.proc.pid) for npc in sup.npcs if npc.proc is not None}
        nodes = {name: _node_of(p.pid) for name, p in pythons.items()}
        # idle: nobody talks
        cpu0 = {name: (p.cpu_s(), nodes[name].cpu_s() if nodes[name] else 0.0) for name, p in pythons.items()}
        await anyio.sleep(args.idle)
        cpu1 = {name: (p.cpu_s(), nodes[name].cpu_s() if nodes[name] else 0.0) for name, p in pythons.items()}
        idle = {name: ((cpu1[name][0] - cpu0[name][0]) / args.idle, (cpu1[name][1] - cpu0[name][1]) / args.idle)
                for name in names}
        # chat at the ordinary rate
        talk = Chat(("alex", "bella"), names, every_s=60.0 / (args.rate * n))
        req0 = len(double.request_headers)
        tg.start_soon(talk.run, server)
        await anyio.sleep(5.0)  # the players join, and the turns their joins start pass
        t0 = time.time()
        cpu2 = {name: (p.cpu_s(), nodes[name].cpu_s() if nodes[name] else 0.0) for name, p in pythons.items()}
        await anyio.sleep(args.seconds)
        cpu3 = {name: (p.cpu_s(), nodes[name].cpu_s() if nodes[name] else 0.0) for name, p in pythons.items()}
        t1 = time.time()
        memory = {name: (p.memory_mib(), nodes[name].memory_mib() if nodes[name] else (0.0, 0.0))
                  for name, p in pythons.items()}
        headers = double.request_headers[req0:]
        sup.stop("bench done")
        with anyio.fail_after(120):
            while any(npc.proc is not None and npc.proc.returncode is None for npc in sup.npcs):  # noqa: ASYNC110
                await anyio.sleep(0.3)
        tg.cancel_scope.cancel()
    per_key: Counter[str] = Counter()
    for path, h in headers:
        if path.endswith("/chat/completions"):
            per_key[h.get("x-session-id", "?").rsplit("-", 1)[0]] += 1
    turns: dict[str, int] = {}
    overheads: list[float] = []
    latencies: list[float] = []
    for name in names:
        (recording,) = sorted((folder / "recordings").glob(f"emil-*-{name}.jsonl"))[-1:]
        records = read_recording(recording).records
        first_call: dict[int | None, float] = {}
        for r in records:  # each turn's first model call (steps count from 1)
            if isinstance(r, CompletionRecord) and r.attempt == 0 and r.total_s is not None:
                first_call.setdefault(r.turn, r.total_s)
        done = [r for r in records if isinstance(r, TurnRecord) and t0 <= r.t <= t1]
        turns[name] = len(done)
        for r in done:
            if r.latency_first_action_ms is not None and r.turn in first_call:
                latency = r.latency_first_action_ms / 1000
                latencies.append(latency)
                overheads.append(latency - first_call[r.turn])
    window = t1 - t0
    py_turn = [(cpu3[x][0] - cpu2[x][0]) / turns[x] for x in names if turns[x]]
    node_turn = [(cpu3[x][1] - cpu2[x][1]) / turns[x] for x in names if turns[x]]
    row.update({
        "seconds": round(window, 1),
        "lines_said": len(talk.said),
        "python_rss_mib": _spread([memory[x][0][0] for x in names]),
        "python_pss_mib": _spread([memory[x][0][1] for x in names]),
        "node_rss_mib": _spread([memory[x][1][0] for x in names]),
        "node_pss_mib": _spread([memory[x][1][1] for x in names]),
        "python_idle_cpu_pct": _spread([100 * idle[x][0] for x in names]),
        "node_idle_cpu_pct": _spread([100 * idle[x][1] for x in names]),
        "python_cpu_ms_per_turn": _spread([1000 * v for v in py_turn]),
        "node_cpu_ms_per_turn": _spread([1000 * v for v in node_turn]),
        # the Node bot's CPU per turn beyond what it burns idle (physics ticks) over the window
        "node_cpu_ms_per_turn_net": _spread([1000 * ((cpu3[x][1] - cpu2[x][1]) - idle[x][1] * window) / turns[x]
                                             for x in names if turns[x]]),
        "turns_per_npc": _spread([float(turns[x]) for x in names]),
        "requests_per_min_per_npc": _spread([per_key[x] * 60 / window for x in names]),
        "requests_per_min_total": round(sum(per_key[x] for x in names) * 60 / window, 1),
        "turn_latency_s": _spread(latencies),
        "loop_overhead_s": _spread(overheads),
        "cpu_total_pct": round(100 * sum((cpu3[x][0] - cpu2[x][0]) + (cpu3[x][1] - cpu2[x][1]) for x in names)
                               / window, 1),
    })
    return row


def _spread(values: list[float]) -> dict[str, float] | None:
    """median, min and max (None without values)."""
    if not values:
        return None
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


def _fmt(s: dict[str, float] | None, unit: str = "") -> str:
    if s is None:
        return "-"
    return f"{s['median']:g}{unit} ({s['min']:g}-{s['max']:g})"


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    # imported once the command line parsed: --help and a bad flag stay cheap
    from emil.sandbox.server import EmbeddedServer
    from emil.testing.brains import AddressedBrain
    from emil.testing.vllm_double import VLLMDouble
    from emil.world.setup import ensure_js_deps

    ensure_js_deps(progress=False)
    rows = []
    with contextlib.ExitStack() as stack:
        tmp = str(args.workdir) if args.workdir else stack.enter_context(tempfile.TemporaryDirectory())
        async with EmbeddedServer() as server, VLLMDouble(AddressedBrain()) as double:
            for run in range(args.runs):
                for n in args.npcs:
                    folder = Path(tmp) / f"run{run}-{n}"
                    folder.mkdir()
                    row = await one_run(server, double, n, args, folder)
                    row["run"] = run + 1
                    rows.append(row)
                    if not args.json:
                        print(f"run {run + 1}, {n} NPC(s): start {row['start_s']} s; window {row['seconds']} s, "
                              f"{row['lines_said']} player lines", flush=True)
                        for key, unit in (("python_rss_mib", " MiB"), ("python_pss_mib", " MiB"),
                                          ("node_rss_mib", " MiB"), ("node_pss_mib", " MiB"),
                                          ("python_idle_cpu_pct", "%"), ("node_idle_cpu_pct", "%"),
                                          ("python_cpu_ms_per_turn", " ms"), ("node_cpu_ms_per_turn", " ms"),
                                          ("node_cpu_ms_per_turn_net", " ms"),
                                          ("turns_per_npc", ""), ("requests_per_min_per_npc", ""),
                                          ("turn_latency_s", " s"), ("loop_overhead_s", " s")):
                            print(f"  {key:<26} {_fmt(row[key], unit)}", flush=True)
                        print(f"  {'requests_per_min_total':<26} {row['requests_per_min_total']:g}", flush=True)
                        print(f"  {'cpu_total_pct':<26} {row['cpu_total_pct']:g}% of one core (NPCs only)", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="bench_fleet.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--npcs", type=positive_ints, default=[1, 4, 16], help="fleet sizes, comma-separated (1,4,16)")
    p.add_argument("--seconds", type=positive_float, default=60.0, help="length of each chat window (60)")
    p.add_argument("--idle", type=positive_float, default=10.0, help="length of the idle window before it (10)")
    p.add_argument("--rate", type=positive_float, default=3.0, help="lines a minute said to each NPC (3)")
    p.add_argument("--runs", type=positive_int, default=1, help="runs of every size (1)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--workdir", type=Path, default=None, help="keep the fleets' files (logs, recordings) in this folder (default: a temporary one)")
    args = p.parse_args(argv)
    rows = anyio.run(main_async, args)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

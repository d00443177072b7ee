#!/usr/bin/env python3
"""The 1,000-NPC arithmetic in small: a fleet behind the real vllm-router and gated double replicas.

A fleet of ``--npcs`` Emils (``fleet run``'s own supervisor, each NPC a ``run_emil.py live``
process, the fleet's names in each one's npc_players) on one embedded Minecraft server, its
endpoint the real vllm-router (``--policy consistent_hash`` on Emil's session key, as
docs/scale-out.md deploys it) in front of ``--replicas`` vLLM-dialect DOUBLES, each gated to
``--slots`` requests at a time for ``--service-s`` each (emil.testing.double_replicas: a replica
with a capacity; not vLLM, no model: an AddressedBrain answers only lines naming its NPC). Two
players speak to each NPC ``--rate`` times a minute. The scale-out rig's players and the router
wrapper are reused (emil.testing.emil_processes, emil.serving.router).

It prints, next to what was measured, what docs/fleet.md's arithmetic predicts: the most
requests a minute each NPC sends at this fleet size and chat rate, and per replica the arrival
rate its sessions bring at the fleet's measured per-NPC rate, its utilisation (arrivals x mean
service time) and its mean queueing wait (M/D/1, for one slot).

    python3 tools/sim_fleet.py [--npcs 8] [--replicas 3] [--slots 1] [--service-s 0.25] [--rate 3] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_float, positive_int

NPC_TURNS_PER_MINUTE = 2.0  # the npc_turns_per_minute default: another NPC's lines start turns at most this often
TURNS_PER_MINUTE = 30.0  # the turns_per_minute default: one NPC's turns at most


def predicted_requests_per_min(npcs: int, rate: float) -> float:
    """docs/fleet.md's per-NPC estimate: every NPC on a server hears every line. A line naming
    it is a turn of two requests (say, then the turn's end); any other player line is a turn
    of one; each other NPC's answers start turns within their budget; at most
    ``TURNS_PER_MINUTE`` turns (lines that arrive while a turn runs join the next one)."""
    player_turns = rate * npcs
    npc_turns = (npcs - 1) * min(rate, NPC_TURNS_PER_MINUTE)
    return min(player_turns + npc_turns, TURNS_PER_MINUTE) + rate


def _fleet_file(folder: Path, n: int, endpoint: str, mc_port: int) -> tuple[Path, list[str]]:
    names = [f"Npc{i + 1}" for i in range(n)]
    lines = [f'endpoint = "{endpoint}"', f"mc_port = {mc_port}", 'recording_dir = "recordings"',
             'metrics_address = "127.0.0.1:0"', "endpoint_wait_s = 60", "request_timeout_s = 300"]
    for name in names:
        lines += ["", "[[npc]]", f'name = "{name}"', f'persona = "You are {name}, one of {n} villagers."',
                  f'data_dir = "data/{name.lower()}"', "metrics_port = 0"]
    path = folder / "fleet.toml"
    path.write_text("\n".join(lines) + "\n")
    return path, names


async def simulate(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    # imported once the command line parsed: --help and a bad flag stay cheap
    from emil.fleet import Supervisor, check_fleet, live_command
    from emil.fleet.restart import RestartPolicy
    from emil.sandbox.server import EmbeddedServer
    from emil.serving.cpu_env import CpuVLLMEnv
    from emil.serving.router import RouterOptions, VLLMRouter
    from emil.testing.brains import AddressedBrain
    from emil.testing.double_replicas import DoubleReplicas
    from emil.testing.emil_processes import Chat
    from emil.testing.processes import child_env

    env_vllm = CpuVLLMEnv.default()
    replicas = DoubleReplicas(args.replicas, AddressedBrain, slots=args.slots, service_s=args.service_s)
    replicas.start()
    router = VLLMRouter(env_vllm.router, replicas.urls, RouterOptions(policy="consistent_hash"),
                        log_path=folder / "router.log")
    try:
        await anyio.to_thread.run_sync(router.start)
        async with EmbeddedServer() as server:
            config, names = _fleet_file(folder, args.npcs, router.base_url, server.port)
            plan = check_fleet(config, env={})
            assert plan.ok, plan.problems
            env = child_env({k: v for k, v in os.environ.items() if not k.startswith("EMIL_")})
            sup = Supervisor({n: live_command(config.resolve(), n) for n in names}, folder / "logs",
                             policy=RestartPolicy(burst=1), say=lambda _l: None, env=env, cwd=folder)
            async with anyio.create_task_group() as tg:
                tg.start_soon(sup.run)
                with anyio.fail_after(60 + 15 * args.npcs):
                    while not all(n.log.exists() and f"playing as {n.name}" in n.log.read_text(errors="replace")
                                  for n in sup.npcs):
                        assert not any(n.final for n in sup.npcs), [(n.name, n.final) for n in sup.npcs]
                        await anyio.sleep(0.5)
                talk = Chat(("alex", "bella"), names, every_s=60.0 / (args.rate * args.npcs))
                tg.start_soon(talk.run, server)
                await anyio.sleep(5.0)  # players join; their joins' turns pass
                since = time.monotonic()
                await anyio.sleep(args.seconds)
                until = time.monotonic()
                sup.stop("simulation done")
                with anyio.fail_after(120):
                    while any(n.proc is not None and n.proc.returncode is None for n in sup.npcs):  # noqa: ASYNC110
                        await anyio.sleep(0.3)
                tg.cancel_scope.cancel()
    finally:
        router.stop()
        replicas.stop()
    figures = replicas.figures(since, until)
    per_npc = sum(f.requests for f in figures) * 60 / (until - since) / args.npcs
    predicted = predicted_requests_per_min(args.npcs, args.rate)
    rows = []
    for f in figures:
        # the arithmetic: this replica's sessions at the fleet's mean per-NPC rate, each request
        # holding the replica for the mean service time; the wait is M/D/1's
        lam = len(f.sessions) * per_npc / 60
        rho = lam * f.service_s / args.slots
        rows.append({
            "sessions": f.sessions, "requests": f.requests, "arrivals_per_s": round(f.arrivals_per_s, 3),
            "predicted_arrivals_per_s": round(lam, 3), "service_s": round(f.service_s, 3),
            "utilisation": round(f.utilisation, 3), "predicted_utilisation": round(rho, 3),
            "wait_s": round(f.wait_s, 3), "predicted_wait_s": round(f.predicted_wait_s(args.slots), 3),
        })
    return {"npcs": args.npcs, "replicas": args.replicas, "slots": args.slots, "service_s": args.service_s,
            "rate": args.rate, "seconds": round(until - since, 1),
            "requests_per_min_per_npc": round(per_npc, 1), "predicted_requests_per_min_per_npc": round(predicted, 1),
            "replica": rows}


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="sim_fleet.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--npcs", type=positive_int, default=8, help="NPCs in the fleet (8)")
    p.add_argument("--replicas", type=positive_int, default=3, help="double replicas behind the router (3)")
    p.add_argument("--slots", type=positive_int, default=1, help="requests one replica serves at once (1)")
    p.add_argument("--service-s", type=positive_float, default=0.25, help="seconds one request holds a slot (0.25)")
    p.add_argument("--rate", type=positive_float, default=3.0, help="lines a minute said to each NPC (3)")
    p.add_argument("--seconds", type=positive_float, default=60.0, help="length of the measured window (60)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    import logging

    from emil.world.setup import ensure_js_deps

    # an NPC stopped with a request in flight is a client gone: not news at the end of a run
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)

    ensure_js_deps(progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        result = anyio.run(simulate, args, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{result['npcs']} NPCs, {result['replicas']} replicas x {result['slots']} slot(s) of {result['service_s']} s, "
          f"{result['rate']:g} lines/min to each NPC, {result['seconds']} s")
    print(f"requests/min per NPC: {result['requests_per_min_per_npc']} measured, "
          f"{result['predicted_requests_per_min_per_npc']} predicted")
    print("replica  sessions                 requests  arrivals/s (pred)  service s  utilisation (pred)  wait s (pred)")
    for i, r in enumerate(result["replica"]):
        print(f"{i:>7}  {','.join(s.removeprefix('Npc') for s in r['sessions']):<23}  {r['requests']:>8}  "
              f"{r['arrivals_per_s']:>6} ({r['predicted_arrivals_per_s']:>6})  {r['service_s']:>9}  "
              f"{r['utilisation']:>6} ({r['predicted_utilisation']:>6})    {r['wait_s']:>5} ({r['predicted_wait_s']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Chaos table: every fault class of issue #11 against Emil as an operator runs it, several times.

Real embedded Minecraft server, real mineflayer players, Emil as its own process (``run_emil.py
live``) and the vLLM-dialect DOUBLE (a SCRIPTED brain, not a model) in a process of its own,
whose fault modes are set over HTTP (emil/testing/chaos_scenarios.py has the scenarios; the
slow fault suite asserts the same ones). Prints one row per fault: what Emil did, the time to
recover (fault -> first answer after it, or -> process exit for an exit) as a range over the
runs, the player lines the recording lost, and whether every run was the documented outcome.

    python3 tools/chaos.py --runs 3                 # every scenario, three times
    python3 tools/chaos.py --only hang,flood --runs 1
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, positive_int
from emil.testing.chaos import ScenarioResult, chaos_rig
from emil.testing.chaos_scenarios import ALIVE, EXITS
from emil.world.setup import ensure_js_deps


async def _one_run(workdir: Path, only: set[str] | None) -> list[ScenarioResult]:
    results: list[ScenarioResult] = []
    async with chaos_rig(workdir) as rig:
        alive = [name for name in ALIVE if only is None or name in only]
        if alive:
            await rig.start_emil()
            assert rig.emil is not None and rig.emil.returncode is None, rig.emil.stderr() if rig.emil else ""
            await rig.probe(within=40)
            for name in alive:
                await rig.begin()
                result = await ALIVE[name](rig)
                print(f"  {name}: {result.did} in {_s(result.recover_s)}, ok={result.ok} {result.detail}", flush=True)
                results.append(result)
                if rig.emil.returncode is not None:
                    print(f"  Emil ended ({rig.emil.returncode}); the remaining alive scenarios are skipped")
                    break
            await rig.emil.stop()
        for name in EXITS:
            if only is not None and name not in only:
                continue
            await rig.begin()
            result = await EXITS[name](rig)
            print(f"  {name}: {result.did} in {_s(result.recover_s)}, ok={result.ok} {result.detail}", flush=True)
            results.append(result)
    return results


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _range(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "never"
    lo, hi = min(known), max(known)
    missing = "" if len(known) == len(values) else f" ({len(values) - len(known)} never)"
    return (f"{lo:.1f} s" if abs(hi - lo) < 0.05 else f"{lo:.1f}-{hi:.1f} s") + missing


def table(runs: list[list[ScenarioResult]]) -> str:
    by_fault: dict[str, list[ScenarioResult]] = defaultdict(list)
    for run in runs:
        for r in run:
            by_fault[r.fault].append(r)
    lines = ["| fault | what Emil did | time to recover | records lost | documented outcome |", "|---|---|---|---|---|"]
    for fault, rs in by_fault.items():
        did = rs[0].did if all(r.did == rs[0].did for r in rs) else " / ".join(sorted({r.did for r in rs}))
        lost = sorted({r.lost for r in rs})
        ok = sum(r.ok for r in rs)
        lines.append(f"| {fault} | {did} | {_range([r.recover_s for r in rs])} | "
                     f"{lost[0] if len(lost) == 1 else f'{lost[0]}-{lost[-1]}'} | {ok}/{len(rs)} runs |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=3, help="runs of every scenario (default 3)")
    parser.add_argument("--only", help="comma-separated scenario names: " + ", ".join([*ALIVE, *EXITS]))
    parser.add_argument("--json-out", type=Path, help="also write every result as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work folders (recordings, stderr)")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - set(ALIVE) - set(EXITS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    logging.basicConfig(level=logging.ERROR)
    ensure_js_deps(progress=True)
    runs: list[list[ScenarioResult]] = []
    base = Path(tempfile.mkdtemp(prefix="emil-chaos-"))
    for i in range(args.runs):
        print(f"run {i + 1}/{args.runs} (work folder {base / f'run{i + 1}'})", flush=True)
        runs.append(anyio.run(_one_run, base / f"run{i + 1}", only))
    print()
    print(f"chaos: {args.runs} runs; Emil as a process, embedded server, real players, vLLM-dialect double "
          "(SCRIPTED brain) in its own process")
    print(table(runs))
    if args.json_out:
        args.json_out.write_text(json.dumps([[r.row() | {"detail": r.detail} for r in run] for run in runs],
                                            indent=2, default=str))
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 0 if all(r.ok for run in runs for r in run) else 1


if __name__ == "__main__":
    raise SystemExit(main())

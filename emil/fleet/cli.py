"""``run_emil.py fleet check | units | run`` (docs/fleet.md).

Every subcommand checks the whole fleet first (:func:`emil.fleet.plan.check_fleet`): a problem
in any NPC is one line on stderr naming it, and exit 2 before anything is written or started.

- ``check [--config FILE]``: print what would run.
- ``units --out DIR [--config FILE] [--workdir DIR] [--user NAME] [--image IMAGE]``: write the
  systemd template unit, the fleet's target and the Kubernetes manifest (emil.fleet.units).
- ``run [--config FILE] [--log-dir DIR]``: run every NPC as a child process until Ctrl-C
  (emil.fleet.supervisor); exits 2 when an NPC ended on a configuration error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from emil.cli_args import OneLineParser
from emil.exceptions import ConfigurationError

if TYPE_CHECKING:
    from emil.fleet.plan import FleetPlan

__all__ = ["cli_main"]

EXIT_CONFIG = 2


def _parser() -> OneLineParser:
    p = OneLineParser(prog="run_emil.py fleet", description="Many NPCs from one config file's [[npc]] tables.",
                      allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="{check,units,run}")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--config", metavar="FILE", help="the fleet's config file (default: EMIL_CONFIG, else ./emil.toml)")

    common(sub.add_parser("check", help="check every NPC's settings; print what would run", allow_abbrev=False))
    units = sub.add_parser("units", help="write the systemd and Kubernetes units", allow_abbrev=False)
    common(units)
    units.add_argument("--out", metavar="DIR", type=Path, required=True, help="folder to write the units into")
    units.add_argument("--workdir", metavar="DIR", type=Path, default=None,
                       help="the NPCs' working directory in the systemd unit (default: the current one)")
    units.add_argument("--user", metavar="NAME", default=None, help="systemd User= of the unit (default: none)")
    units.add_argument("--image", metavar="IMAGE", default="emil:latest",
                       help="container image of the Kubernetes Jobs (default: emil:latest)")
    run = sub.add_parser("run", help="run every NPC as a child process until Ctrl-C (development)", allow_abbrev=False)
    common(run)
    run.add_argument("--log-dir", metavar="DIR", type=Path, default=Path("logs"),
                     help="each NPC's output goes to DIR/NAME.log (default: logs)")
    return p


def _checked(config: str | None) -> FleetPlan | None:
    from emil.fleet.plan import check_fleet

    try:
        plan = check_fleet(config)
    except ConfigurationError as e:
        print(f"emil fleet: {' '.join(str(e).split())}", file=sys.stderr)
        return None
    if not plan.ok:
        for problem in plan.problems:
            print(f"emil fleet: {problem}", file=sys.stderr)
        bad = len({p.npc for p in plan.problems})
        print(f"emil fleet: {len(plan.problems)} problem(s) in {bad} NPC(s) of {plan.path}; nothing started",
              file=sys.stderr)
        return None
    return plan


def cli_main(argv: Sequence[str]) -> int:
    """``run_emil.py fleet ...``; the exit code."""
    args = _parser().parse_args(list(argv))
    # what a check needs (templates, tokenizers) is imported once the command line parsed
    from emil.fleet.plan import format_plan
    from emil.fleet.supervisor import Supervisor, live_command
    from emil.fleet.units import UnitOptions, write_units

    plan = _checked(args.config)
    if plan is None:
        return EXIT_CONFIG
    if args.command == "check":
        print(format_plan(plan))
        return 0
    config = plan.path.resolve()
    if args.command == "units":
        options = UnitOptions(config=config, workdir=(args.workdir or Path.cwd()).resolve(),
                              python=Path(sys.executable), user=args.user, image=args.image)
        try:
            written = write_units(plan, options, args.out)
        except ConfigurationError as e:
            print(f"emil fleet: {' '.join(str(e).split())}", file=sys.stderr)
            return EXIT_CONFIG
        for path in written:
            print(f"wrote {path}")
        names = " ".join(f"emil@{n.name}" for n in plan.npcs)
        print(f"systemd: copy emil@.service and emil-fleet.target to /etc/systemd/system, then "
              f"`systemctl daemon-reload && systemctl enable --now emil-fleet.target` (instances: {names})")
        print(f"kubernetes: `kubectl apply -f {args.out / 'emil-fleet.yaml'}` (image {args.image}: docs/fleet.md)")
        return 0
    supervisor = Supervisor({n.name: live_command(config, n.name) for n in plan.npcs}, args.log_dir,
                            say=lambda line: print(line, flush=True))
    print(f"fleet: {len(plan.npcs)} NPCs from {plan.path}; logs in {args.log_dir}/; Ctrl-C stops them all", flush=True)
    import anyio

    return anyio.run(supervisor.run)

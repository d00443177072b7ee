"""A fleet: many Emils (NPCs) from one config file's ``[[npc]]`` tables (docs/fleet.md).

- :mod:`emil.fleet.plan`: ``fleet check``, every NPC's settings resolved through the one
  settings path (emil.config, ``npc=NAME``) and checked at once; what would run.
- :mod:`emil.fleet.restart`: the one restart rule (exit 2 never, 1, 3 and crashes with backoff).
- :mod:`emil.fleet.units`: ``fleet units``, the systemd template unit and the Kubernetes Jobs
  that let the platform supervise the fleet by that rule.
- :mod:`emil.fleet.supervisor`: ``fleet run``, the same rule over child processes, for
  development.
- :mod:`emil.fleet.cli`: the ``run_emil.py fleet`` command line.
"""

from emil.fleet.plan import FleetPlan, NpcPlan, Problem, check_fleet, format_plan
from emil.fleet.restart import RestartPolicy
from emil.fleet.supervisor import Supervisor, live_command
from emil.fleet.units import UnitOptions, write_units

__all__ = [
    "FleetPlan",
    "NpcPlan",
    "Problem",
    "RestartPolicy",
    "Supervisor",
    "UnitOptions",
    "check_fleet",
    "format_plan",
    "live_command",
    "write_units",
]

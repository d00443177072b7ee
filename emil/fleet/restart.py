"""The one restart rule of a fleet, read by the generated units and by ``fleet run`` alike.

Emil's exit codes say what is transient (docs/operations.md): 0 stopped on purpose, 1 a bug,
2 a configuration error, 3 a service gone past its patience. A configuration error is never
restarted (it would fail the same way forever: the field notes' nine reloads of 23 GiB); 1, 3
and a crash (a signal) are, after a delay that grows from :attr:`RestartPolicy.first_delay_s`
to :attr:`RestartPolicy.max_delay_s` over :attr:`RestartPolicy.steps` restarts, and at most
:attr:`RestartPolicy.burst` times within :attr:`RestartPolicy.interval_s` (then the NPC stays
down: a person looks). These are systemd's ``RestartSec``, ``RestartMaxDelaySec``,
``RestartSteps``, ``StartLimitBurst`` and ``StartLimitIntervalSec``, and the same arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_POLICY", "EXIT_MEANINGS", "RestartPolicy"]

EXIT_MEANINGS = {
    0: "stopped",
    1: "a bug: see its log",
    2: "a configuration error",
    3: "a service gone past its patience",
}
"""What each of Emil's exit codes says (emil.agent.session)."""


@dataclass(frozen=True)
class RestartPolicy:
    """When an NPC's process is started again (see the module docstring)."""

    first_delay_s: float = 2.0
    max_delay_s: float = 120.0
    steps: int = 6
    """Restarts over which the delay grows (exponentially) from first to max."""
    burst: int = 10
    interval_s: float = 900.0
    """At most ``burst`` starts within ``interval_s``; one more and the NPC stays down."""
    never: tuple[int, ...] = (2,)
    """Exit codes never restarted: a configuration error."""
    stop_timeout_s: float = 60.0
    """How long a stop (SIGTERM) may take before SIGKILL."""

    def restarts(self, exit_code: int | None) -> bool:
        """True for an exit that is restarted: any failure but :attr:`never` (a signal's
        death, ``None`` or negative, is a crash)."""
        if exit_code == 0:
            return False
        return exit_code not in self.never

    def delay_s(self, restarts_so_far: int) -> float:
        """The wait before restart number ``restarts_so_far + 1`` (systemd's RestartSteps:
        first * (max/first) ** (n/steps), capped at max)."""
        if self.steps <= 0 or self.max_delay_s <= self.first_delay_s:
            return self.first_delay_s
        n = min(restarts_so_far, self.steps)
        grown = float(self.first_delay_s * (self.max_delay_s / self.first_delay_s) ** (n / self.steps))
        return min(self.max_delay_s, grown)


DEFAULT_POLICY = RestartPolicy()
"""The rule the generated units and ``fleet run`` use."""

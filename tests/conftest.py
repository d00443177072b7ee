"""The whole suite: every process a test run starts is stopped when the run ends, however it ends.

:func:`emil.testing.processes.begin_run` tags this run's environment (every child inherits the
tag), stops what earlier runs whose pytest is gone left running, and starts the watchdog that
stops this run's leftovers once pytest has exited (normally, on Ctrl-C, SIGTERM or SIGKILL).
SIGTERM is turned into the KeyboardInterrupt of a Ctrl-C, so fixtures tear down their servers as
they do on Ctrl-C instead of dying with them running.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest

from emil.testing import processes


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    start = processes.begin_run()
    if start.swept:
        lines = "\n".join(f"  {line}" for line in start.swept)
        config.issue_config_time_warning(
            pytest.PytestWarning(f"stopped {len(start.swept)} process(es) left by an earlier test run that is gone:\n{lines}"),
            stacklevel=2,
        )
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)

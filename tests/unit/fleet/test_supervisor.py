"""``fleet run``'s rule over real child processes (small Python ones standing in for Emils):
exit 2 and 0 are final, 1, 3 and a crash are restarted with the growing delay, a burst is
given up, and a stop ends every child and what is left of its group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from emil.fleet.restart import DEFAULT_POLICY, RestartPolicy
from emil.fleet.supervisor import Supervisor

FAST = RestartPolicy(first_delay_s=0.05, max_delay_s=0.4, steps=3, burst=4, interval_s=60, stop_timeout_s=5)


def _child(tmp_path: Path, name: str, body: str) -> list[str]:
    """A child that counts its starts in a file, then runs ``body`` (``n``: this start's number)."""
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import os, signal, sys, time\n"
        f"count = {str(tmp_path / name)!r} + '.starts'\n"
        "n = len(open(count).read()) if os.path.exists(count) else 0\n"
        "open(count, 'a').write('x')\n"
        "print(f'start {n}', flush=True)\n" + body
    )
    return [sys.executable, str(script)]


def _starts(tmp_path: Path, name: str) -> int:
    path = tmp_path / f"{name}.starts"
    return len(path.read_text()) if path.exists() else 0


async def _run(sup: Supervisor) -> int:
    return await sup.run()


def test_exit_2_is_final_3_and_crashes_restart(tmp_path: Path) -> None:
    lines: list[str] = []
    sup = Supervisor({
        "Conf": _child(tmp_path, "Conf", "print('emil: configuration error: bad thing; fix it'); sys.exit(2)\n"),
        "Gone": _child(tmp_path, "Gone", "sys.exit(3 if n < 2 else 0)\n"),
        "Crash": _child(tmp_path, "Crash", "os.kill(os.getpid(), signal.SIGKILL) if n < 1 else sys.exit(0)\n"),
    }, tmp_path / "logs", policy=FAST, say=lines.append, signals=False)
    code = anyio.run(_run, sup)
    assert code == 2  # an NPC ended on a configuration error
    assert (_starts(tmp_path, "Conf"), _starts(tmp_path, "Gone"), _starts(tmp_path, "Crash")) == (1, 3, 2)
    text = "\n".join(lines)
    assert "fleet: Conf: exited 2 (a configuration error); not restarted: emil: configuration error: bad thing; fix it" in text
    assert "fleet: Gone: exited 3 (a service gone past its patience); restart 1 in 0.05 s" in text
    assert "fleet: Gone: exited 0 (stopped); not restarted" in text
    assert "fleet: Crash: exited -9 (killed by SIGKILL: a crash); restart 1 in 0.05 s" in text
    assert (tmp_path / "logs" / "Conf.log").read_text().startswith("start 0")


def test_the_delay_grows_and_a_burst_is_given_up(tmp_path: Path) -> None:
    lines: list[str] = []
    sup = Supervisor({"Bug": _child(tmp_path, "Bug", "sys.exit(1)\n")}, tmp_path / "logs", policy=FAST,
                     say=lines.append, signals=False)
    assert anyio.run(_run, sup) == 1
    assert _starts(tmp_path, "Bug") == FAST.burst
    delays = [float(ln.rsplit(" in ", 1)[1].removesuffix(" s")) for ln in lines if "restart " in ln]
    assert delays == [round(FAST.delay_s(i), 3) for i in range(FAST.burst - 1)] and delays == sorted(delays)
    assert lines[-1].startswith(f"fleet: Bug: exited 1 (a bug: see its log); given up: {FAST.burst} starts within 60 s, "
                                "not restarted")


def test_the_delays_are_systemds_arithmetic() -> None:
    p = DEFAULT_POLICY
    assert p.delay_s(0) == p.first_delay_s
    assert p.delay_s(p.steps) == pytest.approx(p.max_delay_s) and p.delay_s(p.steps + 5) == pytest.approx(p.max_delay_s)
    assert p.delay_s(p.steps // 2) == pytest.approx((p.first_delay_s * p.max_delay_s) ** 0.5)
    assert [p.restarts(c) for c in (0, 1, 2, 3, -9)] == [False, True, False, True, True]


def test_a_policy_that_cannot_grow_waits_its_first_delay() -> None:
    """No steps (systemd's RestartSteps=0) or a max under the first delay: every wait is the
    first one (no division by zero, never below it); one step reaches the max at once."""
    assert [RestartPolicy(steps=0).delay_s(n) for n in (0, 3)] == [2.0, 2.0]
    assert RestartPolicy(first_delay_s=10, max_delay_s=5).delay_s(4) == 10
    assert [RestartPolicy(first_delay_s=1, max_delay_s=8, steps=1).delay_s(n) for n in (0, 1, 2)] == [1, 8, 8]


def test_a_stop_ends_every_child_and_its_group(tmp_path: Path) -> None:
    lines: list[str] = []
    # each child leaves a grandchild in its group (as an Emil has its Node bot) and ignores nothing
    body = ("import subprocess\n"
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(tmp_path)!r} + f'/grandchild-{{os.getpid()}}', 'w').write(str(g.pid))\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "time.sleep(60)\n")
    sup = Supervisor({n: _child(tmp_path, n, body) for n in ("A", "B")}, tmp_path / "logs", policy=FAST,
                     say=lines.append, signals=False)

    async def main() -> int:
        async with anyio.create_task_group() as tg:
            result: list[int] = []

            async def run() -> None:
                result.append(await sup.run())

            tg.start_soon(run)
            with anyio.fail_after(20):
                while len(list(tmp_path.glob("grandchild-*"))) < 2:  # noqa: ASYNC110, ASYNC240 - a marker file the child writes
                    await anyio.sleep(0.05)
            sup.stop("test")
        return result[0]

    started = time.monotonic()
    assert anyio.run(main) == 0
    assert time.monotonic() - started < 15
    assert "fleet: A: stopped (exit 0)" in lines and "fleet: B: stopped (exit 0)" in lines
    for marker in tmp_path.glob("grandchild-*"):
        pid = int(marker.read_text())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid), f"grandchild {pid} outlived its NPC"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"

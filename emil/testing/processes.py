"""The child processes of a test run: each in a process group the run stops, none outliving it.

Three layers, each reaching what the one before cannot:

1. **A group per child.** A command started through :func:`run`, :func:`popen` or
   :func:`open_process` leads a process group (a new session) of its own, which holds everything
   it starts (a shell's commands, a demo's Node processes). When the command ends, times out,
   fails or is interrupted, the whole group is stopped: SIGTERM, then SIGKILL after a grace.
   A group started elsewhere (the real-vLLM tier's supervisor) is stopped with
   :func:`stop_group`.
2. **A tag on every process of the run.** :func:`begin_run` (pytest calls it at start, in
   ``tests/conftest.py``) puts the run's tag, ``<pid>.<start time>`` of the pytest process, in
   ``EMIL_TEST_RUN`` of its own environment, so every process the run starts inherits it, and
   the helpers here add it to any environment they are given. A run inside a run (a documented
   command running pytest) appends its tag: ``outer:inner``. The tag is what finds a process
   of the run whatever its group, parent or session.
3. **A watchdog.** :func:`begin_run` starts ``python -m emil.testing.processes watch TAG`` in a
   session of its own, reading a pipe that only pytest holds open. However pytest ends (done,
   Ctrl-C, SIGTERM, SIGKILL), the pipe closes; after a short settle the watchdog stops every
   process still carrying the tag and says on stderr which ones it had to stop. A run's start
   also sweeps processes of earlier runs whose pytest is gone (in case their watchdog was killed
   too): :func:`leftovers`, :func:`sweep`.

A pid can be reused; a pid with its start time cannot, and a stranger's process never carries
the tag, so nothing here signals a process that is not the run's. Linux: processes are read from
/proc (elsewhere the groups still work, the tag sweep finds nothing).

``python -m emil.testing.processes leftovers`` lists processes of runs that are gone;
``... sweep`` stops them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

__all__ = [
    "TAG_VAR",
    "RunStart",
    "begin_run",
    "child_env",
    "describe",
    "group_members",
    "leftovers",
    "open_process",
    "popen",
    "run",
    "run_tag",
    "stop_group",
    "sweep",
    "tagged",
    "terminate",
]

TAG_VAR = "EMIL_TEST_RUN"
"""The environment variable holding the chain of test-run tags a process belongs to."""

_PROC = Path("/proc")
_SETTLE_S = 3.0
"""How long the watchdog lets the run's processes end by themselves (Node exits on its stdin's
end) before it stops them."""


# --- reading /proc ------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after ``pid (comm)``: state, ppid, pgrp, ... (None: gone)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def _pids() -> list[int]:
    try:
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _chain(pid: int) -> list[str]:
    """The run tags in a process's environment as it started (empty: none, or not readable)."""
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return []
    prefix = TAG_VAR.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return [t for t in entry[len(prefix) :].decode(errors="replace").split(":") if t]
    return []


def _run_alive(tag: str) -> bool:
    """Whether the pytest process a tag names still runs (the same pid started at the same time)."""
    pid, _, started = tag.partition(".")
    return pid.isdigit() and _start_time(int(pid)) == started


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    out = []
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            out.append(pid)
    return out


def tagged(tag: str) -> list[int]:
    """Live processes of the run ``tag`` (its tag anywhere in their chain), this one excepted."""
    me = os.getpid()
    return [pid for pid in _pids() if pid != me and tag in _chain(pid) and _alive(pid)]


def leftovers() -> dict[int, str]:
    """Live processes of test runs whose pytest is gone: pid -> the gone run's tag."""
    me = os.getpid()
    found: dict[int, str] = {}
    for pid in _pids():
        if pid == me:
            continue
        gone = next((t for t in _chain(pid) if not _run_alive(t)), None)
        if gone is not None and _alive(pid):
            found[pid] = gone
    return found


def describe(pid: int, width: int = 120) -> str:
    """``pid command line`` (shortened), for messages."""
    try:
        cmd = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"{pid} {cmd[:width]}"


# --- stopping -----------------------------------------------------------------------------------


def _wait_gone(pids: Sequence[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if _alive(p)]
    return left


def terminate(pids: Sequence[int], grace_s: float = 5.0) -> list[int]:
    """SIGTERM each process, SIGKILL those still alive after ``grace_s``; the SIGKILLed are returned."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    stubborn = _wait_gone(pids, grace_s)
    for pid in stubborn:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(stubborn, 5.0)
    return stubborn


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):  # gone already (or never ours)
        os.killpg(pgid, sig)


def stop_group(pgid: int, grace_s: float = 5.0) -> list[int]:
    """Stop process group ``pgid``: SIGTERM, then SIGKILL after ``grace_s`` if any is left.

    Returns the members that were alive when it was called (empty: the group had ended)."""
    members = group_members(pgid)
    if not members:
        return []
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if group_members(pgid):
        _signal_group(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return members


# --- starting -----------------------------------------------------------------------------------


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with this run's tag in it."""
    out = dict(os.environ if env is None else env)
    if TAG_VAR in os.environ:
        out[TAG_VAR] = os.environ[TAG_VAR]
    return out


@contextlib.contextmanager
def popen(args: Any, *, grace_s: float = 5.0, **kwargs: Any) -> Iterator[subprocess.Popen[Any]]:
    """``subprocess.Popen`` leading a process group of its own, stopped (all of it) on exit."""
    kwargs["env"] = child_env(kwargs.get("env"))
    proc = subprocess.Popen(args, start_new_session=True, **kwargs)
    try:
        yield proc
    finally:
        stop_group(proc.pid, grace_s)
        with proc:  # closes the pipes and reaps the leader
            pass


def run(
    args: Any,
    *,
    timeout: float,
    grace_s: float = 5.0,
    input: str | bytes | None = None,
    capture_output: bool = False,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` in a process group of its own: on a timeout, an error or an interrupt
    the whole group is stopped (subprocess.run kills only its direct child, so a shell's or a
    demo's children kept running); what the command left running when it ended is stopped too."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(args, grace_s=grace_s, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc.pid, grace_s)
            out = err = None
            with contextlib.suppress(subprocess.TimeoutExpired):  # a pipe held by another group
                out, err = proc.communicate(timeout=grace_s)
            raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from None
    done = subprocess.CompletedProcess(proc.args, proc.wait(), out, err)
    if check:
        done.check_returncode()
    return done


@contextlib.asynccontextmanager
async def open_process(args: Any, *, grace_s: float = 5.0, **kwargs: Any) -> AsyncIterator[anyio.abc.Process]:
    """``anyio.open_process`` leading a process group of its own, stopped (all of it) on exit."""
    kwargs["env"] = child_env(kwargs.get("env"))
    proc = await anyio.open_process(args, start_new_session=True, **kwargs)
    try:
        yield proc
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(stop_group, proc.pid, grace_s)
            await proc.aclose()


# --- the run ------------------------------------------------------------------------------------


def run_tag(pid: int | None = None) -> str | None:
    """``<pid>.<start time>`` of a process (default: this one); None when /proc cannot say."""
    pid = os.getpid() if pid is None else pid
    started = _start_time(pid)
    return None if started is None else f"{pid}.{started}"


def sweep(grace_s: float = 5.0) -> list[str]:
    """Stop the processes of test runs whose pytest is gone; what was stopped, described."""
    found = leftovers()
    described = [describe(pid) for pid in found]
    terminate(list(found), grace_s)
    return described


@dataclass
class RunStart:
    tag: str | None
    """This run's tag (None where /proc is missing: only the groups work there)."""
    swept: list[str] = field(default_factory=list)
    """Processes of earlier runs that were still running and were stopped, described."""
    watchdog: subprocess.Popen[bytes] | None = None


_run: RunStart | None = None
_pipe: IO[bytes] | None = None


def begin_run(*, watchdog: bool = True) -> RunStart:
    """Tag this process's environment as a test run, sweep gone runs' leftovers, start the
    watchdog. Idempotent within a process."""
    global _run, _pipe
    if _run is not None:
        return _run
    tag = run_tag()
    if tag is None:
        _run = RunStart(None)
        return _run
    swept = sweep()
    outer = os.environ.get(TAG_VAR)
    os.environ[TAG_VAR] = f"{outer}:{tag}" if outer else tag
    dog = None
    if watchdog:
        read, write = os.pipe()  # neither end is inherited by children (Python's default)
        env = dict(os.environ)
        if outer:
            env[TAG_VAR] = outer  # an outer run's watchdog may stop this one; this one's may not
        else:
            env.pop(TAG_VAR)
        dog = subprocess.Popen(
            [sys.executable, "-m", "emil.testing.processes", "watch", tag],
            stdin=read, stdout=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        os.close(read)
        _pipe = os.fdopen(write, "wb")  # held open until this process ends, however it ends
    _run = RunStart(tag, swept, dog)
    return _run


def _watch(tag: str) -> int:
    """The watchdog: wait for the run's end (stdin closes), then stop what it left running."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the run's to handle
    with contextlib.suppress(OSError):
        while sys.stdin.buffer.read(1 << 16):
            pass
    deadline = time.monotonic() + _SETTLE_S
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = tagged(tag)
    if left:
        described = [describe(pid) for pid in left]
        terminate(left)
        sys.stderr.write(f"emil test run {tag} ended; stopped {len(left)} process(es) it left running:\n")
        sys.stderr.writelines(f"  {line}\n" for line in described)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "watch":
        return _watch(args[1])
    if args == ["leftovers"]:
        for pid, tag in sorted(leftovers().items()):
            sys.stdout.write(f"{describe(pid)}  (run {tag})\n")
        return 0
    if args == ["sweep"]:
        for line in sweep():
            sys.stdout.write(f"stopped {line}\n")
        return 0
    sys.stderr.write("usage: python -m emil.testing.processes leftovers | sweep | watch TAG\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

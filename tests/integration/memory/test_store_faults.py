"""The store under faults, with ``run_emil.py live`` as an operator runs it.

Real embedded server, real bots (Emil's and a player's), the vLLM-dialect double with a
SCRIPTED brain (not a model); Emil is a child process stopped with SIGINT (Ctrl-C).

- data_dir turned read-only mid-session: play goes on with one warning, Ctrl-C stops cleanly
  (exit 0, the end record, no SIGBUS, no Node child left), and the archive keeps every line it
  had written. Read-only is ``chattr +i`` on the directory and its files when the test runs as
  root (what SIGBUS-ed a WAL database: the files stay open but the disk refuses writes), else
  ``chmod -R a-w`` (weaker: SQLite only meets it when it creates a file, so the one-warning
  check needs root).
- restart on a read-only data_dir, and on a full disk: one line, a configuration error with its
  fix, exit 2. The full disk is a small tmpfs filled up, mounted directly as root, else inside
  ``unshare --user --mount`` (no root needed where user namespaces are allowed).
- a full disk mid-session: play goes on with one warning, the stop is clean (the lines that
  wait for space and are written once it comes back: tests/unit/memory/test_archive.py).
- the notes database deleted under the running Emil: said, written back, nothing lost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from emil.demo import DemoBrain
from emil.memory.archive import ARCHIVE_FILE, Archive
from emil.memory.store import DB_FILE, MemoryStore
from emil.recording import EndRecord, TurnRecord, read_recording
from emil.sandbox.server import EmbeddedServer
from emil.testing.vllm_double import VLLMDouble
from emil.world.bridge import Bot, BotSettings, ReflexSettings
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[3]
ROOTED = os.geteuid() == 0 and shutil.which("chattr") is not None and shutil.which("mount") is not None


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    path = Path(f"/proc/{pid}/task/{pid}/children")
    for child in path.read_text().split() if path.exists() else []:
        out += [int(child), *_descendants(int(child))]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[str]:
    """``path`` made read-only while the block runs; how (``immutable`` or ``permissions``)."""
    if ROOTED:
        subprocess.run(["chattr", "-R", "+i", str(path)], check=True)
        try:
            yield "immutable"
        finally:
            subprocess.run(["chattr", "-R", "-i", str(path)], check=False)
    else:
        modes = {p: p.stat().st_mode for p in [path, *path.rglob("*")]}
        for p in modes:
            p.chmod(modes[p] & ~0o222)
        try:
            yield "permissions"
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


@dataclass
class Live:
    proc: anyio.abc.Process
    recording: Path
    player: Bot
    output: list[str]

    def turns(self) -> int:
        if not self.recording.exists():
            return 0
        return sum(isinstance(r, TurnRecord) for r in read_recording(self.recording).records)

    async def say_and_wait_for_a_turn(self, text: str, *, within: float = 40.0) -> None:
        before = self.turns()
        with anyio.fail_after(within):
            while True:
                out = await self.player.act("say", {"text": text}, timeout=10)
                if out.ok:
                    break
                await anyio.sleep(0.5)
            while self.turns() <= before:
                assert self.proc.returncode is None, "\n".join(self.output)
                await anyio.sleep(0.3)

    async def stop(self) -> tuple[int, str, list[int]]:
        """Ctrl-C; returns the exit code, the output, and the Node children left behind."""
        family = _descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGINT)
        with anyio.fail_after(40):
            await self.proc.wait()
        await anyio.sleep(0.5)
        return self.proc.returncode or 0, "\n".join(self.output), [p for p in family if _alive(p)]


async def _pump(stream: anyio.abc.ByteReceiveStream, into: list[str]) -> None:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        into += [line.decode(errors="replace") for line in lines]
    if buffer:
        into.append(buffer.decode(errors="replace"))


async def _playing(proc: anyio.abc.Process, output: list[str]) -> None:
    """Until Emil says it plays (its bot is in the world)."""
    with anyio.fail_after(90):
        while not any("playing as" in line for line in output):
            assert proc.returncode is None, "\n".join(output)
            await anyio.sleep(0.3)


def _cmd(double: VLLMDouble, recording: Path, data_dir: Path) -> list[str]:
    return [sys.executable, str(ROOT / "run_emil.py"), "live", "--endpoint", double.base_url,
            "--recording", str(recording), "--data-dir", str(data_dir)]


def _env(server: EmbeddedServer) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1", "EMIL_MC_PORT": str(server.port),
            "EMIL_METRICS_ADDRESS": "127.0.0.1:0"}


@asynccontextmanager
async def _services() -> AsyncIterator[tuple[EmbeddedServer, VLLMDouble]]:
    ensure_js_deps(progress=False)
    async with EmbeddedServer() as server, VLLMDouble(DemoBrain()) as double:
        yield server, double


@asynccontextmanager
async def _live(server: EmbeddedServer, double: VLLMDouble, tmp: Path, data_dir: Path, name: str) -> AsyncIterator[Live]:
    recording = tmp / f"{name}.jsonl"
    output: list[str] = []
    async with await anyio.open_process(_cmd(double, recording, data_dir), cwd=tmp, env=_env(server),
                                        stderr=subprocess.STDOUT, start_new_session=True) as proc:
        player_settings = BotSettings(host="127.0.0.1", port=server.port, username="alex",
                                      reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False))
        try:
            async with anyio.create_task_group() as tg:
                assert proc.stdout is not None
                tg.start_soon(_pump, proc.stdout, output)
                await _playing(proc, output)
                async with Bot.connect(player_settings) as player:
                    yield Live(proc, recording, player, output)
                tg.cancel_scope.cancel()
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)


def _archived(data_dir: Path) -> list[str]:
    archive = Archive.open_existing(data_dir / ARCHIVE_FILE)
    try:
        return [line.text for line in archive.recent(limit=10_000)]
    finally:
        archive.close()


def _warnings(output: str) -> list[str]:
    """The warnings of an outage while playing (the stop's own account of lines that never made
    it to disk is one more line, said apart)."""
    return [line for line in output.splitlines() if "memory:" in line and "cannot write to" in line]


async def test_a_data_dir_turned_read_only_mid_session_costs_one_warning_and_stops_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _services() as (server, double):
        async with _live(server, double, tmp_path, data, "one") as live:
            await live.say_and_wait_for_a_turn("Emil, the gate code is 4471")
            await live.say_and_wait_for_a_turn("Emil, my nickname is Ortalmi")
            before = _archived(data)
            assert any("4471" in t for t in before)
            with _read_only(data) as how:
                for line in ("Emil, follow me", "Emil, what's the weather", "Emil, the vault is behind the waterfall"):
                    await live.say_and_wait_for_a_turn(line)  # play goes on
                code, output, left = await live.stop()
            assert code == 0, output  # not -7 (SIGBUS) nor 1
            assert not left, f"children left behind: {left}"
            read = read_recording(live.recording)
            assert read.complete and isinstance(read.records[-1], EndRecord), output
            assert "Traceback" not in output and "internal error" not in output, output
            if how == "immutable":
                assert len(_warnings(output)) == 1, output  # one warning for the outage
                assert any("archive lines could not be written before Emil stopped" in line for line in output.splitlines())
        after = _archived(data)
        assert set(before) <= set(after)  # nothing it had written is lost
        check = MemoryStore.open_existing(data)
        check.close()

        # A restart on the read-only data_dir: one line, a configuration error with its fix, exit 2.
        with _read_only(data):
            proc = await anyio.run_process(_cmd(double, tmp_path / "two.jsonl", data), cwd=tmp_path, env=_env(server),
                                           check=False, stderr=subprocess.STDOUT)
        out = proc.stdout.decode(errors="replace").strip().splitlines()
        assert proc.returncode == 2, out
        assert out[-1].startswith("emil: configuration error: ") and "data_dir" in out[-1], out
        assert "writable" in out[-1] or "elsewhere" in out[-1], out
        assert not any("Traceback" in line for line in out), out


async def test_the_notes_database_deleted_under_a_running_emil_is_said_and_written_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _services() as (server, double), _live(server, double, tmp_path, data, "del") as live:
        await live.say_and_wait_for_a_turn("Emil, my chest is at 12 64 -7")
        (data / DB_FILE).unlink()
        await live.say_and_wait_for_a_turn("Emil, hello again")
        code, output, left = await live.stop()
    assert code == 0 and not left, output
    assert any("was deleted while Emil ran; written back" in line for line in output.splitlines()), output
    store = MemoryStore.open_existing(data)
    try:
        assert any(n.subject == "chest" and n.detail == "12,64,-7" for n in store.notes())
    finally:
        store.close()


_FULL_DISK = r"""
import os, signal, subprocess, sys, time
data, size, fill_at, trigger, *cmd = sys.argv[1:]
os.makedirs(data, exist_ok=True)
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", data], check=True)
def fill():
    with open(os.path.join(data, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError:
            pass
if fill_at == "start":
    fill()
child = subprocess.Popen(cmd)
signal.signal(signal.SIGINT, lambda *a: child.send_signal(signal.SIGINT))
while child.poll() is None:
    if fill_at == "trigger" and os.path.exists(trigger):
        fill(); os.remove(trigger); fill_at = "done"
    time.sleep(0.1)
sys.exit(child.returncode)
"""


def _on_a_small_disk(data: Path, size: str, fill_at: str, trigger: Path, cmd: list[str]) -> list[str]:
    """``cmd`` run with ``data`` a tmpfs of ``size``, filled at start or when ``trigger`` appears
    (the wrapper removes it once full): mounted in a private mount namespace (as root), else in
    a user namespace, so nothing stays mounted whatever happens to the test."""
    wrapper = [sys.executable, "-c", _FULL_DISK, str(data), size, fill_at, str(trigger), *cmd]
    return (["unshare", "--mount", "--propagation", "private", *wrapper] if os.geteuid() == 0
            else ["unshare", "--user", "--map-root-user", "--mount", *wrapper])


async def test_a_full_disk_at_start_is_one_configuration_error_and_mid_session_one_warning(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _services() as (server, double):
        cmd = _on_a_small_disk(data, "4m", "start", tmp_path / "never", _cmd(double, tmp_path / "full.jsonl", data))
        proc = await anyio.run_process(cmd, cwd=tmp_path, env=_env(server), check=False, stderr=subprocess.STDOUT)
        out = proc.stdout.decode(errors="replace").strip().splitlines()
        assert proc.returncode == 2, out
        assert out[-1].startswith("emil: configuration error: ") and "free space" in out[-1], out

        trigger = tmp_path / "fill-now"
        recording = tmp_path / "mid.jsonl"
        cmd = _on_a_small_disk(data, "24m", "trigger", trigger, _cmd(double, recording, data))
        output: list[str] = []
        async with await anyio.open_process(cmd, cwd=tmp_path, env=_env(server), stderr=subprocess.STDOUT,
                                            start_new_session=True) as proc2:
            try:
                async with anyio.create_task_group() as tg:
                    assert proc2.stdout is not None
                    tg.start_soon(_pump, proc2.stdout, output)
                    await _playing(proc2, output)
                    player_settings = BotSettings(host="127.0.0.1", port=server.port, username="alex",
                                                  reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False))
                    async with Bot.connect(player_settings) as player:
                        live = Live(proc2, recording, player, output)
                        await live.say_and_wait_for_a_turn("Emil, the gate code is 4471")
                        trigger.touch()
                        with anyio.fail_after(20):
                            while trigger.exists():  # noqa: ASYNC110
                                await anyio.sleep(0.2)
                        for line in ("Emil, my nickname is Ortalmi", "Emil, follow me"):
                            await live.say_and_wait_for_a_turn(line)  # play goes on
                        code, text, left = await live.stop()
                    tg.cancel_scope.cancel()
            finally:
                if proc2.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc2.pid, signal.SIGKILL)
    assert code == 0 and not left, text
    assert len(_warnings(text)) == 1, text
    read = read_recording(recording)
    assert read.complete and isinstance(read.records[-1], EndRecord)
    assert "Traceback" not in text

"""A fleet from the documented configuration plays under ``run_emil.py fleet run`` (issue #31).

The embedded server (flying-squid), one vLLM-dialect DOUBLE serving a SCRIPTED NpcBrain (not a
model) for the whole fleet, as one vLLM would, and a real mineflayer player. The fleet is
docs/examples/fleet.toml as written, but for the addresses of this machine's services (endpoint,
Minecraft port, free metrics ports) and a fourth NPC, Olaf, whose metrics port the test holds,
so Olaf exits 2 at start (a configuration error ``fleet check`` cannot see). Then:

1. ``fleet check`` names the NPC with a bad setting and exits 2 (nothing starts);
2. under ``fleet run`` Mira, Bram and Tilda each answer the player (their own recording and
   data_dir, their metrics labelled with their name); Olaf is not restarted;
3. Bram's Python process is killed (a crash): it is restarted and plays again;
4. SIGINT stops the fleet: every NPC exits 0 and every recording ends with its end record.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from emil.recording import EndRecord, HeaderRecord, ToolResultRecord, read_recording
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.serving.cpu_vllm import free_port
from emil.testing.brains import NpcBrain
from emil.testing.processes import child_env, stop_group
from emil.testing.vllm_double import VLLMDouble
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "fleet.toml"
PLAYING = ("Mira", "Bram", "Tilda")


def _fleet_file(folder: Path, endpoint: str, mc_port: int, ports: dict[str, int]) -> Path:
    text = EXAMPLE.read_text()
    text = text.replace('endpoint = "http://127.0.0.1:8000/v1"', f'endpoint = "{endpoint}"')
    text = text.replace("mc_port = 25565", f"mc_port = {mc_port}")
    for name, old in (("Mira", 9481), ("Bram", 9482), ("Tilda", 9483)):
        text = text.replace(f"metrics_port = {old}", f"metrics_port = {ports[name]}")
    assert all(f"metrics_port = {p}" in text for p in list(ports.values())[:3]) and endpoint in text, "the documented fleet changed: update this test"
    text += (
        f'\n[[npc]]\nname = "Olaf"\npersona = "You are the miller."\ndata_dir = "data/olaf"\n'
        f'metrics_port = {ports["Olaf"]}\n')
    path = folder / "fleet.toml"
    path.write_text(text)
    return path


def _env() -> dict[str, str]:
    env = child_env({k: v for k, v in os.environ.items() if not k.startswith("EMIL_")})
    env.update({"PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1", "PYTHONUNBUFFERED": "1"})
    return env


class _Fleet:
    """``fleet run`` as a process, its event lines collected."""

    def __init__(self, proc: anyio.abc.Process) -> None:
        self.proc = proc
        self.out = bytearray()

    async def read(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in self.proc.stdout:
                self.out.extend(chunk)

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace")

    def pids(self, name: str) -> list[int]:
        return [int(p) for p in re.findall(rf"fleet: {name}: started \(pid (\d+);", self.text)]

    async def wait_for(self, what: str, check: object, within: float) -> None:
        assert callable(check)
        try:
            with anyio.fail_after(within):
                while not check():
                    assert self.proc.returncode is None, f"fleet run ended:\n{self.text}"
                    await anyio.sleep(0.3)
        except TimeoutError:
            raise AssertionError(f"not within {within:g} s: {what}\n{self.text}") from None


def _said(recording: Path, player: str) -> bool:
    if not recording.exists():
        return False
    return any(isinstance(r, ToolResultRecord) and r.name == "say" and r.ok and player in str(r.arguments)
               for r in read_recording(recording).records)


def _recordings(folder: Path, name: str) -> list[Path]:
    return sorted((folder / "recordings").glob(f"emil-*-{name}*.jsonl"))


async def _metrics(port: int) -> dict[str, set[str]]:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels.setdefault(s.name, set()).add(s.labels.get("npc", ""))
    return labels


async def test_a_three_npc_fleet_plays_and_is_supervised(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    run = [sys.executable, str(ROOT / "run_emil.py"), "fleet"]

    # 1. a bad setting in one NPC: its line, exit 2, nothing started
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace("metrics_port = 9482", "metrics_port = 9482\ngive_items_per_hour = -1"))
    with anyio.fail_after(60):
        done = await anyio.run_process([*run, "check", "--config", str(bad)], cwd=tmp_path, env=_env(), check=False)
    assert done.returncode == 2, done
    assert done.stderr.decode().splitlines()[0].startswith("emil fleet: Bram: bad setting give_items_per_hour=-1 (file")
    assert not (tmp_path / "data").exists()

    ports = {name: free_port() for name in (*PLAYING, "Olaf")}
    held = socket.socket()
    held.bind(("127.0.0.1", ports["Olaf"]))  # Olaf's metrics port is taken: exit 2 at its start
    held.listen()
    try:
        async with EmbeddedServer() as server, VLLMDouble(NpcBrain()) as double:
            config = _fleet_file(tmp_path, double.base_url, server.port, ports)
            proc = await anyio.open_process([*run, "run", "--config", str(config)], cwd=tmp_path, env=_env(),
                                            stderr=subprocess.STDOUT, start_new_session=True)
            fleet = _Fleet(proc)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(fleet.read)
                    await _play(fleet, server.port, tmp_path, ports)
                    # 4. SIGINT: every NPC stops cleanly
                    proc.send_signal(signal.SIGINT)
                    with anyio.fail_after(90):
                        code = await proc.wait()
                    tg.cancel_scope.cancel()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                await anyio.to_thread.run_sync(stop_group, proc.pid)
    finally:
        held.close()
    text = fleet.text
    assert code == 0, text
    for name in PLAYING:
        assert f"fleet: {name}: stopped (exit 0)" in text, text
        last = read_recording(_recordings(tmp_path, name)[-1]).records[-1]
        assert isinstance(last, EndRecord) and last.exit_code == 0 and last.reason.startswith("stopped"), last
    assert re.search(r"fleet: all 4 NPCs stopped \(signal SIGINT\)", text), text


async def _play(fleet: _Fleet, mc_port: int, folder: Path, ports: dict[str, int]) -> None:
    # 2. the three play; Olaf exits 2 and stays down
    await fleet.wait_for("Olaf's configuration error", lambda: "fleet: Olaf: exited 2" in fleet.text, 120)
    assert re.search(r"fleet: Olaf: exited 2 \(a configuration error\); not restarted: emil: .*cannot serve metrics",
                     fleet.text), fleet.text
    for name in PLAYING:
        log = folder / "logs" / f"{name}.log"
        await fleet.wait_for(f"{name} playing", lambda log=log, name=name: log.exists()
                             and f"playing as {name}" in log.read_text(errors="replace"), 120)
    async with PlayerBot(mc_port, "alex") as alex:
        async def answered() -> bool:
            return all(any(_said(r, "alex") for r in _recordings(folder, n)) for n in PLAYING)

        with anyio.fail_after(60):
            while not await answered():
                await alex.do("chat", text="hello Mira Bram Tilda!")
                await anyio.sleep(4)
        for name in PLAYING:
            (recording,) = _recordings(folder, name)
            header = next(r for r in read_recording(recording).records if isinstance(r, HeaderRecord))
            assert header.bot_name == name and (folder / "data" / name.lower() / "memory.sqlite3").exists()
            others = set(PLAYING) - {name}
            assert others <= set(header.settings["npc_players"]), header.settings["npc_players"]
            assert header.settings["persona"].startswith("You are the")
            labels = await _metrics(ports[name])
            assert labels["emil:turns_total"] == {name} and labels["emil:session_info"] == {name}, labels

        # 3. a crash: Bram's Python process killed; restarted, it plays again
        (bram,) = fleet.pids("Bram")
        os.kill(bram, signal.SIGKILL)
        await fleet.wait_for("Bram restarted", lambda: len(fleet.pids("Bram")) == 2, 30)
        assert re.search(r"fleet: Bram: exited -9 \(killed by SIGKILL: a crash\); restart 1 in 2 s", fleet.text)
        log = folder / "logs" / "Bram.log"
        await fleet.wait_for("Bram playing again", lambda: log.read_text(errors="replace").count("playing as Bram") == 2,
                             120)
        with anyio.fail_after(60):
            while len(_recordings(folder, "Bram")) < 2 or not _said(_recordings(folder, "Bram")[-1], "alex"):
                await alex.do("chat", text="Bram, are you back?")
                await anyio.sleep(4)
    assert fleet.text.count("fleet: Olaf: started") == 1

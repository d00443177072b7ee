"""``run_emil.py live`` against an embedded server and the vLLM-dialect double (SCRIPTED brain):
it plays, and SIGINT (Ctrl-C) stops it cleanly with a closed recording and exit code 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from emil.recording import EndRecord, HeaderRecord, read_recording
from emil.sandbox.server import EmbeddedServer
from emil.testing import processes
from emil.testing.brains import DemoBrain
from emil.testing.vllm_double import VLLMDouble
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[3]


async def test_live_plays_and_ctrl_c_closes_the_recording(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    recording = tmp_path / "live.jsonl"
    async with EmbeddedServer() as server, VLLMDouble(DemoBrain()) as double:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EMIL_NO_BOOTSTRAP": "1", "EMIL_MC_PORT": str(server.port), "EMIL_METRICS_ADDRESS": "127.0.0.1:0"}
        cmd = [sys.executable, str(ROOT / "run_emil.py"), "live", "--endpoint", double.base_url, "--recording", str(recording)]
        async with processes.open_process(cmd, cwd=tmp_path, env=env, stderr=subprocess.STDOUT) as proc:
            output = bytearray()

            async def read() -> None:
                assert proc.stdout is not None
                async for chunk in proc.stdout:
                    output.extend(chunk)

            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(read)
                    # playing: the recording has its header and the log says so
                    with anyio.fail_after(60):
                        while not (b"playing as Emil" in output and recording.exists()
                                   and any(isinstance(r, HeaderRecord) for r in read_recording(recording).records)):
                            assert proc.returncode is None, "live ended before it started playing"
                            await anyio.sleep(0.3)
                    proc.send_signal(signal.SIGINT)
                    with anyio.fail_after(30):
                        await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
            out = output.decode(errors="replace")
    assert proc.returncode == 0, out
    read = read_recording(recording)
    assert read.complete and isinstance(read.records[-1], EndRecord)
    assert "playing as Emil" in out
    # One session key, the recording's, on every request the session made (models, the family
    # probe's /tokenize; no player spoke, so no chat: the unit tests and the scale-out test see
    # chat carry it): what a router hashes to keep the session on one replica.
    header = next(r for r in read.records if isinstance(r, HeaderRecord))
    assert header.session_key == f"Emil-{header.session_id}" and len(header.session_id) == 12
    paths = {path for path, _ in double.request_headers}
    assert {"/v1/models", "/tokenize"} <= paths
    assert {h.get("x-session-id") for _, h in double.request_headers} == {header.session_key}
    assert f"X-Session-ID: {header.session_key}" in out  # and the log says which

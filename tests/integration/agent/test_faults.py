"""The fault suite: each fault class of issue #11 against Emil as an operator runs it.

Real embedded Minecraft server, real mineflayer bots, Emil as its own process
(``run_emil.py live``), and the vLLM-dialect DOUBLE (a SCRIPTED brain, not a model) in a process
of its own with its fault modes set over HTTP. After each fault Emil is either alive (a probe
chat is answered within a bound) or stopped with the documented exit code, one line on stderr
(never a traceback) and a recording whose error and end records say the same. The scenarios
live in emil/testing/chaos_scenarios.py; tools/chaos.py runs the same ones for the table in
docs/reliability.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from emil.testing.chaos import Rig, chaos_rig
from emil.testing.chaos_scenarios import ALIVE, EXITS
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def rig(tmp_path_factory: pytest.TempPathFactory, anyio_backend: str) -> AsyncIterator[Rig]:
    ensure_js_deps(progress=False)
    async with chaos_rig(tmp_path_factory.mktemp("chaos")) as r:
        yield r


@pytest.fixture(scope="module")
async def playing(rig: Rig) -> Rig:
    """One Emil for every ALIVE scenario, in order (each ends with Emil answering)."""
    emil = await rig.start_emil()
    assert emil.returncode is None, emil.stderr()[-2000:]
    assert await rig.probe(within=40) is not None, "Emil does not answer before any fault"
    return rig


@pytest.mark.parametrize("name", list(ALIVE))
async def test_emil_is_alive_after(playing: Rig, name: str) -> None:
    await playing.begin()
    result = await ALIVE[name](playing)
    assert playing.emil is not None and playing.emil.returncode is None, playing.emil.stderr()[-3000:]
    assert result.ok, (result, playing.emil.stderr()[-3000:])
    assert result.lost == 0


async def test_a_stop_signal_while_playing_exits_0(playing: Rig) -> None:
    assert playing.emil is not None
    code, took = await playing.emil.stop()
    assert code == 0 and playing.emil.last_line() == "emil: stopped: signal SIGTERM", playing.emil.stderr()[-2000:]
    assert "Traceback" not in playing.emil.stderr()
    end = playing.records()[-1]
    assert end.kind == "end" and end.exit_code == 0  # type: ignore[union-attr]
    assert took < 10


@pytest.mark.parametrize("name", list(EXITS))
async def test_emil_stops_as_documented_on(rig: Rig, name: str, tmp_path: Path) -> None:
    await rig.begin()
    result = await EXITS[name](rig)
    stderr = rig.emil.stderr()[-3000:] if rig.emil else ""
    assert result.ok, (result, stderr)

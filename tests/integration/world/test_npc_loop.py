"""Two Emils on one server do not talk each other into a loop (issue #22 item 5, docs/trust.md).

The embedded server, two whole live sessions (Emil1, Emil2: the real loop, bridge and bot),
nobody listing either as an NPC (each finds the other as a peer), each against its own
vLLM-dialect DOUBLE serving a SCRIPTED NpcBrain (not a model) that answers every line it hears,
so every line one Emil says is a line the other must answer. A real player greets both, once.
Before issue #22 the two answered each other for as long as they ran (527 requests in 30 s).
Now: each answers the player, the other's chat starts at most ``npc_exchanges`` turns in a row
and never interrupts, and over the next 40 s each Emil's requests stay within what that budget
allows (a slow machine only makes fewer).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import anyio
import pytest

from emil.agent.session import open_session
from emil.config import Settings
from emil.recording import EventRecord, TurnRecord, read_recording
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.testing.brains import NpcBrain
from emil.testing.vllm_double import VLLMDouble
from emil.world.setup import ensure_js_deps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

NAMES = ("Emil1", "Emil2")
WINDOW_S = 40.0
# What the budget lets through in the window, per Emil: the player's turn (its steps: a say and
# the end), then NPC-started turns: one token at once and one every 30 s (npc_turns_per_minute
# 2), at most npc_exchanges (3) in a row; each turn is at most two requests with this brain.
MOST_REQUESTS = 2 * (1 + 3)


async def test_two_emils_answer_a_player_and_do_not_loop(tmp_path: Path) -> None:
    ensure_js_deps(progress=False)
    async with EmbeddedServer() as server, contextlib.AsyncExitStack() as stack:
        doubles = [await stack.enter_async_context(VLLMDouble(NpcBrain())) for _ in NAMES]
        sessions = []
        for name, double in zip(NAMES, doubles, strict=True):
            s = Settings(endpoint=double.base_url, mc_port=server.port, bot_name=name, endpoint_wait_s=30.0,
                         recording_dir=tmp_path, data_dir=tmp_path / f"data-{name}", metrics_address="off")
            sessions.append(await stack.enter_async_context(open_session(s, recording=tmp_path / f"{name}.jsonl")))
        alex = await stack.enter_async_context(PlayerBot(server.port, "alex"))
        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(session.agent.run)
            await anyio.sleep(2.0)  # joins settle: each Emil sees the other before anyone speaks
            start = [len(d.requests) for d in doubles]
            await alex.do("chat", text="hello Emil1 Emil2!")
            await anyio.sleep(WINDOW_S)
            counts = [len(d.requests) - s0 for d, s0 in zip(doubles, start, strict=True)]
            for session in sessions:
                session.agent.stop()
            tg.cancel_scope.cancel()
    for name, count in zip(NAMES, counts, strict=True):
        records = read_recording(tmp_path / f"{name}.jsonl").records
        turns = [r for r in records if isinstance(r, TurnRecord)]
        assert any("alex" in t.reason for t in turns), f"{name} answered the player: {[t.reason for t in turns]}"
        other = next(n for n in NAMES if n != name)
        npc_lines = [r for r in records if isinstance(r, EventRecord) and r.event.get("kind") == "chat"
                     and r.event.get("sender") == other]
        assert npc_lines, f"{name} heard {other}"
        assert all(r.npc and r.priority == "normal" for r in npc_lines), [(r.npc, r.priority) for r in npc_lines]
        run = longest = 0
        for t in turns:
            run = run + 1 if t.reason.startswith("chat from the NPC") else 0
            longest = max(longest, run)
        assert longest <= 3, f"{name}: {longest} NPC-started turns in a row"
        assert 2 <= count <= MOST_REQUESTS, f"{name}: {count} requests in {WINDOW_S:g} s"

"""The fleet simulation's parts: the AddressedBrain answers only its own NPC's lines, and a gated
double serves one request at a time, so requests queue and the queueing shows in its figures."""

from __future__ import annotations

import time

import anyio
import httpx

from emil.testing.brains import AddressedBrain
from emil.testing.double_replicas import DoubleReplicas
from emil.testing.script import ScriptRequest

TOOLS = [{"type": "function", "function": {"name": "say", "parameters": {}}}]


def _ask(line: str, me: str = "Mira") -> ScriptRequest:
    return ScriptRequest(messages=[{"role": "system", "content": f"You are {me}, a non-player character."},
                                   {"role": "user", "content": f"[events]\n- {line}"}], tools=TOOLS)


def test_the_addressed_brain_answers_only_lines_naming_its_npc() -> None:
    brain = AddressedBrain()
    named = brain(_ask('alex says: "Mira, how are you today?"'))
    assert [c.name for c in named.tool_calls] == ["say"] and "alex" in str(named.tool_calls[0].arguments)
    assert "Mira" not in str(named.tool_calls[0].arguments)  # the answer names nobody else
    other = brain(_ask('alex says: "Bram, how are you today?"'))
    assert other.tool_calls == () and other.content and "not for me" in other.content
    assert AddressedBrain(reply_delay_s=0.5)(_ask('alex says: "hi Mira"')).delay_s == 0.5


def test_a_gated_replica_queues_what_it_cannot_serve_at_once() -> None:
    replicas = DoubleReplicas(1, AddressedBrain, slots=1, service_s=0.3)
    replicas.start()
    try:
        body = {"model": replicas.doubles[0].model, "max_tokens": 16,
                "messages": [{"role": "user", "content": "hello"}]}

        async def main() -> float:
            async with httpx.AsyncClient(timeout=30) as client:
                since = time.monotonic()
                async with anyio.create_task_group() as tg:
                    for i in range(3):
                        tg.start_soon(lambda i=i: client.post(f"{replicas.doubles[0].base_url}/chat/completions",
                                                              json=body, headers={"X-Session-ID": f"Npc{i}-abc"}))
                return since

        since = anyio.run(main)
        (f,) = replicas.figures(since, time.monotonic())
    finally:
        replicas.stop()
    assert f.requests == 3 and f.sessions == ["Npc0", "Npc1", "Npc2"]
    assert f.service_s >= 0.3
    # one slot: the three waited about 0, 1 and 2 services, 1 on average
    assert 0.8 * f.service_s <= f.wait_s <= 1.5 * f.service_s, f

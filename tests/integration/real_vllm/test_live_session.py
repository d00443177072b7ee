"""A live session against the real vLLM: the embedded world, real bots, Emil's real loop.

A player chats (plain lines, Unicode, the hostile corpus: special tokens, the chat tricks); Emil
answers through the real server, whose random weights answer random text. Every request's
predicted prompt tokens must equal the server's ``usage.prompt_tokens``, and the prefix-cache
figures must agree: Emil's shared prefix (the leading messages identical to the previous
request, in real tokens) against the server's ``cached_tokens`` per request, and the sum of
``cached_tokens`` against ``vllm:prefix_cache_hits_total`` over the session.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from emil.recording import CompletionRecord, RequestRecord, TurnRecord
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.serving.metrics import MetricsSnapshot
from tests.integration.agent.services import running_world
from tests.integration.real_vllm.conftest import BLOCK_SIZE
from tests.integration.real_vllm.shapes import HOSTILE
from tests.unit.world.tricks import TRICKS

LINES = [
    "hi Emil, how are you?",
    "can you follow me to the river? 🙂",
    "日本語で話せますか? Ça va? Ωmega e\u0301",
    # (not the chat tricks: the player's own bot refuses to send what may read as a command)
    *[h for h in HOSTILE if h.strip() and h not in TRICKS.values()][::4],
    "thanks, that's all",
]


def _hits(server: CpuVLLMServer) -> float:
    text = httpx.get(f"{server.root_url}/metrics", timeout=10).text
    return MetricsSnapshot.from_text(text).counters["prefix_hits"]


async def test_every_request_of_a_live_session_is_counted_exactly(
    real_vllm: CpuVLLMServer, tmp_path: Path
) -> None:
    hits_before = _hits(real_vllm)
    async with running_world(
        tmp_path, None, endpoint=real_vllm.base_url, output_reserve=16
    ) as world:

        def turns() -> int:
            return sum(isinstance(r, TurnRecord) for r in world.records())

        for i, line in enumerate(LINES, start=1):
            await world.say(line)
            await world.wait_for(f"turn {i}", lambda i=i: turns() >= i, within=90)
        await world.stop_agent()
        records = world.records()
    hits = _hits(real_vllm) - hits_before

    # The request each completion answers: the last attempt of its turn and step (a completion
    # record does not carry the attempt it answers).
    sent = {(r.turn, r.step): r for r in records if isinstance(r, RequestRecord)}
    pairs = [
        (sent[(r.turn, r.step)], r) for r in records if isinstance(r, CompletionRecord)
    ]
    assert len(pairs) >= len(LINES), [type(r).__name__ for r in records]
    wrong = [
        (q.turn, q.step, q.predicted_tokens, a.prompt_tokens)
        for q, a in pairs
        if q.predicted_tokens != a.prompt_tokens
    ]
    assert not wrong, f"predicted != server on {len(wrong)} of {len(pairs)} requests: {wrong}"

    # The prefix cache: the server reuses whole blocks of what Emil says is shared (the
    # first request of the session is cold only for this session: the tier's server is shared,
    # so earlier tests may have cached the same system prompt and tools).
    figures = [(q.shared_prefix_tokens or 0, a.cached_tokens or 0) for q, a in pairs]
    print("predicted=server on", len(pairs), "requests; (shared, cached):", figures, "hits", hits)
    for shared, cached in figures[1:]:
        assert abs(cached - shared) < BLOCK_SIZE, figures
    assert sum(cached for _, cached in figures) == hits, (figures, hits)

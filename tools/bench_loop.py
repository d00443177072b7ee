#!/usr/bin/env python3
"""Agent-loop overhead per turn, excluding model time.

For each turn it measures Emil's own work on both sides of the model call:

- pre:  event arrival -> request handed to the HTTP client (perception, snapshot, observation,
        exact counting and assembly of the prompt, recording)
- post: completion received -> first action dispatched (parsing, history, recording)

Setup: the real loop, context manager (exact Qwen3.6 counting), recorder and OpenAI client,
against the vLLM-dialect DOUBLE (a SCRIPTED brain, not a model) on loopback, in its own process
(as vLLM is). Each Emil starts
with a history of about ``--history-tokens`` real tokens (a synthetic Emil-shaped session) in a
65,536 window, so every prompt is that big. Each Emil has its own in-process world double (an
urgent chat line per turn; tools return at once) so world latency does not blur the figures;
1, 4 and 8 Emils share one process, one event loop and one double.

The turn-rate cap (``turns_per_minute``, issue #22: 30 a minute by default, a burst of 5) is a
deliberate wait, not overhead: with the default, every turn past the fifth would wait about
two seconds for its token and "pre" would measure the cap. The bench runs at the cap's ceiling
(600 a minute) and lets at least a tenth of a second pass between one Emil's turns, so the cap
is checked on every turn and never waits.

    python3 tools/bench_loop.py [--turns 30] [--emils 1,4,8] [--history-tokens 36000]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from emil.agent.startup import build_agent, check_model, new_client
from emil.cli_args import OneLineParser, positive_int, positive_ints
from emil.config import Settings
from emil.context.history import History
from emil.llm.types import ToolCall
from emil.offline.synthetic import emil_tool_specs, history_of, synthetic_turns
from emil.recording import Recorder
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.subprocess_double import double_in_subprocess
from emil.testing.vllm_double import VLLMDouble
from emil.world.events import Chat, GameEvent
from emil.world.port import TurnContext
from emil.world.tool import Outcome


class BenchWorldDouble:
    """A world double: events pushed by the bench, every tool succeeds at once."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[GameEvent]
        self.recv: MemoryObjectReceiveStream[GameEvent]
        self.send, self.recv = anyio.create_memory_object_stream[GameEvent](64)

    async def events(self) -> AsyncIterator[GameEvent]:
        async for ev in self.recv:
            yield ev

    async def snapshot(self) -> Mapping[str, Any]:
        return {"position": {"x": 10.5, "y": 64, "z": -3.2}, "health": 20.0, "food": 18.0, "inventory": {"bread": 2}}

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return ()

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        return Outcome(True, f"{call.name}: ok")

    async def abort(self) -> None:
        return None

    def close(self) -> None:
        self.send.close()
        self.recv.close()


def scripted_policy(request: ScriptRequest) -> Reply:
    """SCRIPTED (not a model): one `say` per turn, then a short note."""
    if request.messages and request.messages[-1].get("role") == "tool":
        return Reply(content="[scripted] done")
    return Reply(tool_calls=(ScriptedCall("say", {"message": "[scripted] hello"}),))


def _serve_double(port_queue: Any, stop: Any) -> None:
    """Child process: the double, so its prompt counting does not share Emil's GIL (vLLM is a
    separate process too)."""
    with VLLMDouble(scripted_policy, window=65536) as double:
        port_queue.put(double.base_url)
        stop.wait()


def double_process() -> contextlib.AbstractContextManager[str]:
    return double_in_subprocess(_serve_double)


def _hook_send_times(llm: Any, sink: list[float]) -> None:
    """Note when each HTTP request leaves (the SDK's private httpx client: a bench-only probe)."""

    async def on_request(request: Any) -> None:
        if request.url.path.endswith("/chat/completions"):
            sink.append(time.monotonic())

    llm._client._client.event_hooks["request"].append(on_request)


def history_near(tokens: int, manager_count: Any) -> History:
    turns = []
    for turn in itertools.islice(synthetic_turns(seed=7), 2000):
        turns.append(turn)
        if len(turns) % 10 == 0 and manager_count(history_of(turns)) >= tokens:
            break
    return history_of(turns)


TURNS_PER_MINUTE = 600.0
"""The turn-rate cap's ceiling (the setting's maximum): a token every 0.1 s."""
TURN_GAP_S = 0.11
"""Between one round of turns and the next: longer than the cap's 0.1 s, so no turn waits."""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench(n_emils: int, turns: int, history_tokens: int, workdir: Path, in_process: bool) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        if in_process:
            base_url = stack.enter_context(VLLMDouble(scripted_policy, window=65536)).base_url
        else:
            base_url = stack.enter_context(double_process())
        agents = []
        worlds = []
        sends: list[list[float]] = []
        for i in range(n_emils):
            s = Settings(endpoint=base_url, bot_name=f"Emil{i}", chat_debounce_s=0.0, recording_dir=workdir,
                         turns_per_minute=TURNS_PER_MINUTE)
            llm = new_client(s)
            sent_at: list[float] = []
            _hook_send_times(llm, sent_at)
            model = await check_model(s, llm)
            world = BenchWorldDouble()
            recorder = Recorder(workdir / f"bench-{n_emils}-{i}.jsonl")
            with Recorder(workdir / f"probe-{n_emils}-{i}.jsonl") as probe_recorder:  # one per agent: never appended
                probe = build_agent(s, model, world, emil_tool_specs(), probe_recorder)
                history = history_near(history_tokens, probe.context.manager.count)  # type: ignore[attr-defined]
            agent = build_agent(s, model, world, emil_tool_specs(), recorder, history=history)
            agents.append((agent, llm, recorder))
            sends.append(sent_at)
            worlds.append(world)
        start_tokens = [a.context.manager.count(a.context.history) for a, _, _ in agents]  # type: ignore[attr-defined]
        async with anyio.create_task_group() as tg:
            for agent, _, _ in agents:
                tg.start_soon(agent.run)
            for turn in range(turns):
                await anyio.sleep(TURN_GAP_S)  # the turn-rate cap's token comes back meanwhile
                for i, world in enumerate(worlds):
                    await world.send.send(Chat(sender="alex", text=f"Emil{i}, turn {turn}: what are you doing?"))
                deadline = time.monotonic() + 60
                while any(len(a.stats.turns) <= turn or a.stats.turns[turn].ended is None for a, _, _ in agents):
                    if time.monotonic() > deadline:
                        raise RuntimeError("a turn did not finish within 60 s")
                    await anyio.sleep(0.005)
            for agent, _, _ in agents:
                agent.stop()
        for _agent, llm, recorder in agents:
            recorder.close()
            await llm.aclose()
        for world in worlds:
            world.close()
    # The first turn of each Emil counts its whole 36k history from a cold cache; it is
    # reported apart from the steady state.
    steady = [t for a, _, _ in agents for t in a.stats.turns[1:]]
    cold = [a.stats.turns[0].pre_overhead_ms for a, _, _ in agents if a.stats.turns and a.stats.turns[0].pre_overhead_ms is not None]
    pre = [t.pre_overhead_ms for t in steady if t.pre_overhead_ms is not None]
    # "Sent" = the HTTP request leaving the client (httpx request hook), after the OpenAI SDK
    # has built and serialised the body.
    wire = []
    for (a, _, _), sent_at in zip(agents, sends, strict=True):
        for t in a.stats.turns[1:]:
            after = [x for x in sent_at if t.first_request_at is not None and x >= t.first_request_at]
            if after and t.event_at is not None:
                wire.append((after[0] - t.event_at) * 1000)
    post = [t.post_overhead_ms for t in steady if t.post_overhead_ms is not None]
    prompts = [t.predicted_prompt_tokens for a, _, _ in agents for t in a.stats.turns if t.predicted_prompt_tokens]
    return {
        "emils": n_emils,
        "turns_per_emil": turns,
        "history_tokens_at_start": int(statistics.median(start_tokens)),
        "prompt_tokens_median": int(statistics.median(prompts)) if prompts else None,
        "sent_ms_median": statistics.median(wire) if wire else None,
        "sent_ms_p95": pct(wire, 0.95) if wire else None,
        "pre_ms_median": statistics.median(pre),
        "pre_ms_p95": pct(pre, 0.95),
        "post_ms_median": statistics.median(post),
        "post_ms_p95": pct(post, 0.95),
        "samples": len(pre),
        "first_turn_pre_ms_median": statistics.median(cold) if cold else None,
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.emils:
            results.append(await bench(n, args.turns, args.history_tokens, Path(tmp), args.double_in_process))
    return results


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--turns", type=positive_int, default=30, help="turns per Emil (default 30)")
    p.add_argument("--emils", type=positive_ints, default=[1, 4, 8], help="Emils per run, comma-separated (default 1,4,8)")
    p.add_argument("--history-tokens", type=positive_int, default=36000, help="starting history size in real tokens (default 36000)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--double-in-process", action="store_true", help="run the double in this process (its prompt counting then competes for the GIL)")
    args = p.parse_args(argv)
    if args.turns < 2:
        # Each Emil's first turn is the cold one, reported apart: the steady state needs a second.
        p.error(f"--turns must be at least 2 (the first turn of each Emil is the cold one), got {args.turns}")
    results = anyio.run(main_async, args)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"agent loop overhead per turn, model time excluded ({args.turns} turns per Emil, vLLM-dialect double, scripted brain)")
    print(f"{'emils':>5} {'history':>8} {'prompt':>7} {'pre med':>8} {'pre p95':>8} {'sent med':>9} {'sent p95':>9} {'post med':>9} {'post p95':>9} {'n':>4} {'cold 1st':>9}")
    for r in results:
        print(
            f"{r['emils']:>5} {r['history_tokens_at_start']:>8} {r['prompt_tokens_median'] or 0:>7} "
            f"{r['pre_ms_median']:>6.2f}ms {r['pre_ms_p95']:>6.2f}ms {r['sent_ms_median'] or 0:>7.1f}ms {r['sent_ms_p95'] or 0:>7.1f}ms {r['post_ms_median']:>7.2f}ms {r['post_ms_p95']:>7.2f}ms {r['samples']:>4} "
            f"{r['first_turn_pre_ms_median'] or 0:>7.1f}ms"
        )
    print("pre = event arrival -> request assembled and handed to the LLM client; sent = event arrival -> HTTP request leaves the client")
    print("post = completion returned by the client -> first action dispatched")
    print("steady state (turns 2..N of each Emil); cold 1st = median pre of each Emil's first turn (whole history counted from a cold cache)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

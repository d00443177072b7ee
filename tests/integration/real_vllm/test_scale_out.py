"""Past one machine: two real vLLM replicas behind vllm-router, four Emils, players chatting.

Two CPU vLLM replicas of the tiny random-weight Qwen3 (each on its own core), the real
vllm-router in front with ``--policy consistent_hash``, an embedded Minecraft server, four
``run_emil.py live`` processes with the router as their endpoint and two players (real
mineflayer bots) naming the Emils in turn. Then:

- each Emil's session key is in exactly one replica's log (vLLM logs each chat request's id,
  and Emil's ids start with its key) and the router's log agrees;
- its prefix-cache hits land there: the replica's ``vllm:prefix_cache_hits_total`` grew by the
  cached tokens its Emils' recordings report, and they report some;
- one replica is SIGKILLed while it holds sessions (a request in flight when one can be caught):
  its Emils go on against the other one (the router's retry and health check, Emil's backoff),
  at most the turn in flight fails, the other Emils lose nothing, and every recording reads to
  its end record with every turn closed.

These servers are the test's own (the shared ``real_vllm`` server must survive): about 2.6 GB
each (64 MiB of KV cache), started side by side in a module fixture, bounded by the launcher's
start-up timeout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from emil.recording import (
    CompletionRecord,
    EndRecord,
    ErrorRecord,
    HeaderRecord,
    ObservationRecord,
    RequestRecord,
    RetryRecord,
    TurnRecord,
    read_recording,
)
from emil.sandbox.server import EmbeddedServer
from emil.serving.cpu_vllm import CpuServerError, CpuVLLMEnv, install
from emil.serving.router import RouterOptions, VLLMRouter
from emil.testing.scaleout import (
    Chat,
    EmilOptions,
    EmilProcess,
    Replicas,
    quiet,
    run_mode,
    stop_all,
    until,
)
from emil.world.setup import ensure_js_deps

EMILS = ("Emil1", "Emil2", "Emil3", "Emil4")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    env = CpuVLLMEnv.default()
    log_dir = tmp_path_factory.mktemp("replicas")
    try:
        install(env)
        fleet = Replicas(env, 2, log_dir, max_model_len=16384, kv_cache_tokens=131072)
        fleet.start()
    except CpuServerError as exc:
        pytest.fail(f"the vLLM replicas could not start: {exc}", pytrace=False)
    try:
        yield fleet
    finally:
        left = fleet.stop()
    assert not left, f"processes of the replicas outlived their stop: {left}"


def _key(emil: EmilProcess) -> str:
    key, header = emil.session_key(), next(r for r in emil.records() if isinstance(r, HeaderRecord))
    assert key == f"{emil.name}-{header.session_id}"
    return key


def _cached(emil: EmilProcess, since: float = 0.0, until: float = float("inf")) -> int:
    return sum(r.cached_tokens or 0 for r in emil.completions(after=since) if r.t <= until)


@pytest.mark.timeout(600, func_only=True)
async def test_the_benchmark_places_sessions_as_its_modes_say(replicas: Replicas, tmp_path: Path) -> None:
    """tools/bench_router.py's own code (``run_mode``), briefly, on these replicas: with the
    session key each Emil's requests reach one replica, round robin spreads sessions over both,
    and the replicas' counters show prefix-cache hits either way. (tests/docs does not run the
    benchmark's documented command, about half an hour; this runs what it runs.)"""
    await anyio.to_thread.run_sync(replicas.revive)  # in a shuffled order the kill may come first
    ensure_js_deps(progress=False)
    env = CpuVLLMEnv.default()
    names = ("Emil1", "Emil2", "Emil3")
    async with EmbeddedServer() as server:
        runs = {
            mode: await run_mode(mode, replicas, server, env.router, names, tmp_path / mode,
                                 duration_s=20, every_s=3.0, options=EmilOptions())
            for mode in ("session-key", "round-robin")
        }
    key, spread = runs["session-key"], runs["round-robin"]
    for name in names:
        assert sum(name in sessions for sessions in key.sessions) == 1, key.sessions
    assert any(name in spread.sessions[0] and name in spread.sessions[1] for name in names), spread.sessions
    for run in runs.values():
        assert run.completions >= len(names) and run.lines > 0, run
        assert sum(r.requests for r in run.replicas) >= run.completions, run
        assert 0 < run.hit_rate < 1, run


@pytest.mark.timeout(900, func_only=True)
async def test_sessions_stay_on_their_replica_and_a_killed_replica_costs_one_turn(
    replicas: Replicas, tmp_path: Path
) -> None:
    await anyio.to_thread.run_sync(replicas.revive)  # nothing to do unless a replica was killed
    ensure_js_deps(progress=False)
    env = CpuVLLMEnv.default()
    router = VLLMRouter(
        env.router, replicas.urls,
        RouterOptions(policy="consistent_hash", health_check_interval_s=1, health_failure_threshold=2),
        log_path=tmp_path / "router.log",
    )  # fmt: skip
    await anyio.to_thread.run_sync(router.start)
    base = replicas.counters()  # the other test may have run on these replicas first
    emils = [EmilProcess(name, tmp_path) for name in EMILS]
    talk = Chat(("alex", "bella"), EMILS, every_s=3.0)
    try:
        async with EmbeddedServer() as server, anyio.create_task_group() as tg:
            for emil in emils:
                await emil.start(router.base_url, server.port, EmilOptions(), tg)
            for emil in emils:
                await emil.playing(within=180)
            tg.start_soon(talk.run, server)
            # Phase 1: every Emil has had a few turns against its replica; then a quiet moment.
            await until(lambda: all(len(e.completions()) >= 3 for e in emils), 300, what="3 completions each")
            quiet_at = await quiet(replicas, emils, talk)
            keys = {e.name: _key(e) for e in emils}
            counted = replicas.counters()
            sessions_before = [replicas.sessions(i) for i in range(2)]
            placed = {name: [i for i in range(2) if sessions_before[i][key]] for name, key in keys.items()}
            # Phase 2: the players talk again; a replica that holds sessions is killed, with a
            # request in flight when one comes within 30 s.
            talk.paused = False
            victim = next(i for i in range(2) if any(where == [i] for where in placed.values()))
            survivor = 1 - victim
            in_flight = 0.0
            with anyio.move_on_after(30):
                while not (in_flight := replicas.counters()[victim].running):  # type: ignore[union-attr]  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            killed_at = time.time()
            await anyio.to_thread.run_sync(replicas.kill, victim)
            await until(lambda: all(len(e.completions(after=killed_at)) >= 2 for e in emils), 300,
                        what="2 completions each after the kill")
            end_at = await quiet(replicas, emils, talk)
            at_end = replicas.counters()[survivor]
            sessions_after = replicas.sessions(survivor)
            codes = {e.name: await e.stop() for e in emils}
            tg.cancel_scope.cancel()
    finally:
        await stop_all(emils)
        router.stop()
    outputs = "\n".join(f"--- {e.name}\n{e.text[-2000:]}" for e in emils)
    assert codes == dict.fromkeys(EMILS, 0), outputs
    moved = [e for e in emils if placed[e.name] == [victim]]
    stayed = [e for e in emils if placed[e.name] == [survivor]]
    assert moved, placed  # the victim held sessions

    # Each session's requests went to one replica, the one the router says it sent them to.
    assert all(len(where) == 1 for where in placed.values()), placed
    routes = router.routes()
    for name, key in keys.items():
        workers = {w for (k, w), _n in routes.items() if k == f"header:x-session-id:{key}" and _n}
        assert replicas.urls[placed[name][0]] in workers, (name, workers)
    # Its prefix-cache hits landed there: at the quiet moment each replica's hits are exactly
    # the cached tokens its own Emils' completions report, and there are some.
    for index in range(2):
        mine = [e for e in emils if placed[e.name] == [index]]
        cached = sum(_cached(e, until=quiet_at) for e in mine)
        assert counted[index] is not None and base[index] is not None
        assert counted[index].prefix_hits - base[index].prefix_hits == cached, (index, counted[index], cached)
        assert not mine or cached > 0, f"replica {index}: its Emils report no cached tokens"

    # After the kill every session is on the survivor; its hits since the quiet moment are the
    # cached tokens of its own Emils' completions since then and of the moved ones' since the kill.
    for emil in emils:
        assert sessions_after[keys[emil.name]] > sessions_before[survivor][keys[emil.name]], emil.name
    assert at_end is not None and counted[survivor] is not None
    since = sum(_cached(e, since=quiet_at, until=end_at) for e in stayed) + sum(
        _cached(e, since=killed_at, until=end_at) for e in moved)
    assert at_end.prefix_hits - counted[survivor].prefix_hits == since, (at_end, counted[survivor], since)

    # Nothing lost: every record readable to the end record, every turn closed, a failed turn
    # only where the kill struck, and then only the one in flight.
    for emil in emils:
        read = read_recording(emil.recording)
        assert read.complete and read.stopped_at_line is None, (emil.name, read.problem)
        assert isinstance(read.records[-1], EndRecord) and read.records[-1].exit_code == 0
        turns_started = {r.turn for r in read.records if isinstance(r, ObservationRecord)}
        turns_closed = {r.turn for r in read.records if isinstance(r, TurnRecord)}
        assert turns_started == turns_closed, (emil.name, turns_started ^ turns_closed)
        failed = [r for r in read.records if isinstance(r, TurnRecord) and r.failed]
        errors = [r for r in read.records if isinstance(r, ErrorRecord)]
        assert any(isinstance(r, RequestRecord) for r in read.records), emil.name
        if emil in stayed:
            assert not failed and not errors, (emil.name, [r.failed for r in failed], errors)
        else:
            assert len(failed) <= 1 and all(r.t > killed_at for r in failed), (emil.name, [r.failed for r in failed])
    print(f"\nkilled replica {victim} with {in_flight:g} request(s) in flight; {len(talk.said)} lines said")
    for emil in emils:
        records = emil.records()
        print(f"  {emil.name} on replica {placed[emil.name][0]}: "
              f"{sum(isinstance(r, CompletionRecord) for r in records)} completions, "
              f"{sum(isinstance(r, RetryRecord) for r in records)} retries, "
              f"{sum(isinstance(r, TurnRecord) and bool(r.failed) for r in records)} failed turns")

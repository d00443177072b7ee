"""Play bench tasks: one embedded world, a fresh Emil session per run, scored from the world.

:class:`BenchWorld` is one flying-squid server and the players' clients (``alex``, the
operator, and ``bob``, a stranger: plain mineflayer bots, :class:`~emil.sandbox.player.PlayerBot`)
for the whole bench; :meth:`BenchWorld.play` runs one task once against one endpoint:

1. the task is placed in a fresh arena (its own patch of the world, far from the others), its
   blocks set, the players' inventories cleared, everybody put on their spot;
2. Emil starts as ``live`` starts it (:func:`~emil.agent.session.open_session`: the same checks,
   loop, context manager, trust guard and bot), with the endpoint's model, temperature 0, a data
   folder of its own, and a system prompt made unique to the run (a tag at its very start), so no
   run is served from another's prefix cache; its items are given, the task's mobs summoned;
3. the world is read once before play (a task already met would score nothing honest), then
   the players' script runs while Emil plays; the world is read every second, latching steps;
4. the run ends when every goal holds (after the script), when its turns are used up, or when
   its time limit is reached (a hung run is cut there and scored failed, with the reason);
5. the last reading scores it; the recording gives turns, tokens (the server's ``usage``),
   tool-call validity and refusals.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
import shutil
import statistics
import time
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from emil.agent.persona import DEFAULT_PROMPTS_DIR, PROMPT_FILES
from emil.agent.session import Session, open_session
from emil.bench.goals import Block, Dug, Score, WorldState, score
from emil.bench.tasks import OPERATOR, STRANGER, Task, Y
from emil.config import Settings, validate_settings
from emil.context.budget import Budget
from emil.exceptions import ConfigurationError
from emil.llm.types import ToolCall
from emil.recording import (
    CompletionRecord,
    EventRecord,
    ToolResultRecord,
    TurnRecord,
    read_recording,
)
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.world.port import TurnContext
from emil.world.setup import ensure_js_deps

__all__ = ["ARENA_SPACING", "BenchOptions", "BenchWorld", "RunPlan", "RunResult", "leaf_error"]

_log = logging.getLogger("emil.bench")

ARENA_SPACING = 160
"""Blocks between two arenas' centres (beyond a mob's follow range and a client's view)."""

EMIL = "Emil"

STAGING_S = 120.0
"""Room beyond a task's limit for staging the world and starting and stopping the session."""


@dataclass
class BenchOptions:
    """How every run is played (the same for every endpoint of a comparison)."""

    workdir: Path
    settings: dict[str, Any] = field(default_factory=dict)
    """Emil's settings over the bench's defaults (``window``, ``output_reserve``, ...)."""
    turn_cap: int | None = None
    """At most this many turns per run, whatever the task allows (a model that never calls a
    tool is measured in few turns)."""
    time_scale: float = 1.0
    """Every task's time limit times this (a slow server on a busy CPU)."""
    on_run_start: Callable[[RunPlan], None] | None = None
    """Called once a run's world is ready, before play (the tests' oracle learns its task)."""
    progress: Callable[[str], None] = lambda line: None


@dataclass(frozen=True)
class RunPlan:
    """One run as placed: the task in absolute coordinates, its tag, its endpoint."""

    task: Task
    tag: str
    endpoint: str
    run: int


@dataclass
class RunResult:
    """What one run did, as read from the world and the recording."""

    task: str
    kind: str
    endpoint: str
    run: int
    tag: str
    success: bool = False
    fraction: float = 0.0
    met: list[bool] = field(default_factory=list)
    goal_reasons: list[str] = field(default_factory=list)
    reason: str = ""
    """Why it failed: timed out, out of turns, invalid call, wrong target, refused, no tool call,
    error: ... (empty on success)."""
    detail: str = ""
    """The first unmet goal, in words."""
    score_before: float = 0.0
    """The score of the world as set up, before Emil played (must be 0)."""
    turns: int = 0
    game_s: float = 0.0
    """Seconds of play until success, or until the run was cut."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    tool_calls: int = 0
    invalid_calls: int = 0
    refused: int = 0
    trims: int = 0
    wall_s: float = 0.0
    actions: list[str] = field(default_factory=list)
    """Each tool call and how it ended, in order (for reading a failure)."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Slot:
    """One run in a bench's order: a task on an endpoint; ``run`` < 0 is a discarded warm-up."""

    task: Task
    endpoint: str
    model: str
    run: int

    @property
    def warmup(self) -> bool:
        return self.run < 0


def schedule(tasks: list[Task], endpoints: list[tuple[str, str]], runs: int, warmup: int) -> list[Slot]:
    """The order a bench plays in: ``warmup`` discarded runs of the first task on each endpoint,
    then every run of every task on each endpoint in turn (A, B, A, B, ...), so two endpoints
    of a comparison meet the same tasks, runs and world at the same point of the bench, and
    neither gets all of a quiet or a busy stretch of the machine."""
    if not tasks:  # tasks[0] is the warm-ups'
        return []
    slots = [Slot(tasks[0], url, model, -1 - w) for w in range(warmup) for url, model in endpoints]
    slots += [Slot(task, url, model, run) for run in range(runs) for task in tasks for url, model in endpoints]
    return slots


class BenchWorld:
    """``async with BenchWorld(options) as world: result = await world.play(task, endpoint, model, run)``."""

    def __init__(self, options: BenchOptions) -> None:
        self.options = options
        self.server: EmbeddedServer | None = None
        self.players: dict[str, PlayerBot] = {}
        self._arena = 0
        self._play_t: float | None = None
        self._first_line: float | None = None
        """When the run's first player line was said (monotonic): turns count from then."""
        """When the current run's play began (wall clock): items gained count from then."""
        self._stack = contextlib.AsyncExitStack()
        self._tg: anyio.abc.TaskGroup | None = None
        self._release: dict[str, anyio.Event] = {}

    async def __aenter__(self) -> BenchWorld:
        await anyio.to_thread.run_sync(ensure_js_deps)
        try:
            self.server = await self._stack.enter_async_context(EmbeddedServer())
            self._tg = await self._stack.enter_async_context(anyio.create_task_group())
            await self._ensure_players()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        for done in self._release.values():
            done.set()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
        await self._stack.aclose()

    async def _hold(self, name: str, ready: anyio.Event, release: anyio.Event) -> None:
        """One player's client, held open in a task of its own (its scopes never mix with a run's)."""
        assert self.server is not None
        async with PlayerBot(self.server.port, name) as player:
            self.players[name] = player
            ready.set()
            await release.wait()

    async def _ensure_players(self) -> None:
        """The players' clients, connected again if one was dropped (a client that misses the
        server's keep-alives on a loaded machine is kicked; its process then exits)."""
        assert self.server is not None and self._tg is not None
        if not self.server.running:
            _log.warning("bench: the embedded server had stopped (%s); starting it again",
                         " | ".join(self.server.log_lines[-3:]))
            await self.server.start()
        for name in (OPERATOR, STRANGER):
            player = self.players.get(name)
            proc = getattr(player, "_proc", None)
            if player is not None and proc is not None and proc.returncode is None:
                continue
            if name in self._release:
                _log.warning("bench: %s's client was gone; connecting it again", name)
                self._release[name].set()
            ready, release = anyio.Event(), anyio.Event()
            self._release[name] = release
            self._tg.start_soon(self._hold, name, ready, release)
            with anyio.fail_after(60):
                await ready.wait()

    # --- one run --------------------------------------------------------------------------

    async def play(self, base: Task, endpoint: str, model: str, run: int) -> RunResult:
        """Play ``base`` once against ``endpoint``; never raises for what the model or the world
        did (a failure is a failed run with its reason). A configuration error (a bad ``--set``,
        a prompt that cannot fit the served window) is raised: every other run would fail the
        same way, so it stops the bench instead of scoring the model 0."""
        self._arena += 1
        self._play_t = None
        ox, oz = self._arena * ARENA_SPACING, 0
        task = base.at(ox, oz)
        tag = secrets.token_hex(6)
        result = RunResult(task.id, task.kind, endpoint, run, tag)
        rundir = self.options.workdir / f"{task.id}-{run}-{tag}"
        rundir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            # A run that hangs anywhere (staging, a session that will not start or stop) is cut
            # here: its limit plus room for staging and the start, and scored failed.
            with anyio.move_on_after(self._limit(task) + STAGING_S) as outer:
                await self._play(task, RunPlan(task, tag, endpoint, run), model, rundir, result)
            if outer.cancelled_caught:
                result.success, result.reason = False, "timed out"
                result.detail = result.detail or f"the run hung and was cut after {self._limit(task) + STAGING_S:.0f} s"
        except Exception as exc:  # a run that could not be played is a failed run, with why
            leaf = leaf_error(exc)
            if isinstance(leaf, ConfigurationError):
                raise leaf from None
            result.reason = f"error: {' '.join(str(leaf).split())[:300] or type(leaf).__name__}"
            trace = rundir / "error.txt"  # the operator reads one line; the traceback is kept here
            trace.write_text("".join(traceback.format_exception(exc)))
            _log.warning("bench run %s could not be played (%s); traceback in %s", task.id, result.reason, trace)
            result.success = False
        finally:
            result.wall_s = round(time.monotonic() - started, 1)
            await self._tidy(task)
        recording = rundir / "session.jsonl"
        if recording.exists():
            _read_recording(recording, result)
        if not result.success and not result.reason.startswith("error"):
            result.reason = _failure_reason(result)
        return result

    async def _play(self, task: Task, plan: RunPlan, model: str, rundir: Path, result: RunResult) -> None:
        assert self.server is not None
        await self._ensure_players()
        await self._stage_players(task)
        await self._set_blocks(task)
        settings = self._settings(task, plan, model, rundir)
        for attempt in (1, 2):
            try:
                await self._session(task, plan, settings, rundir, result)
                return
            except Exception as exc:
                if attempt == 2 or not isinstance(leaf_error(exc), _Frozen):
                    raise
                _log.warning("bench: %s: %s; starting Emil's session again", task.id, leaf_error(exc))
                (rundir / "session.jsonl").rename(rundir / "session-frozen.jsonl")

    async def _session(self, task: Task, plan: RunPlan, settings: Settings, rundir: Path, result: RunResult) -> None:
        assert self.server is not None
        async with open_session(settings, recording=rundir / "session.jsonl") as session:
            if "prompt_budget_over_fixed" in task.settings:
                _narrow_budget(session, int(task.settings["prompt_budget_over_fixed"]))
            await self._stage_emil(task, session)
            dropped = await _drop_staging_events(session)
            _log.debug("bench: %s: %d staging events dropped", task.id, dropped)
            for mob, (x, z) in task.mobs:
                await self.server.command(f"summon {mob} {x + 0.5} {Y} {z + 0.5}")
            await anyio.sleep(1.0)
            marks: dict[str, tuple[float, float, float]] = {}
            heard_from = {n: len(p.events) for n, p in self.players.items()}
            before = await self._read(task, session, marks, heard_from)
            result.score_before = score(task.goals, before, set()).fraction
            if self.options.on_run_start is not None:
                self.options.on_run_start(plan)
            self.options.progress(f"{task.id} run {plan.run} on {plan.endpoint}: playing (limit {self._limit(task):.0f} s)")
            await self._run(task, session, marks, heard_from, result)

    def _limit(self, task: Task) -> float:
        return task.limit_s * self.options.time_scale

    def _max_turns(self, task: Task) -> int:
        cap = self.options.turn_cap
        return min(task.max_turns, cap) if cap else task.max_turns

    async def _run(self, task: Task, session: Session, marks: dict[str, Any], heard_from: dict[str, int], result: RunResult) -> None:
        latched: set[int] = set()
        script_done = anyio.Event()
        agent_done = anyio.Event()
        start = time.monotonic()
        cut = "timed out"

        self._play_t = time.time()
        stats = session.agent.stats
        self._first_line = None

        def counted() -> list[Any]:
            """The turns that count: from the first player line on (a task's mobs, or an
            event staging made after its events were dropped, can start one before it)."""
            first = self._first_line
            return [] if first is None else [t for t in stats.turns if t.ended is None or t.ended >= first]

        def turns_used() -> bool:
            """The run's turns are used up and the last one is over."""
            mine = counted()
            return len(mine) >= self._max_turns(task) and mine[-1].ended is not None

        async def agent() -> None:
            try:
                await session.agent.run()
            finally:
                agent_done.set()

        async def script() -> None:
            try:
                await self._script(task, session, marks, heard_from, latched)
            finally:
                script_done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            tg.start_soon(script)
            with anyio.move_on_after(self._limit(task)):
                while True:
                    await anyio.sleep(1.0)
                    now = await self._read(task, session, marks, heard_from)
                    latched |= {i for i, g in enumerate(task.goals) if g.latched and g.met(now)}
                    if script_done.is_set() and score(task.goals, now, latched).success:
                        cut = ""
                        break
                    await self._pick_up(task)
                    if agent_done.is_set() or turns_used():
                        # turns used up: what was started may still finish (a walk, a give)
                        await anyio.sleep(3.0 if any(t.actions for t in stats.turns) else 0.5)
                        cut = "out of turns"
                        break
            result.game_s = round(time.monotonic() - start, 1)
            session.agent.stop("bench run over")
            final = await self._read(task, session, marks, heard_from)
            tg.cancel_scope.cancel()
        s: Score = score(task.goals, final, latched)
        result.success, result.fraction = s.success, round(s.fraction, 3)
        result.met, result.goal_reasons = list(s.met), list(s.reasons)
        result.detail = s.first_failure
        result.turns = len(counted())
        if not s.success:
            result.reason = cut or "timed out"

    async def _script(self, task: Task, session: Session, marks: dict[str, Any], heard_from: dict[str, int], latched: set[int]) -> None:
        assert self.server is not None
        for step in task.steps:
            if step.do != "until":
                await anyio.sleep(step.wait_s)
            player = self.players.get(step.who)
            if step.do == "say" and player is not None:
                if self._first_line is None:
                    self._first_line = time.monotonic()
                    session.agent.limit_turns(self._max_turns(task))  # none starts past the cap
                await player.do("chat", text=step.text)
            elif step.do == "goto" and player is not None and step.point is not None:
                with contextlib.suppress(AssertionError, TimeoutError):
                    await player.do("goto", x=step.point[0], y=step.point[1], z=step.point[2], range=0, timeout=40)
            elif step.do in ("place", "deposit") and player is not None and step.point is not None:
                wanted = {step.item: 1} if step.do == "place" else step.items
                for item, count in wanted.items():
                    await self.server.command(f"give {step.who} {item} {count}")

                async def arrived(p: PlayerBot = player, w: dict[str, int] = wanted) -> bool:
                    return await _has(p, w)

                if not await _until(arrived, 10):
                    raise RuntimeError(f"{step.who} never received {wanted} to {step.do}")
                x, y, z = (int(c) for c in step.point)
                if step.do == "place":
                    await player.do("place", item=step.item, x=x, y=y, z=z, sneak=True)
                else:
                    await player.do("chest", x=x, y=y, z=z, deposit=step.items)
                    # What a player stored is in the chest only: a deposit that left anything in
                    # their hands would let a task's "they got it back" hold for nothing.
                    await self.server.command(f"clear {step.who}")

                    async def emptied(p: PlayerBot = player) -> bool:
                        return await _empty(p)

                    if not await _until(emptied, 10):  # seen under load: the task then scored for nothing
                        raise RuntimeError(f"{step.who} still holds items after storing them in the chest")
            elif step.do == "mark":
                state = await self._read(task, session, marks, heard_from)
                if step.who in state.positions:
                    marks[step.name] = state.positions[step.who]
            elif step.do == "until":

                async def ready(goals: tuple[int, ...] = step.goals) -> bool:
                    state = await self._read(task, session, marks, heard_from)
                    now = {i for i in goals if task.goals[i].met(state)}
                    latched.update(i for i in now if task.goals[i].latched)
                    return now == set(goals) or set(goals) <= latched

                await _until(ready, step.wait_s)

    # --- the world ------------------------------------------------------------------------

    async def _read(self, task: Task, session: Session, marks: dict[str, Any], heard_from: dict[str, int]) -> WorldState:
        """One reading of the world: Emil's client for Emil, the players' clients for the rest."""
        state = WorldState(marks=dict(marks))
        snap = await session.agent.world.snapshot() or {}
        inv = snap.get("inventory")
        state.inventories[EMIL] = dict(inv) if isinstance(inv, dict) else {}
        pos = snap.get("position")
        if isinstance(pos, dict):
            state.positions[EMIL] = (float(pos["x"]), float(pos["y"]), float(pos["z"]))
        health = snap.get("health")
        state.health[EMIL] = float(health) if isinstance(health, int | float) else 0.0
        for name in task.players:
            player = self.players[name]
            with contextlib.suppress(AssertionError, TimeoutError):
                state.inventories[name] = await player.do("inventory", timeout=10)
                p = await player.do("position", timeout=10)
                state.positions[name] = (p["x"], p["y"], p["z"])
            state.heard[name] = [_from_emil(e["text"]) for e in player.events[heard_from[name]:]
                                 if e.get("event") == "message" and _from_emil(e["text"])]
        judge = self.players[OPERATOR]
        for pos in _block_positions(task):
            with contextlib.suppress(AssertionError, TimeoutError):
                state.blocks[pos] = await judge.do("block", x=pos[0], y=pos[1], z=pos[2], timeout=10)
        if task.mobs:
            with contextlib.suppress(AssertionError, TimeoutError):
                for e in await judge.do("entities", timeout=10):
                    if e.get("type") != "player" and e.get("name"):
                        state.mobs.append((e["name"], (e["x"], e["y"], e["z"])))
                state.mobs_read = True
        if session.recording_path.exists():
            since = self._play_t
            gained: dict[str, int] = {}
            died = 0
            for r in read_recording(session.recording_path).records:
                if not isinstance(r, EventRecord) or since is None or float(r.event.get("t") or 0) < since:
                    continue
                if r.event.get("kind") == "item_collected" and r.priority != "echo":
                    item = str(r.event.get("item"))
                    gained[item] = gained.get(item, 0) + int(r.event.get("count") or 0)
                elif r.event.get("kind") == "death":
                    died += 1
            state.gained[EMIL] = gained
            state.deaths[EMIL] = died
        return state

    async def _stage_players(self, task: Task) -> None:
        assert self.server is not None
        for name, (x, z) in task.players.items():
            player = self.players[name]
            await self.server.command(f"clear {name}")
            await self.server.command(f"heal {name}")
            await player.do("chat", text=f"/tp {name} {x + 0.5} {Y} {z + 0.5}")

            async def there(p: PlayerBot = player, at: tuple[float, float] = (x + 0.5, z + 0.5)) -> bool:
                pos = await p.do("position")
                empty = await p.do("inventory") == {}
                return bool(empty and abs(pos["x"] - at[0]) < 1 and abs(pos["z"] - at[1]) < 1)

            if not await _until(there, 10):
                await player.do("chat", text=f"/tp {name} {x + 0.5} {Y} {z + 0.5}")
                await _until(there, 10)

    async def _pick_up(self, task: Task) -> None:
        """A player steps onto items lying within 4 blocks of them, as a person picks up what
        was tossed to them (the server hands an item over when a player comes close)."""
        for name in task.players:
            player = self.players[name]
            with contextlib.suppress(AssertionError, TimeoutError):
                me = await player.do("position", timeout=5)
                items = [e for e in await player.do("entities", timeout=5) if e.get("name") == "item"]
                near = [e for e in items if 1.0 < math.dist((e["x"], e["z"]), (me["x"], me["z"])) < 4.0]
                if near:
                    e = near[0]
                    await player.do("goto", x=e["x"], y=e["y"], z=e["z"], range=0, timeout=8)

    async def _set_blocks(self, task: Task) -> None:
        """The task's blocks, each checked from the operator's client (a block set before its
        chunk is ready is set again)."""
        assert self.server is not None
        judge = self.players[OPERATOR]
        for pos, name in task.blocks:
            for _ in range(5):
                await self.server.command(f"setblock {pos[0]} {pos[1]} {pos[2]} {name}")

                async def done(p: tuple[int, int, int] = pos, n: str = name) -> bool:
                    return bool(await judge.do("block", x=p[0], y=p[1], z=p[2]) == n)

                if await _until(done, 2):
                    break
            else:
                raise RuntimeError(f"the block {name} at {pos} could not be set")

    async def _stage_emil(self, task: Task, session: Session) -> None:
        assert self.server is not None
        x, z = task.emil_at
        judge = self.players[OPERATOR]
        world = session.agent.world

        async def there() -> bool:
            snap = await world.snapshot() or {}
            pos = snap.get("position")
            return isinstance(pos, dict) and abs(pos["x"] - (x + 0.5)) < 1 and abs(pos["z"] - (z + 0.5)) < 1

        # A marker in the ground beside the spot (gravel: the snapshot lists it; no task uses it)
        # shows that Emil's client holds the arena's terrain: a client teleported far right after
        # joining can be left without its chunks, and then it cannot move at all.
        mx, mz = int(x) - 6, int(z) - 6
        await self.server.command(f"setblock {mx} {Y - 1} {mz} gravel")

        async def terrain() -> bool:
            blocks = (await world.snapshot() or {}).get("blocks") or []
            return await there() and any(isinstance(b, dict) and b.get("name") == "gravel" for b in blocks)

        for attempt in range(4):
            if attempt:  # away and back: the server sends the chunks anew
                await judge.do("chat", text=f"/tp {EMIL} {x + 0.5} {Y} {z + 200.5}")
                await anyio.sleep(1.0)
            await judge.do("chat", text=f"/tp {EMIL} {x + 0.5} {Y} {z + 0.5}")
            if await _until(terrain, 6):
                break
        else:
            raise _Frozen("Emil's client never showed the arena's terrain")
        # Emil must be able to move: a client whose teleport the server still waits to see
        # confirmed has every move put back (seen under load: it stands frozen on its spot).
        for attempt in range(2):
            if await self._moves(session, x + 2.5, z + 0.5) and await self._moves(session, x + 0.5, z + 0.5):
                break
            _log.warning("bench: Emil could not move on its spot (attempt %d); teleporting it away and back", attempt + 1)
            await judge.do("chat", text=f"/tp {EMIL} {x + 0.5} {Y} {z + 200.5}")
            await anyio.sleep(1.5)
            await judge.do("chat", text=f"/tp {EMIL} {x + 0.5} {Y} {z + 0.5}")
            await _until(terrain, 6)
        else:
            raise _Frozen("Emil's client cannot move in the arena")
        await self.server.command(f"clear {EMIL}")
        await self.server.command(f"heal {EMIL}")

        async def emptied() -> bool:
            return (await world.snapshot() or {}).get("inventory") in ({}, None)

        await _until(emptied, 10)
        for item, count in task.emil_items.items():
            await self.server.command(f"give {EMIL} {item} {count}")

        async def stocked() -> bool:
            inv = (await world.snapshot() or {}).get("inventory") or {}
            return all(isinstance(inv, dict) and inv.get(i, 0) >= n for i, n in task.emil_items.items())

        if not await _until(stocked, 10):
            raise RuntimeError(f"Emil's items did not arrive: {task.emil_items}")

        async def sees_players() -> bool:
            seen = {p.get("name") for p in (await world.snapshot() or {}).get("players") or [] if isinstance(p, dict)}
            return set(task.players) <= seen

        for _ in range(3):  # a player teleported before Emil joined may not be shown to it yet
            if await _until(sees_players, 4):
                break
            for name, (px, pz) in task.players.items():  # away and back: the server shows them anew
                await judge.do("chat", text=f"/tp {name} {px + 0.5} {Y} {pz + 90.5}")
                await anyio.sleep(0.5)
                await judge.do("chat", text=f"/tp {name} {px + 0.5} {Y} {pz + 0.5}")
        else:
            raise RuntimeError(f"Emil's client does not see {sorted(task.players)}")
        # Staging made events (items arriving, the teleport, the walk); they are dropped next.
        await anyio.sleep(0.5)

    async def _moves(self, session: Session, x: float, z: float) -> bool:
        """Emil walks to (x, z) through its own go_to (outside any turn) and gets there."""
        call = ToolCall(id="bench-stage", name="go_to", raw_arguments="", arguments={"x": x, "y": Y, "z": z, "range": 0})
        turn = TurnContext(limit_s=8.0)  # Emil on its own: no one's words
        with contextlib.suppress(Exception), anyio.move_on_after(8.0):  # a frozen client's go_to never ends
            await session.agent.world.begin_turn(turn)
            await session.agent.world.run_tool(call, turn)
        pos = (await session.agent.world.snapshot() or {}).get("position")
        return isinstance(pos, dict) and abs(pos["x"] - x) < 1.0 and abs(pos["z"] - z) < 1.0

    async def _tidy(self, task: Task) -> None:
        """Leave no mob of this run for a later one (the arenas are apart; this is belt and braces)."""
        if self.server is not None and task.mobs and self.server.running:
            for mob, _ in task.mobs:
                with contextlib.suppress(Exception):
                    await self.players[OPERATOR].do("chat", text=f"/kill @e[type={mob}]")

    def _settings(self, task: Task, plan: RunPlan, model: str, rundir: Path) -> Settings:
        assert self.server is not None
        prompts = rundir / "prompts"
        _tagged_prompts(prompts, plan.tag)
        base: dict[str, Any] = {
            "endpoint": plan.endpoint, "model": model, "mc_host": "127.0.0.1", "mc_port": self.server.port,
            "operators": (OPERATOR,), "temperature": 0.0, "data_dir": rundir / "data", "recording_dir": rundir,
            "prompts_dir": prompts, "metrics_address": "off", "endpoint_wait_s": 30.0,
        }
        base.update(self.options.settings)
        base.update({k: v for k, v in task.settings.items() if k != "prompt_budget_over_fixed"})
        sources = {k: "the bench" for k in base} | {k: f"--set {k}" for k in self.options.settings}
        return validate_settings(base, sources | {k: f"task {task.id}" for k in task.settings})


class _Frozen(RuntimeError):
    """Emil's client cannot move (a new session, a new connection, cures it)."""


STAGING_QUIET_S = 0.5
"""Staging's events are over once none has come for this long."""


async def _drop_staging_events(session: Session) -> int:
    """Read and drop the events staging made (the staging walks' ends, items arriving, the
    teleports) before play, through the session's world (its guard and memory still see them);
    returns how many. Left in, they started a turn before the task's first line: the real model
    answered "action go_to finished" with a go_to of its own, cold-prefilled for a minute,
    interrupted by the player's line, and then repeated that call instead of answering it."""
    events = session.agent.world.events()
    dropped = 0
    while True:
        with anyio.move_on_after(STAGING_QUIET_S) as quiet:
            try:
                await anext(events)
            except StopAsyncIteration:
                return dropped
            dropped += 1
        if quiet.cancelled_caught:
            return dropped


def leaf_error(exc: BaseException) -> BaseException:
    """The first exception inside nested exception groups (what went wrong, not the group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _narrow_budget(session: Session, over_fixed: int) -> None:
    """Set the session's prompt budget to its fixed part (system prompt, tools) plus
    ``over_fixed`` tokens, counted in the served model's tokens once the session knows them: the
    memory task needs the prompt trimmed before its question, whatever the model."""
    manager = getattr(session.agent.context, "manager", None)
    if manager is None:
        raise RuntimeError("the session's context has no manager to narrow")
    fixed = int(manager.incremental.head_tokens(manager.system, manager.tools))
    old = manager.budget
    manager.budget = Budget.of(old.window, old.output_reserve, fixed + over_fixed, low_water=old.low_water, sources=old.sources)
    _log.info("bench: prompt budget narrowed to %d (fixed part %d + %d)", fixed + over_fixed, fixed, over_fixed)


def _block_positions(task: Task) -> list[tuple[int, int, int]]:
    """The blocks a task's goals read."""
    out: list[tuple[int, int, int]] = []
    for goal in task.goals:
        if isinstance(goal, Block):
            out.append(goal.pos)
        elif isinstance(goal, Dug):
            out.extend(goal.positions)
    return out


def _tagged_prompts(folder: Path, tag: str) -> None:
    """Emil's prompt files with the run's tag at the very start of the system prompt."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in PROMPT_FILES:
        shutil.copy(DEFAULT_PROMPTS_DIR / name, folder / name)
    persona = folder / PROMPT_FILES[0]
    text = persona.read_text()
    persona.write_text(f"{{{{ '[bench run {tag}]' }}}}\n" + text)


def _from_emil(text: str) -> str:
    """The text of a chat line from Emil as a player's client shows it ("" when not from Emil)."""
    for prefix in (f"<{EMIL}> ", f"{EMIL} whispers to you: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return ""


async def _empty(player: PlayerBot) -> bool:
    return bool(await player.do("inventory") == {})


async def _has(player: PlayerBot, items: dict[str, int]) -> bool:
    inv = await player.do("inventory")
    return all(inv.get(i, 0) >= n for i, n in items.items())


async def _until(check: Callable[[], Any], within: float) -> bool:
    """Poll ``check`` until it holds (True) or ``within`` seconds pass (False)."""
    with anyio.move_on_after(within):
        while True:
            with contextlib.suppress(AssertionError, TimeoutError):
                if await check():
                    return True
            await anyio.sleep(0.3)
    return False


def _read_recording(path: Path, result: RunResult) -> None:
    records = read_recording(path).records
    for r in records:
        if isinstance(r, CompletionRecord):
            result.requests += 1
            result.prompt_tokens += r.prompt_tokens or 0
            result.completion_tokens += r.completion_tokens or 0
            result.tool_calls += len(r.tool_calls)
            result.invalid_calls += sum(1 for c in r.tool_calls if c.error)
        elif isinstance(r, ToolResultRecord):
            result.actions.append(f"{r.name}({json.dumps(r.arguments)}) -> {'ok' if r.ok else 'FAILED'}: {r.text[:160]}")
            if not r.ok and r.rule and ("refus" in r.text or "not allowed" in r.text or "may not" in r.text or "only" in r.text):
                result.refused += 1
        elif isinstance(r, TurnRecord):  # turns are counted in play, from the first line on
            result.trims += r.trims


def _failure_reason(result: RunResult) -> str:
    """The one word for why a run failed, most telling first."""
    if any(r.startswith("wrong target") for r in result.goal_reasons):
        return "wrong target"
    if result.refused:
        return "refused"
    if result.tool_calls and result.invalid_calls == result.tool_calls:
        return "invalid call"
    if not result.tool_calls and result.turns:
        return "no tool call"
    return result.reason or "timed out"


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@contextlib.asynccontextmanager
async def bench_world(options: BenchOptions) -> AsyncIterator[BenchWorld]:
    async with BenchWorld(options) as world:
        yield world


"""A multi-player soak: the real Emil among several scripted players, for a bounded time.

Everything is local and real except the model: an embedded flying-squid server, the
vLLM-dialect HTTP double answering with a SCRIPTED brain (:class:`SoakBrain`, rules, not a
model), Emil itself through the same startup as ``live`` (loop, bridge, context manager,
client, notes), and four players, each a real mineflayer bot with a script:

- ``alex``  friendly: greets, asks Emil to follow and to stop, names his chest, tosses bread
- ``bella`` trader: names her farm, asks for wood (Emil promises it), tosses apples, whispers
- ``cody``  griefer: taunts and hits Emil
- ``dana``  joins late and floods the chat with a burst of lines

Players act on a seeded schedule and loop their scripts until the time is up; the session is
recorded like any other (``tools/soak.py`` prints where and a summary). What Emil says is
scripted: a soak shows the runtime holding up under several players, not a model's play.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from pydantic import JsonValue

from emil.agent.session import Session, open_session
from emil.agent.startup import summary_line
from emil.config import Settings
from emil.llm.types import ToolChoice
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    OverflowRecord,
    Record,
    RequestRecord,
    RetryRecord,
    SummaryRecord,
    ToolResultRecord,
    TrimRecord,
    TurnRecord,
    read_recording,
)
from emil.sandbox.server import EmbeddedServer
from emil.testing.brains import SCRIPTED_PREFIX, DemoBrain, NpcContext
from emil.testing.script import Reply
from emil.testing.vllm_double import VLLMDouble
from emil.world.bridge import Bot
from emil.world.wire import BotSettings, ReflexSettings

__all__ = ["PLAYERS", "SoakBrain", "SoakFigures", "SoakResult", "drain", "play_soak", "soak_figures"]

_log = logging.getLogger("emil.soak")

PLAYERS = ("alex", "bella", "cody", "dana")


class SoakBrain(DemoBrain):
    """SCRIPTED soak brain (rules, not a model): the demo's rules plus a promise when asked to
    bring something ("can you bring me wood?" -> "I'll bring you wood, bella!")."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.add_rule(self.promise_when_asked, first=True)

    def promise_when_asked(self, ctx: NpcContext) -> Reply | None:
        """"bring me X" -> a promise (the notes remember promises Emil makes)."""
        if ctx.chat and ctx.last_role == "user" and "bring me" in ctx.chat.text:
            what = ctx.chat.text.split("bring me", 1)[1].strip(" ?!.") or "it"
            return self._say(ctx, f"{SCRIPTED_PREFIX}I'll bring you {what}, {ctx.chat.player}!")
        return None


@dataclass
class SoakResult:
    """What the soak did, for the summary and the slow test."""

    session: Session | None = None
    seconds: float = 0.0
    player_steps: Counter[str] = field(default_factory=Counter)
    """Script steps each player took (ok or not)."""
    failed_steps: list[str] = field(default_factory=list)
    notes: Counter[str] = field(default_factory=Counter)
    """Notes in the store at the end, per topic."""
    note_renders: int = 0
    errors: list[str] = field(default_factory=list)
    """Error records in the recording."""
    fatal: list[str] = field(default_factory=list)
    """The fatal ones among them (a soak passes with none)."""
    served_by: str = "SCRIPTED brain served by the vLLM-dialect double: not a model"

    def summary(self) -> str:
        """A few lines for the operator."""
        session = self.session
        if session is None:
            return "soak did not start"
        lines = [
            f"=== Emil soak ({self.served_by}) ===",
            f"ran {self.seconds:.0f} s with players {', '.join(PLAYERS)}; script steps: "
            + ", ".join(f"{p} {n}" for p, n in sorted(self.player_steps.items())),
            summary_line(session.agent.stats, session.recording_path),
            f"notes at the end: {sum(self.notes.values())} ("
            + ", ".join(f"{t} {n}" for t, n in sorted(self.notes.items()))
            + f"); pinned block rendered {self.note_renders} times (at start, then between turns when the notes changed)",
            f"error records: {len(self.errors)}" + (f" (first: {self.errors[0]})" if self.errors else ""),
        ]
        if self.failed_steps:
            lines.append(f"player steps that failed: {len(self.failed_steps)} (first: {self.failed_steps[0]})")
        return "\n".join(lines)


class _Player:
    """One scripted player: a real bot plus its script, run on a seeded schedule."""

    def __init__(self, name: str, bot: Bot, server: EmbeddedServer, emil: str, result: SoakResult, rng: random.Random) -> None:
        self.name, self.bot, self.server, self.emil, self.result, self.rng = name, bot, server, emil, result, rng

    async def _act(self, what: str, action: str, args: dict[str, JsonValue]) -> bool:
        outcome = await self.bot.act(action, args, timeout=30)
        self.result.player_steps[self.name] += 1
        if not outcome.ok:
            self.result.failed_steps.append(f"{self.name} {what}: {outcome.error}")
        return outcome.ok

    async def say(self, text: str) -> None:
        await self._act(f"says {text!r}", "say", {"text": text})

    async def pause(self, low: float, high: float) -> None:
        await anyio.sleep(self.rng.uniform(low, high))

    async def toss(self, item: str, count: int) -> None:
        await self.server.command(f"give {self.name} {item} {count}")
        await anyio.sleep(0.8)
        await self._act(f"tosses {count} {item}", "give", {"player": self.emil, "item": item, "count": count})

    async def alex(self) -> None:
        e = self.emil
        await self.say(f"Hello {e}!")
        await self.pause(2, 4)
        await self.say(f"{e}, my chest is at 12 64 -7")
        await self.pause(2, 4)
        await self.say(f"{e}, follow me")
        await self.pause(3, 5)
        await self.toss("bread", 3)
        await self.pause(2, 4)
        await self.say(f"{e}, stop here")
        await self.pause(4, 8)

    async def bella(self) -> None:
        e = self.emil
        await self.say(f"hi {e}, our farm is at -20 64 15")
        await self.pause(3, 6)
        await self.say(f"{e}, can you bring me wood?")
        await self.pause(3, 6)
        await self.toss("apple", 2)
        await self.pause(2, 5)
        await self._act("whispers", "whisper", {"player": e, "text": "don't tell cody about the farm"})
        await self.pause(5, 9)

    async def cody(self) -> None:
        e = self.emil
        await self.say(f"hey {e}, you look weak")
        await self.pause(2, 5)
        await self.while_emil_thinks()
        order: JsonValue = {"requesters": [self.name], "attack": e}  # its own order (docs/trust.md)
        await self._act("hits Emil", "attack", {"target": e, "duration_s": 4, "authority": order})  # 1 s can end before the first swing
        await self.pause(6, 12)

    async def while_emil_thinks(self, within: float = 20.0) -> None:
        """A griefer's timing: wait (at most ``within`` s) until Emil has just sent a model call
        in a turn that is not already about this player's blows, so the first hit lands while
        Emil waits for the answer and tests the interrupt that cancels a model call (a hit
        between turns only starts one)."""
        agent = self.result.session.agent if self.result.session else None
        if agent is None:
            return

        def calling() -> bool:
            return agent.waiting_for_model and f"damage:{self.name}" not in agent.interrupts.turn_keys

        with anyio.move_on_after(within):
            while calling():  # noqa: ASYNC110 - the agent runs in this process; no event to wait on
                await anyio.sleep(0.02)
            while not calling():  # noqa: ASYNC110
                await anyio.sleep(0.02)

    async def dana(self) -> None:
        await self.say("anyone around?")
        await self.pause(3, 6)
        for i in range(12):  # a flood: faster than the chat debounce
            await self.say(f"spam {i} {self.emil} look at this")
            await anyio.sleep(0.15)
        await self.pause(8, 14)

    async def play(self, script: Callable[[], Awaitable[None]], start_after: float) -> None:
        await anyio.sleep(start_after)
        while True:
            await script()


async def play_soak(
    settings: Settings,
    *,
    duration_s: float,
    recording: Path,
    data_dir: Path,
    seed: int = 0,
    window: int = 16384,
    decode_tps: float | None = None,
    endpoint: str | None = None,
    tool_choice: ToolChoice | None = None,
    until: Callable[[list[Record]], bool] | None = None,
) -> SoakResult:
    """Start everything, let the players play for ``duration_s``, stop everything.

    ``until``: stop as soon as the recording so far satisfies it (checked every second;
    ``duration_s`` is then the bound): a test that needs something to have happened waits for
    it, not for a time that a loaded machine may not be enough for.

    ``decode_tps``: the double's simulated decode rate (None: answers at once); a slower model
    gives the players' hits time to interrupt its calls. ``endpoint``: a real vLLM's base URL
    to play against instead of the double (``window`` is then the server's); ``tool_choice``:
    sent with every request that offers tools (vLLM's structured outputs make even random
    weights call them).
    """
    result = SoakResult()
    started = time.monotonic()
    rng = random.Random(seed)
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(EmbeddedServer())
        if endpoint is None:
            double = VLLMDouble(SoakBrain(), window=window, decode_tps=decode_tps)
            endpoint = (await stack.enter_async_context(double)).base_url
        s = settings.model_copy(update={
            "endpoint": endpoint, "model": "auto", "mc_host": "127.0.0.1", "mc_port": server.port,
            "endpoint_wait_s": 30.0, "data_dir": data_dir,
            "metrics_address": "off",  # a live Emil (or another soak) may hold the default port
        })
        async with open_session(s, recording=recording) as session:
            result.session = session
            session.llm.default_tool_choice = tool_choice
            with anyio.move_on_after(duration_s):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.agent.run)
                    for i, name in enumerate(PLAYERS):
                        tg.start_soon(_run_player, name, i, server, s, result, random.Random(rng.random()))
                    if until is None:
                        await anyio.sleep(duration_s)
                    else:
                        while not until(list(read_recording(recording).records)):  # noqa: ASYNC110 - the recording is a file
                            await anyio.sleep(1.0)
                    tg.cancel_scope.cancel()
            session.agent.stop()
            if session.memory is not None:
                result.notes = Counter(n.topic for n in session.memory.store.notes())
                result.note_renders = session.memory.block.renders if session.memory.block else 0
    result.seconds = time.monotonic() - started
    errors = [r for r in read_recording(recording).records if isinstance(r, ErrorRecord)]
    result.errors = [f"{r.where}: {r.error_type}: {r.message}" for r in errors]
    result.fatal = [f"{r.where}: {r.error_type}: {r.message}" for r in errors if r.fatal]
    return result


async def drain(bot: Bot) -> None:
    """Read a player's events and let them go: a player acts on a script, and a bot whose
    events nobody reads fills its buffer and logs what it drops, as if Emil were behind."""
    async for _event in bot.events:
        pass


async def _run_player(name: str, index: int, server: EmbeddedServer, s: Settings, result: SoakResult, rng: random.Random) -> None:
    # dana joins late: a join while Emil plays; the others arrive a little apart.
    join_after = 20.0 if name == "dana" else 1.5 * index
    await anyio.sleep(join_after)
    player_settings = BotSettings(
        host="127.0.0.1", port=server.port, username=name, version=s.mc_version,
        reflexes=ReflexSettings(defend=False, flee=False, eat=False, unstuck=False),
        operators=frozenset({name}),  # a person's stand-in: its own operator, so it may hit Emil
    )
    try:
        async with Bot.connect(player_settings) as bot, anyio.create_task_group() as tg:
            tg.start_soon(drain, bot)
            player = _Player(name, bot, server, s.bot_name, result, rng)
            await player.play(getattr(player, name), start_after=2.0)
    except Exception as e:  # one player's bot failing must not end the soak
        result.failed_steps.append(f"{name}: {type(e).__name__}: {e}")
        _log.warning("soak player %s stopped: %s", name, e)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _spread(values: list[float], unit: str = "s") -> str:
    if not values:
        return "-"
    return (f"p50 {_pct(values, 0.5):.2f} {unit}, p95 {_pct(values, 0.95):.2f} {unit}, "
            f"max {max(values):.2f} {unit} (n={len(values)})")


@dataclass
class SoakFigures:
    """What a soak's recording says about the session's answers and turns (tools/soak.py)."""

    turns: int = 0
    failed_turns: Counter[str] = field(default_factory=Counter)
    """Failed turns by the error's type (the turn record's ``failed``, up to its colon)."""
    interrupted_turns: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    """Completions by shape: tool calls, a malformed call, content only, empty."""
    finish_reasons: Counter[str] = field(default_factory=Counter)
    tool_results: Counter[str] = field(default_factory=Counter)
    """``<tool> ok`` / ``failed`` (the arguments, the validation or the world said no: the
    model reads why) / ``not run`` (the turn was interrupted first)."""
    turn_s: list[float] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)
    first_token_s: list[float] = field(default_factory=list)
    over_deadline: list[str] = field(default_factory=list)
    """Turns that took longer than the loop's bounds allow (steps x request_timeout_s +
    actions x action_timeout_s + the backoff waits it recorded)."""
    counted: int = 0
    exact: int = 0
    """Requests whose predicted prompt tokens equal the server's usage.prompt_tokens."""
    worst_difference: int = 0
    trims: int = 0
    overflows: int = 0
    summaries: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    def lines(self) -> list[str]:
        turns_ok = self.turns - sum(self.failed_turns.values()) - self.interrupted_turns
        failed = ", ".join(f"{k} {n}" for k, n in self.failed_turns.most_common()) or "none"
        return [
            f"turns: {self.turns} ({turns_ok} completed, {self.interrupted_turns} interrupted, "
            f"{sum(self.failed_turns.values())} failed: {failed})",
            "answers: " + ", ".join(f"{k} {n}" for k, n in self.answers.most_common())
            + "; finish " + ", ".join(f"{k} {n}" for k, n in self.finish_reasons.most_common()),
            "tool results: " + (", ".join(f"{k} {n}" for k, n in sorted(self.tool_results.items())) or "none"),
            f"turn duration: {_spread(self.turn_s)}",
            f"request: {_spread(self.request_s)}; first token: {_spread(self.first_token_s)}",
            f"turns past their deadline: {len(self.over_deadline)}"
            + (f" (first: {self.over_deadline[0]})" if self.over_deadline else ""),
            f"prompt tokens predicted = server's: {self.exact} of {self.counted} requests"
            + (f" (largest difference {self.worst_difference})" if self.exact < self.counted else ""),
            f"trims {self.trims}, overflows {self.overflows}, summaries "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.summaries.items())) or "none")
            + f", LLM retries {self.retries}",
            "error records by kind: " + (", ".join(f"{k} {n}" for k, n in self.errors.most_common()) or "none"),
        ]


def soak_figures(records: list[Record], settings: Settings) -> SoakFigures:
    """Figures of one session's records (see :class:`SoakFigures`)."""
    f = SoakFigures()
    predicted: dict[tuple[int | None, int, int], int] = {}
    waits: dict[int | None, float] = {}
    for r in records:
        match r:
            case RequestRecord() if r.predicted_tokens is not None:
                predicted[(r.turn, r.step, r.attempt)] = r.predicted_tokens
            case CompletionRecord():
                calls = r.tool_calls
                if any(c.error for c in calls):
                    shape = "malformed tool call"
                elif calls:
                    shape = "tool calls"
                elif (r.content or "").strip():
                    shape = "content only"
                else:
                    shape = "empty"
                f.answers[shape] += 1
                f.finish_reasons[r.finish_reason or "none"] += 1
                if r.total_s is not None:
                    f.request_s.append(r.total_s)
                if r.first_token_s is not None:
                    f.first_token_s.append(r.first_token_s)
                want = predicted.get((r.turn, r.step, r.attempt))
                if want is not None and r.prompt_tokens is not None:
                    f.counted += 1
                    f.exact += want == r.prompt_tokens
                    f.worst_difference = max(f.worst_difference, abs(want - r.prompt_tokens))
            case ToolResultRecord():
                stopped = r.fate in ("not_run", "aborted", "stopping")  # interrupted, not refused
                f.tool_results[f"{r.name} {'ok' if r.ok else 'not run' if stopped else 'failed'}"] += 1
            case TrimRecord():
                f.trims += 1
            case OverflowRecord():
                f.overflows += 1
            case SummaryRecord():
                f.summaries[r.outcome] += 1
            case RetryRecord():
                f.retries += 1
                waits[r.turn] = waits.get(r.turn, 0.0) + r.delay_s
            case ErrorRecord():
                f.errors[f"{r.where}: {r.error_type}"] += 1
            case TurnRecord():
                f.turns += 1
                f.turn_s.append(r.duration_s)
                if r.failed:
                    f.failed_turns[r.failed.split(":", 1)[0]] += 1
                elif r.interrupted:
                    f.interrupted_turns += 1
                bound = (max(r.steps, 1) * settings.request_timeout_s + r.actions * settings.action_timeout_s
                         + waits.get(r.turn, 0.0) + 5.0)
                if r.duration_s > bound:
                    f.over_deadline.append(f"turn {r.turn}: {r.duration_s:.1f} s > {bound:.0f} s")
            case _:
                pass
    return f

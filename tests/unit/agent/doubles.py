"""Doubles for the agent loop's ports (world, context) and a scripted completer.

Each is a double, named so: they stand in for the mineflayer bridge, the context manager and
the recovering LLM client so the loop's own logic can be tested without services.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from emil.backoff import Patience
from emil.context.history import Message
from emil.llm.recovery import complete_with_recovery
from emil.llm.recovery_steps import RecoveryEvent
from emil.llm.types import ChatRequest, Completion, ToolCall, Usage
from emil.world.events import GameEvent
from emil.world.port import TurnContext
from emil.world.tool import Outcome


class WorldDouble:
    """A world double: events pushed by the test, tools recorded, ``go_to`` runs until aborted."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[GameEvent]
        self._recv: MemoryObjectReceiveStream[GameEvent]
        self.send, self._recv = anyio.create_memory_object_stream[GameEvent](100)
        self.calls: list[ToolCall] = []
        self.requesters: list[frozenset[str]] = []
        self.aborts = 0
        self.action_started = anyio.Event()
        self.snapshot_data: dict[str, Any] = {"health": 20.0, "food": 20.0, "position": [0, 64, 0]}

    def close(self) -> None:
        self.send.close()
        self._recv.close()

    async def events(self) -> AsyncIterator[GameEvent]:
        async for ev in self._recv:
            yield ev

    async def snapshot(self) -> Mapping[str, Any]:
        return self.snapshot_data

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        return ()

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        requesters = turn.requesters
        self.calls.append(call)
        self.requesters.append(requesters)
        if call.name not in ("say", "go_to", "follow"):
            return Outcome(False, f"error: unknown tool {call.name!r}")
        self.action_started.set()
        if call.name == "go_to":
            await anyio.sleep(3600)  # a long action: only an abort ends it
        return Outcome(True, f"{call.name} ok")

    async def abort(self) -> None:
        self.aborts += 1


@dataclass(frozen=True)
class _Assembly:
    messages: list[dict[str, Any]]
    predicted_tokens: int
    trims: Sequence[Any] = ()
    shared_prefix_tokens: int = 0
    horizon_s: float | None = None
    message_ids: Sequence[int | None] | None = None


@dataclass
class ContextDouble:
    """A context double: keeps every message, predicts 1 token per 4 chars, never trims.

    ``prepare`` counts its calls; with ``prepare_blocks`` set it waits until cancelled (a
    preparation still running when a turn must start)."""

    system_prompt: str = "You are Emil."
    tools: list[dict[str, Any]] = field(default_factory=list)
    history: list[tuple[Message, dict[str, Any]]] = field(default_factory=list)
    observed: list[tuple[int, int]] = field(default_factory=list)
    limits: list[int | None] = field(default_factory=list)
    prepared: int = 0
    cancelled: int = 0
    prepare_blocks: bool = False
    preparing: anyio.Event = field(default_factory=anyio.Event)
    """Set once ``prepare`` has been called."""

    def add(self, message: Message, *, new_turn: bool = False) -> Message:
        content = message.content
        if message.status:
            content = f"{content}\n\n{message.status}" if content else message.status
        d: dict[str, Any] = {"role": message.role, "content": content}
        if message.tool_calls:
            d["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in message.tool_calls
            ]
        if message.tool_call_id:
            d["tool_call_id"] = message.tool_call_id
        self.history.append((message, d))
        return message

    def assemble(self, limit: int | None = None) -> _Assembly:
        self.limits.append(limit)
        msgs = [{"role": "system", "content": self.system_prompt}, *(d for _, d in self.history)]
        return _Assembly(msgs, sum(len(str(m)) for m in msgs) // 4)

    def observe_usage(self, predicted: int, actual: int) -> None:
        self.observed.append((predicted, actual))

    def count_text(self, text: str) -> int:
        return len(text) // 4 + 1

    async def prepare(self) -> None:
        self.prepared += 1
        self.preparing.set()
        if self.prepare_blocks:
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled += 1


Brain = Callable[[ChatRequest], Completion | Exception]


def tool(name: str, args: str, call_id: str = "c1") -> ToolCall:
    import json

    try:
        parsed = json.loads(args)
    except ValueError:
        parsed = None
    return ToolCall(id=call_id, name=name, raw_arguments=args, arguments=parsed)


def answer(*calls: ToolCall, content: str | None = None, prompt_tokens: int = 100) -> Completion:
    return Completion(content=content, tool_calls=list(calls), usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=5))


def scripted_completer(brain: Brain) -> tuple[Callable[..., Awaitable[Completion]], list[ChatRequest]]:
    """A completer double: assembles once and asks a scripted brain (exceptions are raised)."""
    requests: list[ChatRequest] = []

    async def completer(assemble: Callable[[int | None], ChatRequest], on_event: Callable[[Any], None]) -> Completion:
        request = assemble(None)
        requests.append(request)
        await anyio.lowlevel.checkpoint()
        out = brain(request)
        if isinstance(out, Exception):
            raise out
        return out

    return completer, requests


class BrainLLM:
    """An LLM double over a scripted brain (exceptions are raised), for the real recovery flow."""

    def __init__(self, brain: Brain) -> None:
        self.brain = brain
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        await anyio.lowlevel.checkpoint()
        out = self.brain(request)
        if isinstance(out, Exception):
            raise out
        return out


def recovering_completer(brain: Brain, patience: Patience) -> tuple[Callable[..., Awaitable[Completion]], BrainLLM]:
    """The live completer's policy (complete_with_recovery with a Patience) over a scripted brain."""
    llm = BrainLLM(brain)

    async def completer(assemble: Callable[[int | None], ChatRequest], on_event: Callable[[RecoveryEvent], None]) -> Completion:
        return await complete_with_recovery(llm, assemble, window=100_000, on_event=on_event, patience=patience)

    return completer, llm


def loop_parts(**opts: Any) -> dict[str, Any]:
    """``Agent`` keyword arguments for a test loop: ``opts`` are settings, or the loop's own
    options (:class:`~emil.agent.loop.AgentOptions`); chat starts a turn at once, answers are
    not streamed and old reasoning is not kept unless a test says so."""
    from dataclasses import fields

    from emil.agent.loop import AgentOptions
    from emil.config import Settings

    own = {f.name for f in fields(AgentOptions)}
    settings = Settings(**{"chat_debounce_s": 0.0, "stream": False, "preserve_thinking": False,
                           **{k: v for k, v in opts.items() if k not in own}})
    return {"settings": settings, "options": AgentOptions(**{k: v for k, v in opts.items() if k in own})}

"""A deterministic synthetic session shaped like Emil's live play, for benchmarks, sweeps and tests.

Seeded and pure: the same seed gives the same turns. Each turn opens with an observation
(game events with coordinates, a chat line now and then, a JSON status snapshot), then the
assistant's tool calls (JSON arguments), their JSON results (block names, positions, entities)
and sometimes a spoken reply. Reasoning prose is attached when ``reasoning`` is on. Game time
advances 8-30 s per turn, about 170 turns per hour of play. :func:`synthetic_trace` makes a
session of it that the budget sweep can replay (a whole day of play without recording one).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import takewhile
from typing import Any

from emil.config import Settings
from emil.context.history import History, Message
from emil.offline.content import Piece, message_pieces
from emil.offline.trace import SessionTrace

__all__ = [
    "SYSTEM_PROMPT",
    "SyntheticTurn",
    "emil_tool_specs",
    "grow",
    "history_of",
    "request_steps",
    "synthetic_pieces",
    "synthetic_trace",
    "synthetic_turns",
]

SYSTEM_PROMPT = (
    "You are Emil, a friendly villager who lives on this Minecraft server. You help the "
    "players who talk to you, keep yourself alive, and work on your own projects (a small "
    "farm, a house by the river) when nobody needs you. Speak briefly, in the player's "
    "language. Use tools for every action; one action at a time unless they are independent. "
    "Your reflexes defend you, flee and eat on their own; you set the goals. Never grief, "
    "never take from chests that are not yours, and ask before entering a player's house."
)

_BLOCKS = [
    "oak_log", "birch_log", "stone", "cobblestone", "dirt", "grass_block", "iron_ore",
    "coal_ore", "deepslate", "sand", "gravel", "oak_planks", "crafting_table", "furnace",
    "torch", "water", "wheat", "farmland", "chest", "spruce_leaves",
]  # fmt: skip
_MOBS = ["zombie", "skeleton", "creeper", "spider", "cow", "sheep", "pig", "chicken"]
_PLAYERS = ["Steve", "alex_builds", "Notch_fan", "Mira", "Kofi", "Łukasz", "さくら"]
_CHAT = [
    "hey Emil, can you get me some wood?",
    "Emil where are you?",
    "come to the river, bring torches",
    "thanks!! 😀",
    "do you have iron?",
    "watch out, creeper behind you",
    "peux-tu m'aider à construire un mur ?",
    "let's go mining tonight",
    "Emil, follow me",
    "ありがとう、エミル",
    "can you farm wheat while I'm away?",
]
_THOUGHTS = [
    "The player asked for wood. The nearest oak logs are a few blocks north-east of me, so I "
    "should walk there, collect five logs and come back before it gets dark.",
    "A skeleton is shooting from the ridge. My reflexes will strafe, but I should move behind "
    "the house wall first and only then decide whether to fight or keep working.",
    "My health is fine and I'm not hungry. The farm needs replanting; wheat is ready on the "
    "east side. I'll harvest first, then replant, then store the wheat in my chest.",
    "Steve is far away. Following him through the ravine is risky at night; I'll tell him "
    "I'm coming and place torches on the way.",
    "I don't have iron. I could mine the iron ore I saw at y=12 earlier, but that takes a "
    "while; better to answer honestly and offer to go now.",
]


def emil_tool_specs() -> list[dict[str, Any]]:
    """Tool specs shaped like Emil's (OpenAI function format, JSON Schema parameters)."""

    def tool(
        name: str, description: str, props: dict[str, Any], required: list[str]
    ) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": props, "required": required},
            },
        }

    coord = {"type": "integer", "description": "block coordinate"}
    return [
        tool("go_to", "Walk to a position, pathfinding around obstacles. Returns where Emil ended up.",
             {"x": coord, "y": coord, "z": coord, "range": {"type": "integer", "default": 1}}, ["x", "y", "z"]),
        tool("collect_block", "Find and mine blocks of one type nearby and pick up the drops.",
             {"block": {"type": "string", "description": "block name, e.g. oak_log"},
              "count": {"type": "integer", "minimum": 1, "maximum": 64}}, ["block"]),
        tool("place_block", "Place a block from the inventory at a position.",
             {"block": {"type": "string"}, "x": coord, "y": coord, "z": coord}, ["block", "x", "y", "z"]),
        tool("craft", "Craft an item, using a nearby crafting table when the recipe needs one.",
             {"item": {"type": "string"}, "count": {"type": "integer", "minimum": 1}}, ["item"]),
        tool("attack", "Fight the nearest entity of a type until it dies or flees.",
             {"entity": {"type": "string", "enum": _MOBS}}, ["entity"]),
        tool("say", "Say something in the public chat.",
             {"text": {"type": "string", "maxLength": 256}}, ["text"]),
        tool("follow", "Follow a player at a distance until told to stop.",
             {"player": {"type": "string"}, "distance": {"type": "integer", "default": 3}}, ["player"]),
        tool("look_around", "Describe blocks and entities within a radius.",
             {"radius": {"type": "integer", "minimum": 1, "maximum": 32}}, []),
        tool("inventory", "List the items Emil carries.", {}, []),
        tool("eat", "Eat the best food in the inventory.", {}, []),
        tool("store_items", "Put items into a chest at a position.",
             {"item": {"type": "string"}, "x": coord, "y": coord, "z": coord}, ["item", "x", "y", "z"]),
        tool("stop", "Stop the current action (following, mining, walking).", {}, []),
    ]  # fmt: skip


@dataclass(frozen=True)
class SyntheticTurn:
    """One turn of the synthetic session: its messages and the game time it happened."""

    t: float
    messages: tuple[Message, ...]


def _pos(rng: random.Random) -> list[int]:
    return [rng.randint(-300, 300), rng.randint(-20, 90), rng.randint(-300, 300)]


def _status(rng: random.Random, t: float) -> str:
    status = {
        "status": {
            "t": round(t, 1),
            "pos": _pos(rng),
            "health": rng.randint(8, 20),
            "food": rng.randint(6, 20),
            "time_of_day": rng.choice(["day", "sunset", "night", "dawn"]),
            "holding": rng.choice(["stone_pickaxe", "oak_log", "torch", None]),
            "inventory": {b: rng.randint(1, 64) for b in rng.sample(_BLOCKS, 4)},
        }
    }
    return json.dumps(status, ensure_ascii=False)


def _observation(rng: random.Random, t: float) -> str:
    lines = [f"[t={t:.1f}]"]
    if rng.random() < 0.45:
        lines.append(f"chat {rng.choice(_PLAYERS)}: {rng.choice(_CHAT)}")
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["hostile_nearby", "damage", "item_collected", "action_finished", "time"])
        if kind == "hostile_nearby":
            x, y, z = _pos(rng)
            lines.append(
                f"hostile_nearby {rng.choice(_MOBS)} at ({x}, {y}, {z}) dist {rng.uniform(3, 16):.1f}"
            )
        elif kind == "damage":
            lines.append(
                f"damage {rng.randint(1, 6)} from {rng.choice(_MOBS)}, health {rng.randint(4, 19)}"
            )
        elif kind == "item_collected":
            lines.append(f"item_collected {rng.choice(_BLOCKS)} x{rng.randint(1, 8)}")
        elif kind == "action_finished":
            lines.append(f"action_finished go_to ok in {rng.uniform(0.5, 9):.2f}s")
        else:
            lines.append(f"time {rng.choice(['sunset', 'night', 'dawn'])}")
    return "\n".join(lines)


def _call(rng: random.Random, index: int, t: float) -> dict[str, str]:
    name = rng.choice(
        [
            "go_to",
            "collect_block",
            "place_block",
            "craft",
            "attack",
            "say",
            "look_around",
            "inventory",
            "follow",
        ]
    )
    x, y, z = _pos(rng)
    args: dict[str, Any]
    if name == "go_to":
        args = {"x": x, "y": y, "z": z, "range": rng.randint(1, 3)}
    elif name in ("collect_block",):
        args = {"block": rng.choice(_BLOCKS), "count": rng.randint(1, 16)}
    elif name == "place_block":
        args = {"block": rng.choice(_BLOCKS), "x": x, "y": y, "z": z}
    elif name == "craft":
        args = {
            "item": rng.choice(["torch", "oak_planks", "stick", "stone_pickaxe", "furnace"]),
            "count": rng.randint(1, 8),
        }
    elif name == "attack":
        args = {"entity": rng.choice(_MOBS)}
    elif name == "say":
        args = {
            "text": rng.choice(
                [
                    "On my way!",
                    "Got it, 5 logs coming.",
                    "Je t'aide tout de suite.",
                    "Careful, it's night.",
                ]
            )
        }
    elif name == "follow":
        args = {"player": rng.choice(_PLAYERS), "distance": 3}
    elif name == "look_around":
        args = {"radius": rng.choice([8, 16, 24])}
    else:
        args = {}
    return {"id": f"call_{int(t * 10)}_{index}", "name": name, "arguments": json.dumps(args, ensure_ascii=False)}  # fmt: skip


def _result(rng: random.Random, call: dict[str, str]) -> str:
    name = call["name"]
    data: dict[str, Any]
    if name == "look_around":
        data = {
            "ok": True,
            "blocks": [{"name": rng.choice(_BLOCKS), "pos": _pos(rng), "count": rng.randint(1, 30)} for _ in range(rng.randint(8, 30))],
            "entities": [{"type": rng.choice(_MOBS + _PLAYERS), "pos": [round(rng.uniform(-300, 300), 2), round(rng.uniform(-20, 90), 2), round(rng.uniform(-300, 300), 2)], "health": rng.randint(1, 20)} for _ in range(rng.randint(0, 6))],
        }  # fmt: skip
    elif name == "inventory":
        data = {"ok": True, "items": [{"name": b, "count": rng.randint(1, 64), "slot": i} for i, b in enumerate(rng.sample(_BLOCKS, rng.randint(4, 14)))]}  # fmt: skip
    elif name == "collect_block":
        data = {"ok": rng.random() > 0.2, "collected": rng.randint(0, 16), "mined_at": [_pos(rng) for _ in range(rng.randint(1, 6))], "elapsed_ms": rng.randint(800, 30000)}  # fmt: skip
    elif name == "go_to":
        data = {"ok": rng.random() > 0.15, "arrived": _pos(rng), "path_len": rng.randint(3, 90), "elapsed_ms": rng.randint(300, 20000)}  # fmt: skip
    else:
        data = {
            "ok": rng.random() > 0.1,
            "detail": f"{name} done",
            "elapsed_ms": rng.randint(50, 8000),
        }
    if not data["ok"]:
        data["error"] = rng.choice(["path blocked by water", "no such block within 32 blocks", "target out of reach", "interrupted by reflex: flee"])  # fmt: skip
    return json.dumps(data, ensure_ascii=False)


def synthetic_turns(
    seed: int = 0, *, start_time: float = 1_780_000_000.0, reasoning: bool = True
) -> Iterator[SyntheticTurn]:
    """An endless, deterministic stream of Emil-like turns."""
    rng = random.Random(seed)
    t = start_time
    while True:
        t += rng.uniform(8.0, 30.0)
        opening = Message.observation(_observation(rng, t), event_time=t, status=_status(rng, t))
        messages: list[Message] = [opening]
        for step in range(rng.choice([1, 1, 1, 2, 2, 3])):
            calls = [_call(rng, step * 4 + i, t) for i in range(rng.choice([1, 1, 1, 2]))]
            thought = rng.choice(_THOUGHTS) if reasoning and rng.random() < 0.8 else None
            messages.append(
                Message.assistant(None, tool_calls=calls, reasoning=thought, event_time=t)
            )
            for call in calls:
                messages.append(Message.tool_result(call["id"], _result(rng, call), event_time=t))
        if rng.random() < 0.3:
            messages.append(Message.assistant(rng.choice(["Done!", "Here you go, Steve.", "Je reviens."]), event_time=t))  # fmt: skip
        yield SyntheticTurn(t, tuple(messages))


def history_of(turns: list[SyntheticTurn]) -> History:
    """A History holding these turns."""
    return History(tuple(turn.messages for turn in turns))


def request_steps(turn: SyntheticTurn) -> Iterator[tuple[bool, list[Message]]]:
    """How the agent loop grows history within one turn, request by request: the opening starts
    the turn (``True``); each assistant message with its tool results is appended (``False``)
    before the next request."""
    yield True, [turn.messages[0]]
    group: list[Message] = []
    for message in turn.messages[1:]:
        if message.role == "assistant" and group:
            yield False, group
            group = []
        group.append(message)
    if group:
        yield False, group


def grow(history: History, new_turn: bool, messages: list[Message]) -> History:
    """Apply one :func:`request_steps` step to a history."""
    if new_turn:
        history = history.start_turn(messages[0])
        messages = messages[1:]
    return history.extend(messages)


_START = 1_780_000_000.0


_PRESERVE_THINKING: bool = Settings.model_fields["preserve_thinking"].default


def synthetic_trace(
    hours: float,
    *,
    seed: int = 7,
    reasoning: bool = True,
    preserve_thinking: bool = _PRESERVE_THINKING,
    model_family: str = "qwen3.6",
) -> SessionTrace:
    """``hours`` of seeded Emil-like play (about 170 turns an hour), with Emil's tool specs.

    Assistant messages carry reasoning (a thinking model), and the session runs with Emil's
    default ``preserve_thinking`` unless told otherwise, counted as ``model_family``.
    """
    if hours <= 0:
        raise ValueError(f"--synthetic-hours must be positive, got {hours}")
    end = _START + hours * 3600.0
    turns = takewhile(lambda t: t.t <= end, synthetic_turns(seed, start_time=_START, reasoning=reasoning))
    return SessionTrace.from_turns(
        (t.messages for t in turns),
        name=f"synthetic {hours:g} h (seed {seed})",
        system_prompt=SYSTEM_PROMPT,
        tools=emil_tool_specs(),
        preserve_thinking=preserve_thinking,
        model_family=model_family,
    )


def synthetic_pieces(hours: float, *, seed: int = 7) -> Iterator[Piece]:
    """The synthetic session's text by content category (for chars_per_token)."""
    trace = synthetic_trace(hours, seed=seed)
    messages = (s.message for s in trace.steps if s.message is not None)
    return message_pieces(messages, system_prompt=trace.system_prompt, tools=trace.tools)

"""Tool models, derived specs, validation, chat safety and dispatch (with a bot double)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from emil.llm.types import ToolCall
from emil.world import actions
from emil.world.actions import (
    CHAT_LIMIT,
    TOOLS,
    ActionPolicy,
    dispatch,
    split_chat,
    tool_specs,
    validate_tool_call,
)
from emil.world.bridge import ActionResult, Snapshot


class BotDouble:
    """A double of emil.world.bridge.Bot: records act() calls, returns scripted results."""

    def __init__(self, results: dict[str, ActionResult] | None = None, snap: Snapshot | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any], float]] = []
        self.jobs: list[bool] = []
        self.results = results or {}
        self.snap = snap or Snapshot(connected=True, health=20, food=18, position={"x": 1, "y": 5, "z": 2},
                                     inventory={"oak_log": 3}, players=[{"name": "Alex", "distance": 3.0}])

    async def act(self, name: str, args: Mapping[str, Any] | None = None, timeout: float = 60.0, *, job: bool = False) -> ActionResult:  # noqa: ASYNC109
        self.calls.append((name, dict(args or {}), timeout))
        self.jobs.append(job)
        return self.results.get(name, ActionResult(ok=True, result={}))

    async def snapshot(self) -> Snapshot:
        return self.snap


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, raw_arguments=json.dumps(arguments), arguments=arguments)


def test_required_tools_are_offered_and_craft_is_not() -> None:
    names = {s["function"]["name"] for s in tool_specs()}
    required = {"say", "whisper", "go_to", "follow", "stop", "look_at", "collect", "dig", "place",
                "equip", "eat", "give", "attack", "flee", "inventory", "nearby", "status"}
    assert required <= names
    assert "craft" not in names  # flying-squid computes no crafting results: not offered


def test_specs_are_derived_from_the_models() -> None:
    for spec in tool_specs():
        fn = spec["function"]
        cls = TOOLS[fn["name"]]
        assert fn["description"] == (cls.__doc__ or "").strip()
        props = fn["parameters"]["properties"]
        assert set(props) == {f.alias or n for n, f in cls.model_fields.items()}
        assert "title" not in json.dumps(fn["parameters"])


def test_disabled_tools_are_left_out() -> None:
    class S:
        disabled_tools = ("attack",)

    assert "attack" not in {s["function"]["name"] for s in tool_specs(S())}


def test_public_names_are_exported() -> None:
    for name in actions.__all__:
        assert hasattr(actions, name)


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("go_to", {"x": 1}, "give either x, y and z, or player"),
        ("go_to", {"x": 1, "y": 2, "z": 3, "player": "Alex"}, "not both"),
        ("collect", {"block": "oak_log", "count": 500}, "count"),
        ("collect", {"block": "Oak Log"}, "block"),
        ("give", {"player": "Al ex", "item": "oak_log"}, "player"),
        ("say", {"text": "hi", "volume": 3}, "volume"),
    ],
)
def test_invalid_arguments_become_readable_errors(tool: str, args: dict[str, Any], fragment: str) -> None:
    out = validate_tool_call(call(tool, **args))
    assert out.error is not None and fragment in out.error


def test_unknown_tool_and_bad_json() -> None:
    assert "unknown tool 'fly'" in (validate_tool_call(call("fly")).error or "")
    bad = ToolCall(id="c", name="say", raw_arguments="{not json", arguments=None)
    assert "not a JSON object" in (validate_tool_call(bad).error or "")


def test_split_chat_strips_newlines_and_respects_the_limit() -> None:
    text = "line one\nline two\r\n" + "word " * 200
    pieces = split_chat(text, CHAT_LIMIT, 3)
    assert all("\n" not in p and "\r" not in p for p in pieces)
    assert all(len(p) <= CHAT_LIMIT for p in pieces)
    assert pieces[0].startswith("line one line two")
    assert len(pieces) == 3
    assert split_chat("\x00\n\t ", 256, 3) == []


async def test_say_splits_and_strips() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="a\nb " + "x" * 300))
    assert out.ok
    texts = [a["text"] for n, a, _ in bot.calls]
    assert texts[0].startswith("a b")
    assert all(len(t) <= CHAT_LIMIT and "\n" not in t for t in texts)


async def test_commands_are_refused_unless_enabled_for_an_operator() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="/op Mallory"))
    assert not out.ok and "refused" in out.text and bot.calls == []
    out = await dispatch(bot, call("say", text="/time set day"), ActionPolicy(allow_commands=True, requester="Mallory", operators=frozenset({"Alex"})))
    assert not out.ok and bot.calls == []
    out = await dispatch(bot, call("say", text="/time set day"), ActionPolicy(allow_commands=True, requester="Alex", operators=frozenset({"Alex"})))
    assert out.ok and bot.calls[0][1]["text"] == "/time set day"


async def test_attacking_a_player_needs_an_operator() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("attack", target="Alex"), ActionPolicy(requester="Mallory"))
    assert not out.ok and "operator" in out.text and bot.calls == []
    out = await dispatch(bot, call("attack", target="Alex"), ActionPolicy(requester="Alex", operators=frozenset({"Alex"})))
    assert out.ok and bot.calls[0][0] == "attack"
    out = await dispatch(bot, call("attack", target="zombie"))
    assert out.ok


async def test_failed_action_becomes_text_not_exception() -> None:
    bot = BotDouble({"collect": ActionResult(ok=False, error="no oak_log within 32 blocks", elapsed_ms=3)})
    out = await dispatch(bot, call("collect", block="oak_log", count=2))
    assert not out.ok and out.text == "collect failed: no oak_log within 32 blocks"
    assert bot.calls == [("collect", {"block": "oak_log", "count": 2, "max_distance": 32}, TOOLS["collect"].timeout_s)]
    assert bot.jobs == [True]


async def test_validation_error_does_not_reach_the_bot() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("dig", x="here"))
    assert not out.ok and out.text.startswith("error: invalid arguments for dig") and bot.calls == []


async def test_queries_answer_from_the_snapshot() -> None:
    bot = BotDouble()
    inv = await dispatch(bot, call("inventory"))
    assert inv.ok and inv.text == "inventory: 3 oak_log"
    near = await dispatch(bot, call("nearby"))
    assert "Alex 3.0m" in near.text
    status = await dispatch(bot, call("status"))
    assert "health 20.0/20" in status.text and bot.calls == []
    offline = await dispatch(BotDouble(snap=Snapshot(connected=False)), call("status"))
    assert not offline.ok and "not connected" in offline.text

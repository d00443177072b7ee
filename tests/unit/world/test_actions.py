"""Tool models, derived specs, validation, chat safety and dispatch (with a bot double)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from emil.config import Settings
from emil.llm.types import ToolCall
from emil.trust.authority import Authority, Line
from emil.trust.ledger import SELF, Ledger
from emil.world import actions
from emil.world.actions import TOOLS, dispatch, tool_specs, validate_tool_call
from emil.world.body import Give
from emil.world.chat import CHAT_LIMIT, reads_as_command, split_chat
from emil.world.guard import Guard
from emil.world.making import Build
from emil.world.tool import ActionPolicy
from emil.world.wire import ActionResult, Snapshot
from tests.unit.world.tricks import NEUTRALISED, TRICKS, runs_a_command


class BotDouble:
    """A double of emil.world.bridge.Bot: records act() calls, returns scripted results."""

    def __init__(self, results: dict[str, ActionResult] | None = None, snap: Snapshot | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any], float]] = []
        self.jobs: list[bool] = []
        self.results = results or {}
        self.snap = snap or Snapshot(connected=True, health=20, food=18, position={"x": 1, "y": 5, "z": 2},
                                     inventory={"oak_log": 3}, players=[{"name": "Alex", "distance": 3.0}])

    async def act(self, name: str, args: Mapping[str, Any] | None = None, timeout: float = 60.0, *, job: bool = False) -> ActionResult:  # noqa: ASYNC109
        if name in GUARD_CALLS and name not in self.results:  # the guard's questions, answered as the bot would
            return GUARD_CALLS[name](self, dict(args or {}))
        self.calls.append((name, dict(args or {}), timeout))
        self.jobs.append(job)
        return self.results.get(name, ActionResult(ok=True, result={}))

    async def snapshot(self) -> Snapshot:
        return self.snap


MOBS = frozenset({"zombie", "skeleton", "spider", "cow", "wolf", "villager"})


def _classify(bot: BotDouble, args: dict[str, Any]) -> ActionResult:
    target = str(args["target"])
    for p in bot.snap.players:
        if p["name"].lower() == target.lower():
            return ActionResult(ok=True, result={"kind": "player", "name": p["name"]})
    if target.lower() in MOBS:
        return ActionResult(ok=True, result={"kind": "mob", "name": target.lower()})
    return ActionResult(ok=True, result={"kind": "generic" if target.lower() == "player" else "unknown", "name": target})


def _find_chest(bot: BotDouble, args: dict[str, Any]) -> ActionResult:
    at = {k: args[k] for k in ("x", "y", "z")} if "x" in args else {"x": 4, "y": 5, "z": 0}
    return ActionResult(ok=True, result={"chest": at, "blocks": [at], "dimension": "overworld"})


GUARD_CALLS = {
    "classify_target": _classify,
    "find_chest": _find_chest,
    "ask_confirm": lambda bot, args: ActionResult(ok=True, result={"asked": args["operators"], "code": args["code"]}),
}


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, raw_arguments=json.dumps(arguments), arguments=arguments)


def test_required_tools_are_offered() -> None:
    names = {s["function"]["name"] for s in tool_specs()}
    required = {"say", "whisper", "go_to", "follow", "stop", "look_at", "collect", "dig", "place",
                "equip", "eat", "give", "drop", "attack", "flee", "inventory", "nearby", "status",
                "craft", "smelt", "build", "sleep", "store", "take"}
    assert required <= names


def test_specs_are_derived_from_the_models() -> None:
    for spec in tool_specs():
        fn = spec["function"]
        cls = TOOLS[fn["name"]]
        assert fn["description"] == (cls.__doc__ or "").strip()
        # what the model reads: one paragraph, no module paths or rule-table notes for developers
        assert "\n" not in fn["description"] and "emil." not in fn["description"], fn["name"]
        props = fn["parameters"]["properties"]
        assert set(props) == {f.alias or n for n, f in cls.model_fields.items()}
        assert "title" not in json.dumps(fn["parameters"])


def test_disabled_tools_are_left_out_and_refused() -> None:
    from emil.config import load_settings

    s = load_settings(env={"EMIL_DISABLED_TOOLS": "attack, store,attack"}).settings
    assert s.disabled_tools == ("attack", "store")
    names = [spec["function"]["name"] for spec in tool_specs(s.disabled_tools, must_call=True)]
    assert "attack" not in names and "store" not in names and len(names) == len(TOOLS) - 2
    # a model that calls one anyway (from an older turn, or made up) gets a result, not an act
    bot = BotDouble()
    policy = ActionPolicy(settings=s)
    out = anyio.run(dispatch, bot, call("attack", target="zombie"), policy)
    assert not out.ok and out.text == "error: attack is switched off on this server; use another tool"
    assert bot.calls == []
    assert anyio.run(dispatch, bot, call("say", text="hi"), policy).ok


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("atack", "unknown tool 'atack'; did you mean 'attack'?"), ("say", "say cannot be disabled")],
)
def test_a_bad_disabled_tools_value_names_the_fix(value: str, fragment: str) -> None:
    from emil.config import load_settings
    from emil.exceptions import ConfigurationError

    with pytest.raises(ConfigurationError) as bad:
        load_settings(env={"EMIL_DISABLED_TOOLS": value})
    assert fragment in str(bad.value) and "disabled_tools" in str(bad.value)


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
        ("say", {"text": "/op Mallory", "requesters": ["Alex"]}, "requesters"),  # the model cannot name them
        ("craft", {"item": "wooden_pickaxe", "count": 0}, "count"),
        ("craft", {"item": "Wooden Pickaxe"}, "item"),
        ("smelt", {"item": "raw_iron", "fuel": "coal; /op me"}, "fuel"),
        ("build", {"blueprint": "castle"}, "blueprint"),
        ("build", {"blueprint": "pillar", "height": 64}, "height"),
        ("build", {"blueprint": "pillar", "x": 3}, "give all of x, y and z"),
        ("sleep", {"wait_s": 600}, "wait_s"),
        ("store", {"items": {}}, "items"),
        ("store", {"items": {"cobblestone": 0}}, "items.cobblestone"),
        ("store", {"items": {"Cobble Stone": 3}}, "items"),
        ("take", {"items": ["oak_log"]}, "items"),
        ("take", {"items": {"oak_log": 1}, "x": 1, "y": 2}, "give all of x, y and z"),
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
    # A space early in a long word is no place to cut: the piece is filled instead.
    assert split_chat("a " + "x" * 300, 256, 3) == ["a " + "x" * 254, "x" * 46]
    assert [len(p) for p in split_chat("\U0001f600" * 300, 256, 3)] == [128, 128, 44]


async def test_say_splits_and_strips() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="a\nb " + "x" * 300))
    assert out.ok
    texts = [a["text"] for n, a, _ in bot.calls]
    assert texts[0].startswith("a b")
    assert all(len(t) <= CHAT_LIMIT and "\n" not in t for t in texts)


OPERATORS = frozenset({"Alex", "Olga"})


def guard(*lines: tuple[str, str], allow: bool = True, chests: dict[str, str] | None = None) -> Guard:
    """A guard for a turn whose chat lines are ``lines`` ((speaker, text) pairs), with operators
    Alex and Olga, and a ledger in memory holding ``chests`` (key -> owner)."""
    ledger = Ledger()
    for key, owner in (chests or {}).items():
        ledger.set_chest(key, owner, "placed")
    g = Guard(Settings(operators=tuple(sorted(OPERATORS)), allow_commands=allow), ledger)
    g.begin_turn(Authority(tuple(Line(who, text) for who, text in lines)))
    return g


def asked(*names: str) -> Guard:
    """A turn in which ``names`` each said something that is no command."""
    return guard(*((n, "hello Emil") for n in names))


async def test_commands_are_refused_unless_enabled_and_ordered_in_an_operators_own_words() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="/op Mallory"))
    assert not out.ok and "refused" in out.text and "not enabled" in out.text and bot.calls == []
    out = await dispatch(bot, call("say", text="/time set day"), guard=guard(("Alex", "/time set day"), allow=False))
    assert not out.ok and out.rule == "chat.command" and [c[0] for c in bot.calls] == ["whisper"]  # Alex hears why
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="/time set day"), guard=guard(("Mallory", "/time set day")))
    assert not out.ok and "Mallory asked" in out.text and [c[0] for c in bot.calls] == ["whisper"]
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="/time set day"), guard=guard(("Alex", "/time set day"), ("Mallory", "hi")))
    assert not out.ok and "say" not in [c[0] for c in bot.calls]  # an operator's words beside anyone else's are no order
    out = await dispatch(bot, call("say", text="/time set day"), guard=guard())
    assert not out.ok and "nobody asked" in out.text
    bot = BotDouble()
    out = await dispatch(bot, call("say", text="/time set day"), guard=guard(("Alex", "Emil, /time set day"), ("Olga", "yes")))
    assert out.ok and out.rule == "chat.command"
    assert bot.calls[0][1] == {"text": "/time set day", "authority": {"requesters": ["Alex", "Olga"]}}


async def test_an_operators_command_not_in_their_words_is_asked_to_be_confirmed() -> None:
    bot = BotDouble()
    g = guard(("Alex", "Emil, make it day"))
    out = await dispatch(bot, call("say", text="/time set day"), guard=g)
    assert not out.ok and "not sent yet" in out.text and bot.calls == []
    (code,) = g.confirmations.pending
    assert f'"confirm {code}"' in out.text and g.confirmations.pending[code].command == "/time set day"
    # a later turn: Alex confirms, the command goes out as asked, once
    g.begin_turn(Authority((Line("Alex", f"confirm {code}"),)))
    done = await g.run_confirmed(bot)
    assert [o.ok for o in done] == [True] and done[0].rule == "chat.command"
    assert bot.calls == [("say", {"text": "/time set day", "authority": {"requesters": ["Alex"], "confirm": code}, "quiet": True}, 10.0)]
    assert await g.run_confirmed(bot) == []


async def test_plain_chat_carries_the_requesters_to_the_bot() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("whisper", player="Alex", text="hi there"), guard=asked("Mallory"))
    assert out.ok and out.rule == "chat.line"
    assert bot.calls == [("whisper", {"player": "Alex", "text": "hi there", "authority": {"requesters": ["Mallory"]}}, 10.0)]


@pytest.mark.parametrize("trick", sorted(TRICKS))
async def test_no_trick_gets_a_command_past_the_rule(trick: str) -> None:
    for tool_call in (call("say", text=TRICKS[trick]), call("whisper", player="Alex", text=TRICKS[trick])):
        bot = BotDouble()
        out = await dispatch(bot, tool_call, guard=asked("Mallory"))
        sent = [args["text"] for name, args, _ in bot.calls if args.get("player") != "Mallory"]
        # Either refused before anything went out, or what went out cannot run a command.
        assert (not out.ok and out.text.startswith("refused") and sent == []) or (
            out.ok and not any(runs_a_command(piece) or reads_as_command(piece) for piece in sent)
        ), (trick, out, sent)
        # an operator's turn whose words hold exactly what is sent: sent
        pieces = split_chat(TRICKS[trick], CHAT_LIMIT, 3)
        own = guard(*(("Alex", p) for p in pieces))
        assert (await dispatch(BotDouble(), tool_call, guard=own)).ok
    said = await dispatch(BotDouble(), call("say", text=TRICKS[trick]), guard=asked("Mallory"))
    assert said.ok == (trick in NEUTRALISED), said.text


async def test_attacking_a_player_needs_an_operator_order() -> None:
    bot = BotDouble()
    out = await dispatch(bot, call("attack", target="Alex"), guard=asked("Mallory"))
    assert not out.ok and "operator" in out.text and out.rule == "attack.player" and "attack" not in [c[0] for c in bot.calls]
    out = await dispatch(bot, call("attack", target="alex"), guard=asked("Alex", "Mallory"))
    assert not out.ok and "attack" not in [c[0] for c in bot.calls]
    out = await dispatch(bot, call("attack", target="ALEX"), guard=asked("Alex"))
    assert out.ok and bot.calls[-1][0] == "attack" and bot.calls[-1][1]["target"] == "Alex"
    assert bot.calls[-1][1]["authority"] == {"requesters": ["Alex"], "attack": "Alex"}
    out = await dispatch(bot, call("attack", target="zombie"))
    assert out.ok and out.rule == "attack.mob"


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


@pytest.mark.parametrize(
    ("tool", "args", "result", "reads"),
    [
        ("craft", {"item": "stick"}, {"crafted": "stick", "count": 4, "asked": 1, "used": {"oak_planks": 2}, "table": None},
         "crafted 4 stick (asked for 1; the recipe makes several at a time) from 2 oak_planks"),
        ("craft", {"item": "wooden_pickaxe"},
         {"crafted": "wooden_pickaxe", "count": 1, "asked": 1, "used": {"oak_planks": 2, "birch_planks": 1, "stick": 2},
          "table": {"x": 3, "y": 5, "z": 0, "placed": True}},
         "crafted 1 wooden_pickaxe from 2 oak_planks, 1 birch_planks, 2 stick at the crafting table at (3, 5, 0)"
         " (placed it there from the inventory)"),
        ("smelt", {"item": "raw_iron", "count": 8},
         {"smelted": "raw_iron", "output": "iron_ingot", "count": 5, "still_cooking": 3, "eta_s": 30,
          "fuel": {"name": "coal", "count": 1}, "took_out": {}, "furnace": {"x": 0, "y": 5, "z": 3, "placed": False}},
         "got 5 iron_ingot from raw_iron (burned 1 coal) in the furnace at (0, 5, 3); 3 raw_iron still cooking there,"
         " about 30 s more: smelt again there to collect"),
        ("build", {"blueprint": "shelter"}, {"built": "shelter", "block": "dirt", "placed": 9, "already": 1,
                                             "at": {"x": 1, "y": 5, "z": 1}},
         "built a shelter of dirt at (1, 5, 1): placed 9 (1 already there)"),
        ("sleep", {}, {"bed": {"x": 2, "y": 5, "z": 2, "placed": False}, "woke": False, "players_sleeping": "1 of 2"},
         "lying in the bed at (2, 5, 2); still night (1 of 2 players asleep): it passes when every player sleeps."),
        ("sleep", {}, {"bed": None, "woke": True, "time": 0, "night": False},
         "slept in bed and woke up in the morning (time 0)"),
        # woken by night (hurt, the bed dug): the clock Emil saw says so, not a morning he did not see
        ("sleep", {}, {"bed": None, "woke": True, "time": 14120, "night": True},
         "slept in bed and woke up while it was still night (time 14120): the night did not pass"),
        ("sleep", {}, {"bed": None, "woke": True, "time": 14120},
         "slept in bed and woke up while it was still night (time 14120)"),
        # what the server's chest shows moved, and what the clicks meant to move but did not
        ("store", {"items": {"dirt": 10}}, {"stored": {"dirt": 7}, "unmoved": {"dirt": 3}, "chest": {"x": 4, "y": 5, "z": 0}},
         "stored 7 dirt in the chest at (4, 5, 0); the chest did not take: 3 dirt"),
        ("take", {"items": {"dirt": 10}}, {"took": {"dirt": 4}, "unmoved": {"dirt": 6}, "chest": {"x": 4, "y": 5, "z": 0}},
         "took 4 dirt from the chest at (4, 5, 0); the chest did not give: 6 dirt"),
        # a death is the server's word; an entity that left the view is not called dead
        ("attack", {"target": "zombie"}, {"target": "zombie", "hits": 3, "defeated": True, "gone": False, "fought_s": 2.5},
         "fought zombie for 2.5 s, 3 hit(s); it is dead"),
        ("attack", {"target": "zombie"}, {"target": "zombie", "hits": 1, "defeated": False, "gone": True, "fought_s": 4},
         "fought zombie for 4 s, 1 hit(s); it went out of sight (not seen to die)"),
        ("attack", {"target": "zombie"}, {"target": "zombie", "hits": 0, "defeated": False, "gone": False, "fought_s": 10},
         "fought zombie for 10 s, 0 hit(s); it is still alive"),
        ("store", {"items": {"dirt": 64, "diamond": 1}},
         {"stored": {"dirt": 10}, "did_not_fit": {"dirt": 54}, "not_in_inventory": {"diamond": 1},
          "chest": {"x": 4, "y": 5, "z": 0}},
         "stored 10 dirt in the chest at (4, 5, 0); did not fit (the chest is full): 54 dirt; you did not have: 1 diamond"),
        ("take", {"items": {"oak_log": 8}}, {"took": {"oak_log": 5}, "not_in_chest": {"oak_log": 3}, "no_room": {},
                                             "chest": {"x": 4, "y": 5, "z": 0}},
         "took 5 oak_log from the chest at (4, 5, 0); not in the chest: 3 oak_log"),
    ],
)
async def test_new_tools_say_what_happened(tool: str, args: dict[str, Any], result: dict[str, Any], reads: str) -> None:
    bot = BotDouble({tool: ActionResult(ok=True, result=result)})
    out = await dispatch(bot, call(tool, **args), guard=guard(chests={"4,5,0": SELF}))
    assert out.ok and out.text.startswith(reads), out.text
    assert bot.jobs == [True]  # each walks or waits: a long job that stop and abort reach


def test_build_blueprints_are_the_js_blueprints() -> None:
    import subprocess
    import typing

    from emil.world.setup import JS_SOURCE_DIR, node_bin

    script = "console.log(JSON.stringify(Object.keys(require(process.argv[1]).BLUEPRINTS)))"
    out = subprocess.run([str(node_bin()), "-e", script, str(JS_SOURCE_DIR / "emil_blueprints.js")],
                         capture_output=True, text=True, check=True, timeout=30)
    literal = Build.model_fields["blueprint"].annotation
    assert set(typing.get_args(literal)) == set(json.loads(out.stdout))


def test_the_specs_keep_their_order() -> None:
    """The tool modules register in the order emil.world.actions imports them: the order of the
    specs in every prompt (a change moves every recorded prompt's bytes)."""
    assert [s["function"]["name"] for s in tool_specs()] == [
        "say", "whisper", "go_to", "follow", "stop", "look_at", "collect", "dig", "place", "equip",
        "eat", "give", "drop", "attack", "flee", "craft", "smelt", "build", "sleep", "store", "take",
        "claim_chest", "inventory", "nearby", "status", "recall", "remember",
    ]


def test_the_tool_that_passes_a_turn_is_offered_only_when_every_answer_must_call_one() -> None:
    passing = {name for name, cls in TOOLS.items() if cls.passes_turn}
    assert passing == {"wait"}
    auto = {spec["function"]["name"] for spec in tool_specs()}
    required = {spec["function"]["name"] for spec in tool_specs(must_call=True)}
    assert required - auto == passing and not auto & passing
    assert [spec["function"]["name"] for spec in tool_specs(must_call=True)][-1] == "wait"  # appended


async def test_wait_does_nothing_in_the_world_and_passes_the_guard() -> None:
    bot = BotDouble()
    out = await dispatch(bot, validate_tool_call(ToolCall(id="1", name="wait", raw_arguments="{}", arguments={})))
    assert out.ok and out.rule == "any" and bot.calls == []
    bad = validate_tool_call(ToolCall(id="2", name="wait", raw_arguments='{"for": 3}', arguments={"for": 3}))
    assert bad.error is not None and "invalid arguments for wait" in bad.error


def test_specs_are_strict_only_when_every_answer_must_call_a_tool() -> None:
    assert all(spec["function"].get("strict") is True for spec in tool_specs(must_call=True))
    assert not any("strict" in spec["function"] for spec in tool_specs())  # the default prompt as before


_REQUIRED_ARGS: dict[str, dict[str, Any]] = {
    "go_to": {}, "look_at": {}, "build": {"blueprint": "pillar"}, "store": {"items": {"dirt": 1}},
    "take": {"items": {"dirt": 1}}, "claim_chest": {"owner": "Alex"},
}
"""Valid values for each shaped tool's other required fields."""


def _strict(schema: Any) -> Any:
    """The schema as xgrammar's strict mode reads it: an object lists every property it allows."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out
    return [_strict(v) for v in schema] if isinstance(schema, list) else schema


def test_every_shaped_tool_is_in_the_table() -> None:
    assert {name for name, cls in TOOLS.items() if cls.shapes} == set(_REQUIRED_ARGS)


@pytest.mark.parametrize("name", sorted(_REQUIRED_ARGS))
def test_a_strict_spec_allows_exactly_the_shapes_the_tool_accepts(name: str) -> None:
    """Every combination of the shaped fields: the strict spec's anyOf (what vLLM's grammar
    holds the model to under "required") lets a call through exactly when the tool class would
    accept it, so no call the grammar allows is refused by validation, and the reverse."""
    import itertools

    import jsonschema

    cls = TOOLS[name]
    schema = _strict(cls.spec(strict=True)["function"]["parameters"])
    shaped = sorted({n for shape in cls.shapes for n in shape})
    value = {"x": 1, "y": 64, "z": -3, "player": "Steve"}
    tried = 0
    for k in range(len(shaped) + 1):
        for given in itertools.combinations(shaped, k):
            args = {**_REQUIRED_ARGS[name], **{n: value[n] for n in given}}
            grammar_allows = jsonschema.Draft202012Validator(schema).is_valid(args)
            tool_accepts = validate_tool_call(ToolCall(id="1", name=name, raw_arguments=json.dumps(args), arguments=args)).error is None
            assert grammar_allows == tool_accepts, (name, args, grammar_allows)
            tried += 1
    assert tried == 2 ** len(shaped)
    # The plain spec (every other tool choice) stays one flat object: the default prompt's tokens.
    plain = cls.spec()["function"]["parameters"]
    assert "anyOf" not in plain and set(shaped) <= set(plain["properties"])


def test_shapes_say_what_to_give() -> None:
    for args, fragment in [
        ({"x": 1, "player": "Alex"}, "give either x, y and z, or player, not both"),
        ({"y": 1}, "give either x, y and z, or player"),
        ({}, "give either x, y and z, or player"),
    ]:
        out = validate_tool_call(ToolCall(id="1", name="look_at", raw_arguments=json.dumps(args), arguments=args))
        assert out.error is not None and fragment in out.error, (args, out.error)
    partial = {"blueprint": "pillar", "z": 4}
    out = validate_tool_call(ToolCall(id="2", name="build", raw_arguments=json.dumps(partial), arguments=partial))
    assert out.error is not None and "give all of x, y and z, or none of them" in out.error
    part = validate_tool_call(ToolCall(id="3", name="look_at", raw_arguments='{"y": 1}', arguments={"y": 1}))
    assert part.error is not None and "not both" not in part.error  # a part of one shape is not two


def test_a_strict_spec_keeps_every_name_pattern_the_plain_one_leaves_out() -> None:
    """Under "required" the grammar holds names to their patterns (a small model sent
    attack(target=" zombies")); the plain spec saves those tokens, the tool still checks them."""
    import jsonschema

    attack = TOOLS["attack"]
    strict = attack.spec(strict=True)["function"]["parameters"]
    assert not jsonschema.Draft202012Validator(strict).is_valid({"target": " zombies"})
    assert jsonschema.Draft202012Validator(strict).is_valid({"target": "zombie"})
    kept = dropped = 0
    for cls in TOOLS.values():
        full = json.dumps(cls.model_json_schema(by_alias=True))
        strict_text, plain_text = json.dumps(cls.spec(strict=True)), json.dumps(cls.spec())
        for pattern in {p for p in actions_patterns() if json.dumps(p) in full}:
            assert json.dumps(pattern) in strict_text, (cls.tool_name, pattern)
            kept += 1
            dropped += json.dumps(pattern) not in plain_text
    assert kept > 0 and dropped > 0


def actions_patterns() -> set[str]:
    from emil.world.tool import _UNSPOKEN_PATTERNS, ITEM_NAME

    return {*_UNSPOKEN_PATTERNS, ITEM_NAME}


@pytest.mark.parametrize("name", ["store", "take"])
def test_a_strict_spec_holds_item_counts_to_names_and_sizes(name: str) -> None:
    import jsonschema

    from emil.world.tool import STRICT_ONLY

    strict = jsonschema.Draft202012Validator(TOOLS[name].spec(strict=True)["function"]["parameters"])
    assert strict.is_valid({"items": {"oak_log": 10}})
    for bad in ({"additionalProperties": 1}, {}, {f"item_{i}": 1 for i in range(17)}):
        assert not strict.is_valid({"items": bad}), bad
        assert validate_tool_call(ToolCall(id="1", name=name, raw_arguments="", arguments={"items": bad})).error
    assert not any(key in json.dumps(spec) for spec in tool_specs() for key in STRICT_ONLY)


@pytest.mark.parametrize(
    ("result", "reads"),
    [
        # an older bot (no receipt) and a throw nobody saw land: what was thrown
        ({"gave": "emerald", "count": 1, "to": "alex"}, "tossed 1 emerald to alex"),
        ({"gave": "emerald", "count": 1, "to": "alex", "seen": 0, "received": 0, "lying": 0}, "tossed 1 emerald to alex"),
        ({"gave": "oak_log", "count": 3, "to": "alex", "seen": 3, "received": 3, "lying": 0, "others": {}},
         "tossed 3 oak_log to alex; alex picked them up"),
        ({"gave": "emerald", "count": 1, "to": "alex", "seen": 1, "received": 0, "lying": 1, "lying_from": 2.4},
         "tossed 1 emerald to alex; alex picked up none yet, one still on the ground, 2.4 blocks from alex"),
        ({"gave": "bread", "count": 4, "to": "alex", "seen": 4, "received": 1, "lying": 2, "lying_from": 1.1,
          "others": {"bob": 1}},
         "tossed 4 bread to alex; alex picked up some of them, bob picked up one, 2 still on the ground, 1.1 blocks from alex"),
        # what Emil caught back is not given (count is what left for good)
        ({"gave": "emerald", "count": 0, "to": "alex", "seen": 1, "received": 0, "lying": 0, "back": 1},
         "tossed 1 emerald to alex; 1 came back to you (you picked them up again: still yours)"),
        ({"gave": "dirt", "count": 2, "to": "alex", "short": "only had 2", "seen": 2, "received": 2},
         "tossed 2 dirt to alex (only had 2); alex picked them up"),
    ],
)
def test_give_says_where_the_thrown_items_went(result: dict[str, Any], reads: str) -> None:
    assert Give(player="alex", item=result["gave"]).read(result) == reads

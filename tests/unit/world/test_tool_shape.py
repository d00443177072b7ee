"""A tool is one Python class plus one JS function: everything else is derived from the class."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
from typing import Any, ClassVar

import pytest
from pydantic import Field

from emil.world import actions
from emil.world.actions import TOOLS, dispatch, tool_specs, validate_tool_call
from emil.world.chat import Say
from emil.world.setup import JS_SOURCE_DIR, node_bin
from emil.world.tool import Outcome, Query, Tool
from emil.world.wire import ActionResult
from tests.unit.world.test_actions import BotDouble, call


async def test_a_new_tool_is_one_class() -> None:
    class Wave(Tool):
        """Wave at a player."""

        tool_name: ClassVar[str] = "wave"
        job: ClassVar[bool] = True
        timeout_s: ClassVar[float] = 7.0
        player: str = Field(pattern=r"^[A-Za-z0-9_]{1,16}$", description="Who to wave at")
        times: int = Field(default=1, ge=1, le=3)

        def read(self, result: dict[str, Any]) -> str:
            return f"waved at {result['at']} {self.times} time(s)"

    try:
        assert TOOLS["wave"] is Wave  # the registry: defining the class registered it
        spec = next(s["function"] for s in tool_specs() if s["function"]["name"] == "wave")
        assert spec["description"] == "Wave at a player."
        assert spec["parameters"]["properties"]["player"]["description"] == "Who to wave at"
        assert spec["parameters"]["properties"]["times"] == {"default": 1, "maximum": 3, "minimum": 1, "type": "integer"}
        assert spec["parameters"]["required"] == ["player"]

        bad = validate_tool_call(call("wave", player="Al ex", times=9))
        assert bad.error is not None and "invalid arguments for wave" in bad.error
        assert "player" in bad.error and "times" in bad.error
        assert validate_tool_call(call("wave", player="Alex")).arguments == {"player": "Alex", "times": 1}

        bot = BotDouble({"wave": ActionResult(ok=True, result={"at": "Alex"})})
        out = await dispatch(bot, call("wave", player="Alex", times=2))
        assert out == Outcome(True, "waved at Alex 2 time(s)", {"at": "Alex"}, rule="any")
        assert bot.calls == [("wave", {"player": "Alex", "times": 2}, 7.0)] and bot.jobs == [True]

        failing = BotDouble({"wave": ActionResult(ok=False, error="Alex is not in sight")})
        assert await dispatch(failing, call("wave", player="Alex")) == Outcome(False, "wave failed: Alex is not in sight", rule="any")
    finally:
        del TOOLS["wave"]
    assert "wave" not in {s["function"]["name"] for s in tool_specs()}


def test_two_tools_cannot_share_a_name() -> None:
    with pytest.raises(TypeError, match="two tools named 'say'"):

        class AnotherSay(Tool):
            """Say it twice."""

            tool_name: ClassVar[str] = "say"

    assert TOOLS["say"] is Say


def test_the_runtime_knows_no_tool_by_name() -> None:
    # dispatch, validation and the spec list read the registry; no tool name appears in them.
    names = set(TOOLS)
    for fn in (actions.dispatch, actions.parse_tool, actions.validate_tool_call, actions.tool_specs):
        tree = ast.parse(inspect.getsource(fn))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & names, f"{fn.__name__} names tools: {literals & names}"


def test_every_action_tool_has_its_js_function_and_no_js_function_is_orphaned() -> None:
    script = "console.log(JSON.stringify(Object.keys(require(process.argv[1]).ACTIONS)))"
    out = subprocess.run(
        [str(node_bin()), "-e", script, str(JS_SOURCE_DIR / "emil_actions.js")],
        capture_output=True, text=True, check=True, timeout=30,
    )
    js = set(json.loads(out.stdout))
    bridged = {name for name, cls in TOOLS.items() if cls.bridged}
    assert not any(cls.bridged for cls in TOOLS.values() if issubclass(cls, Query))
    assert js == bridged

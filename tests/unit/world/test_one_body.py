"""Emil's body validates a call once, and the turn's context reaches every layer unchanged."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import JsonValue

from emil.llm.types import ToolCall
from emil.world.actions import TOOLS, BotWorld, validate_tool_call
from emil.world.port import TurnContext
from emil.world.tool import ActionPolicy, Outcome, Tool
from emil.world.wire import ActionResult, Snapshot

pytestmark = pytest.mark.anyio


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every validation of ``remember``'s arguments against its model, as it happens."""
    seen: list[Any] = []
    cls = TOOLS["remember"]
    original = cls.model_validate

    def counted(obj: Any, *args: Any, **kwargs: Any) -> Tool:
        seen.append(obj)
        return original(obj, *args, **kwargs)

    monkeypatch.setattr(cls, "model_validate", counted)
    return seen


class _Notes:
    """The memory tools' side: ``remember`` says what it noted and for whom the turn was."""

    def __init__(self) -> None:
        self.noted: list[str] = []

    def recall(self, query: str, *, player: str | None = None,
               audience: frozenset[str] = frozenset()) -> tuple[bool, str]:
        return True, ""

    def remember(self, text: str, *, about: str | None = None) -> tuple[bool, str]:
        self.noted.append(text)
        return True, f"noted: {text}"


def _remember(args: dict[str, Any]) -> ToolCall:
    return ToolCall(id="c", name="remember", raw_arguments=json.dumps(args), arguments=args)


class _Bot:
    async def act(self, name: str, args: Mapping[str, JsonValue] | None = None, timeout: float = 60.0, *,  # noqa: ASYNC109
                  job: bool = False) -> ActionResult:
        raise AssertionError("no bridge action here")

    async def snapshot(self) -> Snapshot:
        return Snapshot()

    @property
    def events(self) -> Any:
        raise AssertionError("not read")

    async def abort(self) -> None:
        return None


async def test_a_validated_call_is_not_validated_again_by_the_body(validations: list[Any]) -> None:
    call = validate_tool_call(_remember({"text": "the gate is north"}))
    assert call.error is None and len(validations) == 1
    assert validate_tool_call(call) is call  # validating a validated call again is nothing
    notes = _Notes()
    out = await BotWorld(_Bot(), ActionPolicy(), memory=notes).run_tool(call, TurnContext.of("alex"))
    assert out == Outcome(True, "noted: the gate is north", rule="any") and notes.noted == ["the gate is north"]
    assert len(validations) == 1  # the one validation: the client's


async def test_a_call_that_was_never_validated_is_validated_by_the_body_once(validations: list[Any]) -> None:
    notes = _Notes()
    out = await BotWorld(_Bot(), ActionPolicy(), memory=notes).run_tool(_remember({"text": "hi"}), TurnContext())
    assert out.ok and notes.noted == ["hi"] and len(validations) == 1


async def test_invalid_arguments_come_back_as_text_and_never_run() -> None:
    bad = validate_tool_call(_remember({"text": ""}))
    assert bad.error and bad.tool is None
    notes = _Notes()
    out = await BotWorld(_Bot(), ActionPolicy(), memory=notes).run_tool(bad, TurnContext())
    assert not out.ok and out.fate == "invalid" and out.text.startswith("error: invalid arguments for remember")
    assert notes.noted == []


def test_the_validated_tool_is_never_recorded() -> None:
    call = validate_tool_call(_remember({"text": "x"}))
    assert call.tool is not None and "tool" not in call.model_dump() and "tool" not in call.model_dump_json()


class _Seen:
    """The innermost world of a stack: what each layer handed down."""

    def __init__(self) -> None:
        self.turns: list[TurnContext] = []

    async def begin_turn(self, turn: TurnContext) -> Sequence[Outcome]:
        self.turns.append(turn)
        return ()

    async def run_tool(self, call: ToolCall, turn: TurnContext) -> Outcome:
        self.turns.append(turn)
        return Outcome(True, "ok")


async def test_the_memory_wrapper_hands_the_same_turn_down(tmp_path: Any) -> None:
    from emil.memory import Learner, MemoryStore, RememberingWorld

    inner = _Seen()
    store = MemoryStore.open(tmp_path)
    try:
        world = RememberingWorld(inner, Learner(store))  # type: ignore[arg-type]
        turn = TurnContext.of("alex", limit_s=7.0)
        await world.begin_turn(turn)
        await world.run_tool(ToolCall(id="c", name="say", raw_arguments='{"text": "hi"}', arguments={"text": "hi"}), turn)
    finally:
        store.close()
    assert inner.turns == [turn, turn] and all(t is turn for t in inner.turns)

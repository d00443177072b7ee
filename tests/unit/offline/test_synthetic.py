"""The synthetic session is deterministic per seed and shaped like Emil's play."""

from __future__ import annotations

import itertools
import json

from emil.offline.synthetic import emil_tool_specs, history_of, synthetic_turns


def _wire(seed: int, n: int) -> list[list[dict[str, object]]]:
    return [[m.to_openai() for m in t.messages] for t in itertools.islice(synthetic_turns(seed), n)]


def test_same_seed_same_session_other_seed_other_session() -> None:
    assert _wire(3, 20) == _wire(3, 20)
    assert _wire(3, 20) != _wire(4, 20)


def test_turns_pair_every_call_with_its_result_and_advance_time() -> None:
    turns = list(itertools.islice(synthetic_turns(0), 50))
    times = [t.t for t in turns]
    assert times == sorted(times) and len(set(times)) == len(times)
    for turn in turns:
        assert turn.messages[0].kind == "observation" and turn.messages[0].status
        calls = [c["id"] for m in turn.messages for c in m.tool_calls]
        results = [m.tool_call_id for m in turn.messages if m.role == "tool"]
        assert calls == results
        for m in turn.messages:
            for c in m.tool_calls:
                assert isinstance(json.loads(c["arguments"]), dict)
    assert len(history_of(turns).turns) == 50


def test_tool_specs_are_openai_function_specs() -> None:
    specs = emil_tool_specs()
    names = [s["function"]["name"] for s in specs]
    assert len(names) == len(set(names)) >= 10
    assert all(
        s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in specs
    )

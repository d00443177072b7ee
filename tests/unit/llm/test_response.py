"""A 200 is validated before use: every malformed answer is a ServerFault with the body's start."""

from __future__ import annotations

import json
from typing import Any

import pytest

from emil.exceptions import ServerFault
from emil.llm.client import parse_tool_call
from emil.llm.response import StreamAssembler, parse_completion, parse_models
from emil.llm.types import Timings

GOOD: dict[str, Any] = {
    "id": "x", "object": "chat.completion", "model": "m",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "reasoning_content": "hm",
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "say", "arguments": "{\"text\": \"hi\"}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 3,
              "prompt_tokens_details": {"cached_tokens": None},
              "completion_tokens_details": {"reasoning_tokens": 1}},
}


def _parse(body: bytes) -> Any:
    return parse_completion(body, tool_call=parse_tool_call, total_s=0.5)


def test_a_good_answer_parses() -> None:
    c = _parse(json.dumps(GOOD).encode())
    assert c.reasoning == "hm" and c.finish_reason == "tool_calls" and c.model == "m"
    assert c.tool_calls[0].arguments == {"text": "hi"} and c.tool_calls[0].id == "c1"
    assert c.usage is not None and c.usage.reasoning_tokens == 1 and c.usage.cached_tokens is None
    assert c.timings == Timings(total_s=0.5)


def test_reasoning_wins_over_reasoning_content_and_a_custom_call_reads_alike() -> None:
    body = json.loads(json.dumps(GOOD))
    msg = body["choices"][0]["message"]
    msg["reasoning"] = "new"
    msg["tool_calls"] = [{"type": "custom", "custom": {"name": "say", "input": "{}"}}]
    c = _parse(json.dumps(body).encode())
    assert c.reasoning == "new" and c.tool_calls[0].name == "say" and c.tool_calls[0].id == "call_0"


def _mutated(path: list[Any], value: Any) -> bytes:
    body = json.loads(json.dumps(GOOD))
    target = body
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(body).encode()


_DELETE = object()

MALFORMED = {
    "invalid JSON": b'{"choices": [',
    "HTML body": b"<html><body><h1>502 Bad Gateway</h1>" + b"x" * 2000 + b"</body></html>",
    "empty body": b"",
    "a JSON list": b"[]",
    "empty choices": _mutated(["choices"], []),
    "no choices": _mutated(["choices"], _DELETE),
    "choice without message": _mutated(["choices", 0, "message"], _DELETE),
    "message is a string": _mutated(["choices", 0, "message"], "hello"),
    "content is a number": _mutated(["choices", 0, "message", "content"], 42),
    "tool_calls is an object": _mutated(["choices", 0, "message", "tool_calls"], {"a": 1}),
    "arguments are an object": _mutated(["choices", 0, "message", "tool_calls", 0, "function",
                                         "arguments"], {"text": "hi"}),
    "prompt_tokens is text": _mutated(["usage", "prompt_tokens"], "10"),
    "usage without counts": _mutated(["usage"], {}),
    "finish_reason is a number": _mutated(["choices", 0, "finish_reason"], 1),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_answers_are_server_faults(name: str) -> None:
    body = MALFORMED[name]
    with pytest.raises(ServerFault) as err:
        _parse(body)
    assert "answered 200" in str(err.value)
    assert len(err.value.body) <= 420 and "\n" not in err.value.body
    assert err.value.body in str(err.value)


def test_models_list_is_validated() -> None:
    ok = json.dumps({"data": [{"id": "a", "root": "r", "max_model_len": 4096}, {"id": "b"}]})
    assert parse_models(ok.encode()) == [("a", "r", 4096), ("b", None, None)]
    for bad in (b"<html>", b'{"data": {}}', b'{"data": [{"root": "r"}]}',
                b'{"data": [{"id": "a", "max_model_len": "big"}]}'):
        with pytest.raises(ServerFault, match="model list"):
            parse_models(bad)


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def test_a_stream_assembles_and_says_when_the_first_token_came() -> None:
    a = StreamAssembler()
    assert a.add(_chunk({"role": "assistant", "content": ""})) is False
    assert a.add(_chunk({"reasoning": "think"})) is True
    assert a.add(_chunk({"content": "On "})) is True
    assert a.add(_chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "fol", "arguments": "{\"p"}}]}))
    assert a.add(_chunk({"tool_calls": [{"index": 0, "function": {"name": "low", "arguments": "\": 1}"}}]}, "tool_calls"))
    assert a.add({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}) is False
    c = a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0, first_token_s=0.1))
    assert c.content == "On " and c.reasoning == "think" and c.finish_reason == "tool_calls"
    assert c.tool_calls[0].name == "follow" and c.tool_calls[0].arguments == {"p": 1}
    assert c.usage is not None and c.usage.prompt_tokens == 5 and c.model == "m"


def test_a_stream_without_reasoning_has_none() -> None:
    a = StreamAssembler()
    a.add(_chunk({"content": "hi"}, "stop"))
    c = a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0))
    assert c.content == "hi" and c.reasoning is None


def test_a_truncated_stream_is_a_server_fault() -> None:
    a = StreamAssembler()
    a.add(_chunk({"content": "half an ans"}))
    with pytest.raises(ServerFault, match="without finishing") as err:
        a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0))
    assert "half an ans" in err.value.body


@pytest.mark.parametrize("chunk", [
    "text", [], {"choices": [{"delta": "x"}]}, {"choices": [{"index": 0}]},
    {"choices": [{"delta": {"content": 5}}]},
    {"choices": [{"delta": {"tool_calls": [{"id": "c"}]}}]},
    {"choices": {}},
])
def test_a_malformed_chunk_is_a_server_fault(chunk: Any) -> None:
    with pytest.raises(ServerFault, match="stream chunk"):
        StreamAssembler().add(chunk)


def test_a_fault_says_where_the_answer_went_wrong() -> None:
    with pytest.raises(ServerFault) as err:
        _parse(MALFORMED["empty choices"])
    assert str(err.value).startswith("the LLM server answered 200 with something that is not a chat completion (choices: ")
    with pytest.raises(ServerFault) as err:
        _parse(MALFORMED["content is a number"])
    assert "(choices.0.message.content: " in str(err.value)
    with pytest.raises(ServerFault) as err:
        _parse(b"<html>")
    assert "(body: Invalid JSON" in str(err.value) and str(err.value).endswith("; body: <html>")
    assert err.value.body == "<html>"
    with pytest.raises(ServerFault) as err:
        parse_models(b"[]")
    assert str(err.value).startswith("the LLM server answered 200 with something that is not a model list (body: ")


def test_a_truncated_stream_counts_its_chunks_and_shows_the_first_three() -> None:
    a = StreamAssembler()
    for word in ("one", "two", "three", "four"):
        a.add(_chunk({"content": word}))
    assert a.chunks == 4
    with pytest.raises(ServerFault) as err:
        a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0))
    assert "ended after 4 chunks without finishing" in str(err.value)
    assert "three" in err.value.body and "four" not in err.value.body and err.value.body.count(" | ") == 2


def test_a_call_with_neither_function_nor_custom_has_no_name() -> None:
    body = json.loads(json.dumps(GOOD))
    body["choices"][0]["message"]["tool_calls"] = [{"id": "c9"}]
    c = _parse(json.dumps(body).encode())
    assert c.tool_calls[0].name == "" and c.tool_calls[0].raw_arguments == ""


def test_a_stream_of_two_calls_without_ids_and_pieces_of_reasoning() -> None:
    a = StreamAssembler()
    a.add(_chunk({"reasoning_content": "one "}))
    a.add(_chunk({"reasoning_content": "two"}))
    a.add(_chunk({"tool_calls": [{"index": 1, "function": {"name": "b", "arguments": "{}"}}]}))
    a.add(_chunk({"tool_calls": [{"index": 0, "id": "first", "function": {"name": "a", "arguments": "{}"}}]}))
    a.add(_chunk({}, "tool_calls"))
    c = a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0))
    assert c.reasoning == "one two" and c.content is None
    assert [(t.id, t.name) for t in c.tool_calls] == [("first", "a"), ("call_1", "b")]


def test_a_bad_chunk_shows_itself() -> None:
    with pytest.raises(ServerFault) as err:
        StreamAssembler().add({"choices": "nope"})
    assert "nope" in err.value.body


# --- hard caps on one answer (the settings tool_calls_per_answer, tool_argument_*) --------------------------------


def _many_calls(n: int, arguments: str = '{"text": "hi"}') -> bytes:
    body = json.loads(json.dumps(GOOD))
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": f"c{i}", "type": "function", "function": {"name": "say", "arguments": arguments}} for i in range(n)
    ]
    return json.dumps(body).encode()


def test_an_answer_with_5000_calls_keeps_the_first_few() -> None:
    c = parse_completion(_many_calls(5000), tool_call=parse_tool_call, total_s=0.1, max_tool_calls=8)
    assert [t.id for t in c.tool_calls] == [f"c{i}" for i in range(8)] and c.dropped_tool_calls == 4992
    assert parse_completion(_many_calls(3), tool_call=parse_tool_call, total_s=0.1, max_tool_calls=8).dropped_tool_calls == 0


def test_a_stream_with_5000_calls_keeps_the_first_few() -> None:
    a = StreamAssembler(max_tool_calls=8)
    for i in range(5000):
        a.add(_chunk({"tool_calls": [{"index": i, "id": f"c{i}", "function": {"name": "say", "arguments": '{"text": "x"}'}}]}))
    a.add(_chunk({}, "tool_calls"))
    c = a.finish(tool_call=parse_tool_call, timings=Timings(total_s=1.0))
    assert len(c.tool_calls) == 8 and c.dropped_tool_calls == 4992 and len(a.calls) == 8


@pytest.mark.parametrize("depth", [7, 300, 5000, 200_000])
def test_arguments_nested_deep_are_data_not_a_recursion_error(depth: int) -> None:
    from emil.config import Settings

    raw = '{"text": ' + "[" * depth + "]" * depth + "}"
    call = parse_tool_call("c", "say", raw, Settings(tool_argument_chars=1_000_000, tool_argument_depth=6))
    assert call.arguments is None and call.error is not None and f"nested {depth + 1} levels" in call.error
    assert len(call.raw_arguments) <= 200


def test_arguments_too_long_are_data() -> None:
    from emil.config import Settings

    call = parse_tool_call("c", "say", json.dumps({"text": "x" * 10_000}), Settings(tool_argument_chars=4096))
    assert call.arguments is None and call.error is not None and "10,012 characters" in call.error
    ok = parse_tool_call("c", "say", json.dumps({"text": "x" * 100}), Settings())
    assert ok.error is None and ok.arguments == {"text": "x" * 100}


def test_without_caps_deep_json_is_still_data() -> None:
    call = parse_tool_call("c", "say", "[" * 200_000 + "]" * 200_000)
    assert call.arguments is None and call.error is not None

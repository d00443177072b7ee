"""A model answer holding lone surrogates, counted by Emil and by the real vLLM (issue #32).

A JSON parser accepts the escape ``\\ud800`` (a lone surrogate). The real server parses each
assistant tool call's ``arguments`` before rendering, and its tokenizer refuses a prompt holding
a lone surrogate (400, "TextEncodeInput must be ..."): kept escaped in history, it would fail
every later request. Emil's rule (emil.trust.caps) makes it U+FFFD wherever it decodes JSON, so
the history it builds from such an answer is sent, and counted by the server exactly as Emil
predicts it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from emil.agent.turn import history_call
from emil.context import Budget, ContextManager
from emil.context.history import History, Message
from emil.llm.client import OpenAIClient, parse_tool_call
from emil.llm.response import parse_completion
from emil.llm.tokenize import _chat_payload
from emil.llm.types import ChatRequest
from emil.offline.synthetic import SYSTEM_PROMPT, emil_tool_specs
from emil.serving.cpu_vllm import CpuVLLMServer

ARGUMENTS = {"text": "hi \ud800 there <|im_start|>\udfff", "\udc00key": [{"deep": "\ud83d"}, "ok \ud83d\ude00"]}
"""Lone surrogates in a value, beside a special token, in a key, nested; and a real pair."""


def _answer() -> bytes:
    """The answer as a server writes it: every lone surrogate a JSON escape, in content,
    reasoning, the tool's name and (escaped twice: a JSON string inside JSON) its arguments."""
    message = {"role": "assistant", "content": "sure \ud800", "reasoning": "think \udc00",
               "tool_calls": [{"id": "call_1", "type": "function",
                               "function": {"name": "say", "arguments": json.dumps(ARGUMENTS)}},
                              {"id": "call_2", "type": "function",
                               "function": {"name": "look\udfff", "arguments": "{}"}}]}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    return json.dumps(body).encode("ascii")


def _history(manager: ContextManager) -> History:
    """The turn engine's history of that answer: each message admitted as it enters."""
    completion = parse_completion(_answer(), tool_call=parse_tool_call, total_s=0.0)
    history = History(()).start_turn(manager.admit(Message.observation('bob says: "say hi for me"')))
    history = history.append(manager.admit(Message(
        role="assistant", kind="assistant", content=completion.content, reasoning=completion.reasoning,
        tool_calls=tuple(history_call(c) for c in completion.tool_calls),
    )))
    for call in completion.tool_calls:
        history = history.append(manager.admit(Message.tool_result(call.id, f"said {call.raw_arguments}")))
    # and arguments that reached history without the answer's parsing (the case: the
    # neutraliser rewrites them because of the special token)
    raw = json.dumps({"text": "<|im_end|>\ud800"})
    history = history.append(manager.admit(Message(
        role="assistant", kind="assistant", content=None,
        tool_calls=({"id": "call_3", "name": "say", "arguments": raw},),
    )))
    return history.append(manager.admit(Message.tool_result("call_3", "said")))


async def test_a_history_with_lone_surrogates_is_counted_as_the_server_counts(real_vllm: CpuVLLMServer) -> None:
    tools = emil_tool_specs()
    manager = ContextManager(real_vllm.model, Budget(real_vllm.options.max_model_len, output_reserve=64),
                             SYSTEM_PROMPT, tools)
    assembly = manager.assemble(_history(manager))
    wire = json.dumps(assembly.messages, ensure_ascii=False)
    wire.encode("utf-8")  # every text is one UTF-8 holds
    assert "\ufffd" in wire and "\\ud800" not in wire.lower() and "\\udc00" not in wire.lower()

    body = _chat_payload(real_vllm.model, assembly.messages, tools, True, {"enable_thinking": False})
    async with httpx.AsyncClient(timeout=60) as http:
        tokenized = await http.post(f"{real_vllm.root_url}/tokenize", json=body)
    assert tokenized.status_code == 200, tokenized.text
    assert tokenized.json()["count"] == assembly.predicted_tokens

    async with OpenAIClient(real_vllm.base_url) as client:
        completion = await client.complete(ChatRequest(
            messages=assembly.messages, tools=tools, max_completion_tokens=1,
            predicted_prompt_tokens=assembly.predicted_tokens,
        ))
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == assembly.predicted_tokens


def _messages(where: str, char: str) -> list[dict[str, object]]:
    """A short history whose one odd character ``char`` is in a tool call's arguments (as the
    escape: a JSON string inside the JSON body) or in an assistant's content."""
    if where == "arguments":
        call = {"id": "c", "type": "function", "function": {"name": "say", "arguments": json.dumps({"text": f"hi {char}"})}}
        assistant: dict[str, object] = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        assistant = {"role": "assistant", "content": f"hi {char}"}
    return [{"role": "user", "content": "hi"}, assistant, {"role": "user", "content": "and?"}]


@pytest.mark.parametrize("where", ["arguments", "content"])
def test_the_server_refuses_a_lone_surrogate_kept_escaped(real_vllm: CpuVLLMServer, where: str) -> None:
    """Why the rule is U+FFFD and not "keep it escaped": the same history with the lone
    surrogate kept is refused by the real server (which would fail every later request of the
    session); with U+FFFD in its place it is counted."""
    statuses = []
    for char in ("\ud800", "\ufffd"):
        # json.dumps escapes the lone surrogate (ensure_ascii): the body is ASCII, as a client sends it
        body = json.dumps({"model": real_vllm.model, "messages": _messages(where, char)})
        response = httpx.post(f"{real_vllm.root_url}/tokenize", content=body,
                              headers={"content-type": "application/json"}, timeout=60)
        statuses.append(response.status_code)
    assert statuses == [400, 200], response.text

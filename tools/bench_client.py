#!/usr/bin/env python3
"""The live client's own cost per request on big prompts: SDK ``create()`` vs ``AsyncOpenAI.post``.

``OpenAIClient`` used to send with ``chat.completions.create(...)``, which runs the SDK's TypedDict
transform over every message before the request leaves; it now posts the body it built with
``AsyncOpenAI.post("/chat/completions", body=..., cast_to=ChatCompletion)``. This script keeps
the old path here only (a subclass overriding the client's two private sends) and measures,
side by side in one run, on prompts of about ``--history-tokens`` real Qwen3.6 tokens (a
synthetic Emil-shaped session plus Emil's tool specs):

- wire:  ``complete()`` called -> the HTTP request leaves the client (httpx2 request hook).
         This is time the event loop is held: every other Emil in the process waits.
- total: ``complete()`` called -> Completion returned, against the vLLM-dialect DOUBLE (not a
         model: a fixed two-word answer, cheap 4-chars/token counting, in its own process).

Old and new alternate request by request (``--gap`` idle seconds before each, as turns are
seconds apart), plain and streamed, so drift hits both alike.

    /work/venv/bin/python tools/bench_client.py [--requests 30] [--history-tokens 36000]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

import anyio

from emil.cli_args import OneLineParser, non_negative_float, non_negative_int, positive_int
from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest
from emil.model.counting import count_prompt_tokens
from emil.offline.synthetic import SYSTEM_PROMPT, emil_tool_specs, history_of, synthetic_turns
from emil.testing.brains import fixed_reply
from emil.testing.script import Reply
from emil.testing.sdk_stream import SdkChunks
from emil.testing.subprocess_double import double_in_subprocess
from emil.testing.vllm_double import VLLMDouble


class SdkCreateClient(OpenAIClient):
    """The pre-change send path, for comparison only: ``chat.completions.create(**kwargs)``."""

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                  "max_completion_tokens": request.max_completion_tokens,
                                  "extra_body": self._body(request)}
        if request.tools:
            kwargs["tools"] = request.tools
        for name in ("tool_choice", "temperature", "top_p"):
            if getattr(request, name) is not None:
                kwargs[name] = getattr(request, name)
        return kwargs

    async def _post(self, request: ChatRequest) -> Any:
        create: Any = self._client.chat.completions.with_raw_response.create
        return (await create(**self._kwargs(request))).content

    async def _post_streaming(self, request: ChatRequest) -> Any:
        create: Any = self._client.chat.completions.create
        return SdkChunks(await create(**self._kwargs(request), stream=True,
                                      stream_options={"include_usage": True}))


def _cheap_counter(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   thinking: bool) -> int:
    # The double's counting is not what is measured; 4 chars/token keeps its side fast.
    return math.ceil((len(json.dumps(messages)) + len(json.dumps(tools or []))) / 4)


def _serve_double(urls: Any, stop: Any) -> None:
    """Child process: the double (vLLM is a separate process too)."""
    with VLLMDouble(fixed_reply(Reply(content="[scripted] ok")), window=262144,
                    counter=_cheap_counter) as double:
        urls.put(double.base_url)
        stop.wait()


def double_process() -> contextlib.AbstractContextManager[str]:
    return double_in_subprocess(_serve_double)


def prompt_near(tokens: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """System prompt + a synthetic session of about ``tokens`` real tokens, Emil's tools."""
    tools = emil_tool_specs()
    turns = []
    messages: list[dict[str, Any]] = []
    for turn in itertools.islice(synthetic_turns(seed=7), 5000):
        turns.append(turn)
        if len(turns) % 10:
            continue
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        messages += [m.to_openai() for m in history_of(turns).messages()]
        if count_prompt_tokens(messages, tools) >= tokens:
            break
    return messages, tools, count_prompt_tokens(messages, tools)


def _hook(llm: OpenAIClient, sink: list[float]) -> None:
    """Note when each chat request leaves (the SDK's private httpx2 client: a bench-only probe)."""

    async def on_request(request: Any) -> None:
        if request.url.path.endswith("/chat/completions"):
            sink.append(time.perf_counter())

    llm._client._client.event_hooks["request"].append(on_request)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    messages, tools, prompt_tokens = prompt_near(args.history_tokens)
    rows: list[dict[str, Any]] = []
    with double_process() as base_url:
        async with OpenAIClient(base_url) as new, SdkCreateClient(base_url) as old:
            clients = {"create()": old, "post()": new}
            sent: dict[str, list[float]] = {name: [] for name in clients}
            for name, llm in clients.items():
                await llm.discover()
                _hook(llm, sent[name])
            for stream in (False, True):
                wire: dict[str, list[float]] = {name: [] for name in clients}
                total: dict[str, list[float]] = {name: [] for name in clients}
                for i in range(args.warmup + args.requests):
                    # a new last line each time, as a new turn would add
                    request = ChatRequest(
                        messages=[*messages, {"role": "user", "content": f"alex: Emil, turn {i}?"}],
                        tools=tools, max_completion_tokens=64, stream=stream)
                    order = list(clients) if i % 2 == 0 else list(reversed(clients))
                    for name in order:
                        llm = clients[name]
                        # let the double finish the previous request's bookkeeping (its prefix
                        # cache) so neither path waits on the other's leftovers
                        await anyio.sleep(args.gap)
                        started = time.perf_counter()
                        completion = await llm.complete(request)
                        ended = time.perf_counter()
                        assert completion.content == "[scripted] ok", completion
                        if i >= args.warmup:
                            wire[name].append((sent[name][-1] - started) * 1000)
                            total[name].append((ended - started) * 1000)
                for name in clients:
                    rows.append({
                        "path": name, "stream": stream, "prompt_tokens": prompt_tokens,
                        "messages": len(messages) + 1, "n": len(wire[name]),
                        "wire_ms_median": statistics.median(wire[name]),
                        "wire_ms_p95": pct(wire[name], 0.95),
                        "total_ms_median": statistics.median(total[name]),
                        "total_ms_p95": pct(total[name], 0.95),
                    })
    return rows


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=positive_int, default=30, help="measured requests per path and mode (default 30)")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="unmeasured requests first (default 3)")
    p.add_argument("--history-tokens", type=positive_int, default=36000, help="prompt size in real tokens (default 36000)")
    p.add_argument("--gap", type=non_negative_float, default=0.2, help="idle seconds before each request (default 0.2)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = p.parse_args(argv)
    rows = anyio.run(run, args)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    first = rows[0]
    print(f"client send cost, {first['prompt_tokens']} prompt tokens ({first['messages']} messages + "
          f"{len(emil_tool_specs())} tools), {first['n']} requests per row, vLLM-dialect double (scripted, no model)")
    print(f"{'mode':<9} {'path':<9} {'wire med':>9} {'wire p95':>9} {'total med':>10} {'total p95':>10}")
    for r in rows:
        mode = "streamed" if r["stream"] else "plain"
        print(f"{mode:<9} {r['path']:<9} {r['wire_ms_median']:>7.1f}ms {r['wire_ms_p95']:>7.1f}ms "
              f"{r['total_ms_median']:>8.1f}ms {r['total_ms_p95']:>8.1f}ms")
    for old, new in zip(rows[::2], rows[1::2], strict=True):
        mode = "streamed" if old["stream"] else "plain"
        print(f"{mode}: create()/post() = {old['wire_ms_median'] / new['wire_ms_median']:.0f}x to the wire, "
              f"{old['total_ms_median'] / new['total_ms_median']:.1f}x round trip (medians)")
    print("wire = complete() called -> HTTP request leaves the client (event loop held meanwhile); "
          "total = complete() called -> Completion returned")
    return 0


if __name__ == "__main__":
    sys.exit(main())

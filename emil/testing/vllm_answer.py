"""How the vLLM-dialect DOUBLE answers one chat completion (it is not vLLM and runs no model).

The scripted reply (:mod:`emil.testing.script`) is cut to the output limit like a real length
stop, sized in tokens by the double's own estimate (outputs are synthetic, only their length
matters), sent whole or as SSE chunks in decode steps (one chunk per step, as vLLM does with
speculative decoding: :class:`SpecDecode`), slowed to the configured prefill and decode rates,
and counted in the simulated metrics (:class:`Metrics`).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from emil.testing.script import Reply

KV_BLOCK = 16
"""The double's KV cache block (a GPU vLLM's default): the grain of its simulated prefix cache."""

SYSTEM_FINGERPRINT = "vllm-0.32.0-double"
"""What a real vLLM 0.32 puts in ``system_fingerprint`` ("vllm-<version>-<hash>"), as a double."""

__all__ = ["Answering", "Metrics", "SpecDecode"]


class _Answer(JSONResponse):
    """A non-streamed answer as starlette writes it, except that a scripted lone surrogate
    (``Reply(content="\\ud800")``, which UTF-8 cannot encode) goes out as the JSON escape, as it
    does in a stream: the double can then answer what a proxy or another server may send."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


@dataclass(frozen=True)
class SpecDecode:
    """Simulated speculative decoding: ``k`` drafts per step, each accepted with ``acceptance``
    while the previous one was (so per-position acceptance falls off like a real MTP head)."""

    k: int = 3
    acceptance: float = 0.8
    seed: int = 0


@dataclass
class Metrics:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests_ok: int = 0
    running: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    prefix_queries: int = 0
    prefix_hits: int = 0


def _estimate_tokens(text: str) -> int:
    # The double's own output-length estimate: outputs are synthetic, only their length matters.
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _cut(text: str | None, tokens: int) -> str | None:
    return None if text is None else text[: max(0, tokens * 4)]


class Answering:
    """The answering half of :class:`emil.testing.vllm_double.VLLMDouble` (a mixin: the
    attributes below are the double's)."""

    model: str
    kv_block: int
    reasoning_field: str
    prefill_tps: float | None
    decode_tps: float | None
    spec_decode: SpecDecode | None
    _metrics: Metrics
    _rng: random.Random

    def _steps(self, tokens: int) -> list[int]:
        """Split ``tokens`` into decode steps (1 + accepted drafts each), counting metrics."""
        spec = self.spec_decode
        if spec is None:
            return [1] * tokens
        steps: list[int] = []
        left = tokens
        m = self._metrics
        while left > 0:
            accepted = 0
            while accepted < spec.k and self._rng.random() < spec.acceptance:
                m.per_pos[accepted] += 1
                accepted += 1
            m.drafts += 1
            m.draft_tokens += spec.k
            m.accepted += accepted
            step = min(left, 1 + accepted)
            steps.append(step)
            left -= step
        return steps

    async def _answer(
        self, body: dict[str, Any], reply: Reply, prompt: int, cached: int, limit: int,
        first_token_delay: float = 0.0,
    ) -> Response:
        calls = [(f"chatcmpl-tool-{uuid.uuid4().hex[:16]}", c.name, c.raw_arguments)
                 for c in reply.tool_calls]
        text_len = "".join([reply.content or "", reply.reasoning or ""]
                           + [name + args for _, name, args in calls])
        natural = reply.completion_tokens if reply.completion_tokens is not None else (
            _estimate_tokens(text_len)
        )
        content, reasoning = reply.content, reply.reasoning
        if body.get("ignore_eos"):
            # Generation runs past any stop to the limit: cut there, a length stop (as vLLM).
            natural = limit + 1
            if content is not None and _estimate_tokens(content) < limit:
                content = (content + " " + "lorem " * (limit * 4 // 6 + 1))[: limit * 4]
        # vLLM (as OpenAI): "tool_calls" when the model chose to call, "stop" for a named tool_choice
        named = isinstance(body.get("tool_choice"), dict)
        finish = reply.finish_reason or ("tool_calls" if calls and not named else "stop")
        out = natural
        if natural > limit:
            # Cut like a real length stop: the text ends early, tool arguments break off.
            out, finish = limit, "length"
            content, reasoning = _cut(content, limit), _cut(reasoning, limit)
            calls = [(i, n, a[: max(0, limit * 4 - len(n))]) for i, n, a in calls]
        m = self._metrics
        m.prompt_tokens += prompt
        m.generation_tokens += out
        m.prefix_queries += prompt
        m.prefix_hits += cached
        steps = self._steps(out)
        reasoning_tokens = _estimate_tokens(reasoning) if reasoning else None
        # vLLM 0.32's usage: created_cache_tokens = the prompt's new full KV blocks.
        created = max(0, prompt // self.kv_block * self.kv_block - cached)
        usage = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + out,
            "completion_tokens": out,
            "prompt_tokens_details": {"cached_tokens": cached, "created_cache_tokens": created,
                                      "multimodal_tokens": None},
            "completion_tokens_details": (
                {"reasoning_tokens": reasoning_tokens} if reasoning_tokens else None
            ),
        }
        prefill = reply.delay_s
        if self.prefill_tps:
            prefill += (prompt - cached) / self.prefill_tps
        base = {"id": f"chatcmpl-{uuid.uuid4().hex[:16]}", "object": "chat.completion",
                "created": int(time.time()), "model": self.model}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = self._stream(base, content, reasoning, calls, finish, steps, prefill,
                                  usage if include_usage else None, first_token_delay)
            return StreamingResponse(chunks, media_type="text/event-stream")
        m.running += 1
        try:
            await asyncio.sleep(prefill + (out / self.decode_tps if self.decode_tps else 0.0))
        finally:
            m.running -= 1
        m.requests_ok += 1
        # The shape of a real vLLM 0.32 answer, every field it sends (tool_calls only when
        # there are calls, as it does).
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None,
                                   "annotations": None, "audio": None, "function_call": None}
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function",
                                      "function": {"name": n, "arguments": a}}
                                     for i, n, a in calls]
        message[self.reasoning_field] = reasoning
        return _Answer({
            **base,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish, "stop_reason": None, "token_ids": None,
                         "routed_experts": None}],
            "service_tier": None, "system_fingerprint": SYSTEM_FINGERPRINT, "usage": usage,
            "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None,
            "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None,
        })

    async def _stream(
        self,
        base: dict[str, Any],
        content: str | None,
        reasoning: str | None,
        calls: list[tuple[str, str, str]],
        finish: str,
        steps: list[int],
        prefill: float,
        usage: dict[str, Any] | None,
        first_token_delay: float = 0.0,
    ) -> AsyncIterator[str]:
        def chunk(delta: dict[str, Any], finish_reason: str | None = None, *,
                  first: bool = False) -> str:
            # The chunk shapes of a real vLLM 0.32 stream: the first carries the role and the
            # prompt fields, the others token_ids; the last text chunk carries the finish.
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                      "finish_reason": finish_reason}
            if finish_reason is not None:
                choice["stop_reason"] = None
            if not first:
                choice["token_ids"] = None
            payload = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            if first:
                payload |= {"prompt_token_ids": None, "prompt_text": None}
            if finish_reason is not None and usage is None:  # else on the usage chunk
                payload["system_fingerprint"] = SYSTEM_FINGERPRINT
            return f"data: {json.dumps(payload)}\n\n"

        m = self._metrics
        m.running += 1
        try:
            await asyncio.sleep(prefill)
            yield chunk({"role": "assistant", "content": ""}, first=True)
            if first_token_delay:
                await asyncio.sleep(first_token_delay)  # ends early when the client leaves
            # Text is sent in decode steps: one SSE chunk per step, as vLLM does with MTP.
            pieces: list[tuple[str, str]] = []
            if reasoning:
                pieces += [(self.reasoning_field, reasoning)]
            if content:
                pieces += [("content", content)]
            stream_text = [(field_name, text[i:i + 4]) for field_name, text in pieces
                           for i in range(0, len(text), 4)]
            # Each decode step's deltas, the text longer than the scripted token count last
            # (it still arrives whole, as non-streamed).
            batches = [stream_text[sum(steps[:k]):sum(steps[:k + 1])] for k in range(len(steps))]
            batches.append(stream_text[sum(steps):])
            deltas: list[tuple[int, dict[str, Any]]] = []
            for k, batch in enumerate(batches):
                for field_name in dict.fromkeys(f for f, _ in batch):
                    deltas.append((steps[k] if k < len(steps) else 0,
                                   {field_name: "".join(t for f, t in batch if f == field_name)}))
            for n, (step, delta) in enumerate(deltas):
                if self.decode_tps and step:
                    await asyncio.sleep(step / self.decode_tps)
                last = n == len(deltas) - 1 and not calls
                yield chunk(delta, finish if last else None)
            for index, (call_id, name, args) in enumerate(calls):
                # as vLLM 0.32's hermes parser streams a call: its name first (no arguments
                # key), then argument pieces; every delta with content null
                yield chunk({"content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "index": index, "function": {"name": name}}]})
                for i in range(0, len(args), 16):
                    yield chunk({"content": None, "tool_calls": [
                        {"index": index, "function": {"arguments": args[i:i + 16]}}]})
            if calls or not deltas:
                yield chunk({}, finish)
            if usage is not None:
                streamed = {**usage, "prompt_tokens_details": {
                    k: v for k, v in usage["prompt_tokens_details"].items() if v is not None}}
                streamed.pop("completion_tokens_details", None)
                if usage.get("completion_tokens_details"):
                    streamed["completion_tokens_details"] = usage["completion_tokens_details"]
                payload = {**base, "object": "chat.completion.chunk", "choices": [],
                           "usage": streamed, "system_fingerprint": SYSTEM_FINGERPRINT}
                yield f"data: {json.dumps(payload)}\n\n"
            yield "data: [DONE]\n\n"
            m.requests_ok += 1
        finally:
            m.running -= 1



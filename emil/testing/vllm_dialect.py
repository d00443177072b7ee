"""What each endpoint of the vLLM-dialect DOUBLE answers (it is not vLLM and runs no model).

``/v1/models``, ``/tokenize``, ``/health``, ``/version``, ``/metrics`` and
``/v1/chat/completions`` as vLLM answers them: the served model's count of the prompt, the
window enforced in one vLLM era's wording (:mod:`emil.testing.vllm_wordings`), the API key, a
model still loading, every injected fault (:mod:`emil.testing.faults`), and a stand-in for the
prefix cache. The completion itself is :mod:`emil.testing.vllm_answer`'s; the server around it
(start, stop, fault injection) is :class:`emil.testing.vllm_double.VLLMDouble`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from emil.memory.summary import is_summary_request
from emil.testing.faults import Fault, FaultBook, malformed_body, malformed_chunks
from emil.testing.script import Policy, ScriptRequest
from emil.testing.vllm_answer import Answering
from emil.testing.vllm_wordings import Wording, error_body, judge_overflow

__all__ = ["TAG", "PreservingCounter", "PromptCounter", "QueuedFaults", "VLLMDialect"]

TAG = "[vLLM-dialect DOUBLE]"
_log = logging.getLogger("emil.testing.vllm_double")

_VERSIONS: dict[str, str] = {
    "old": "0.6.3",
    "request_has": "0.10.0",
    "you_passed": "0.16.0",
    "at_least": "0.30.0",
    "clamp": "0.32.0",
}


PromptCounter = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, bool], int]
"""(messages, tools, enable_thinking) -> prompt tokens, as the served model's template counts."""

PreservingCounter = Callable[
    [list[dict[str, Any]], list[dict[str, Any]] | None, bool, bool, bool], int
]

@dataclass
class QueuedFaults:
    loading_until: float = 0.0
    fail: list[tuple[int, str]] = field(default_factory=list)
    drops: int = 0


def _validation_error(errors: list[dict[str, Any]]) -> JSONResponse:
    """The 400 a request body failing vLLM's request model gets (FastAPI's validation, worded
    and shaped as a real vLLM 0.32 answers it: type "Bad Request", param the first error's
    location)."""
    head = f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}:"
    message = "\n  ".join([head, *map(repr, errors)])
    return JSONResponse({"error": {"message": message, "type": "Bad Request",
                                   "param": errors[0]["loc"], "code": 400}}, status_code=400)


def _missing(field: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "missing", "loc": f"body.{field}", "msg": "Field required",
            "input": f"<dict of {len(body)} items>"}


async def _json_body(request: Request) -> dict[str, Any] | JSONResponse:
    """The request's JSON object, or vLLM's 400 for a body that is not JSON."""
    try:
        body = json.loads(await request.body())
    except json.JSONDecodeError as exc:
        return _validation_error([{"type": "json_invalid", "loc": f"body.{exc.pos}",
                                   "msg": "JSON decode error", "input": "<dict of 0 items>",
                                   "ctx": {"error": exc.msg}}])
    if not isinstance(body, dict):
        return _validation_error([{"type": "model_attributes_type", "loc": "body",
                                   "msg": "Input should be a valid dictionary or object to "
                                          "extract fields from", "input": body}])
    return body


def _unknown_model(requested: Any, served: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": f"The model `{requested}` does not exist. Valid aliases: {served}.",
                   "type": "NotFoundError", "param": "model", "code": 404}},
        status_code=404,
    )


class _Dropped(Exception):
    """Raised inside a response to make uvicorn drop the connection (fault injection)."""


class VLLMDialect(Answering):
    """The endpoints of :class:`emil.testing.vllm_double.VLLMDouble` (a mixin: the attributes
    below are the double's)."""

    policy: Policy
    summaries: Policy | None
    window: int
    root: str
    wording: Wording
    auto_tool_choice: bool
    api_key: str | None
    kv_capacity_tokens: int
    requests: list[dict[str, Any]]
    prompt_sizes: list[int]
    tokenize_calls: int
    faults: FaultBook
    _faults: QueuedFaults
    _previous: tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]
    _lock: threading.Lock
    _counter: PromptCounter | None
    _project: PreservingCounter | None
    _text: Any

    async def _wait_or_leave(self, request: Request, seconds: float) -> bool:
        """Sleep ``seconds`` unless the client leaves first (True when it left)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if await request.is_disconnected():
                return True
            await asyncio.sleep(min(0.1, left))
        return False

    def _served_model(self) -> str:
        return f"{self.model}-replaced" if self.faults.peek("model_gone") else self.model

    def count(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, thinking: bool,
        preserve: bool = False, generation: bool = True,
    ) -> int:
        """The prompt size this server sees (``preserve`` = ``chat_template_kwargs.preserve_thinking``,
        ``generation`` = ``add_generation_prompt``; a ``counter=`` given to the constructor
        takes neither)."""
        if self._counter is not None:
            return self._counter(messages, tools, thinking)
        assert self._project is not None, "start the double first"
        return self._project(messages, tools, thinking, preserve, generation)

    def _error(self, status: int, message: str, *, flat: bool = False) -> JSONResponse:
        _log.info("%s HTTP %d: %s", TAG, status, message)
        return JSONResponse(error_body(message, flat=flat, status=status), status_code=status)

    def _gate(self, request: Request) -> Response | None:
        if time.monotonic() < self._faults.loading_until:
            return self._error(503, "The model is still loading; try again later.")
        if self.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    async def _health(self, request: Request) -> Response:
        if time.monotonic() < self._faults.loading_until:
            return Response(status_code=503)
        return Response(status_code=200)

    async def _version(self, request: Request) -> Response:
        return JSONResponse({"version": f"{_VERSIONS[self.wording]}+double"})

    async def _models(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        now = int(time.time())
        entry = {
            "id": self._served_model(),
            "object": "model",
            "created": now,
            "owned_by": "vllm-dialect-double",  # a real vLLM says "vllm": the double names itself
            "root": self.root,
            "parent": None,
            "max_model_len": self.window,
            "permission": [{
                "id": f"modelperm-{uuid.uuid4().hex[:16]}", "object": "model_permission",
                "created": now, "allow_create_engine": False, "allow_sampling": True,
                "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                "allow_fine_tuning": False, "organization": "*", "group": None,
                "is_blocking": False,
            }],
        }
        return JSONResponse({"object": "list", "data": [entry]})

    async def _tokenize(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        body = await _json_body(request)
        if isinstance(body, JSONResponse):
            return body
        if "messages" not in body and "prompt" not in body:
            return _validation_error([_missing("prompt", body), _missing("messages", body)])
        if body.get("model") not in (None, self._served_model()):
            return _unknown_model(body.get("model"), self._served_model())
        try:
            if "messages" in body:
                kwargs = body.get("chat_template_kwargs") or {}
                thinking = bool(kwargs.get("enable_thinking", True))
                preserve = bool(kwargs.get("preserve_thinking", False))
                generation = bool(body.get("add_generation_prompt", True))
                count = self.count(body["messages"], body.get("tools"), thinking, preserve,
                                   generation)
                tokens = list(range(count))  # placeholders: a chat count is what is asked for
            else:  # plain text: the served tokenizer's own ids (no template, no BOS for Qwen)
                tokens = list(self._text.encode(str(body.get("prompt", ""))))
                count = len(tokens)
        except Exception as exc:  # vLLM answers a template failure with a 400 too
            return self._error(400, f"{type(exc).__name__}: {exc}")
        with self._lock:
            self.tokenize_calls += 1
        return JSONResponse({"count": count, "max_model_len": self.window, "tokens": tokens,
                             "token_strs": None})

    async def _metrics_text(self, request: Request) -> Response:
        m = self._metrics
        name = self.model
        lines = [
            f"# {TAG} Prometheus text in vLLM's metric names; the numbers are simulated.",
            f'vllm:prompt_tokens_total{{model_name="{name}"}} {m.prompt_tokens}',
            f'vllm:generation_tokens_total{{model_name="{name}"}} {m.generation_tokens}',
            f'vllm:request_success_total{{finished_reason="stop",model_name="{name}"}} '
            f"{m.requests_ok}",
            f'vllm:num_requests_running{{model_name="{name}"}} {m.running}',
            f'vllm:num_requests_waiting{{model_name="{name}"}} 0',
            f'vllm:kv_cache_usage_perc{{model_name="{name}"}} '
            f"{min(1.0, m.running * self.window / self.kv_capacity_tokens):.4f}",
            f'vllm:prefix_cache_queries_total{{model_name="{name}"}} {m.prefix_queries}',
            f'vllm:prefix_cache_hits_total{{model_name="{name}"}} {m.prefix_hits}',
            f'vllm:spec_decode_num_drafts_total{{model_name="{name}"}} {m.drafts}',
            f'vllm:spec_decode_num_draft_tokens_total{{model_name="{name}"}} {m.draft_tokens}',
            f'vllm:spec_decode_num_accepted_tokens_total{{model_name="{name}"}} {m.accepted}',
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="{name}",'
            f'position="{i}"}} {n}'
            for i, n in enumerate(m.per_pos)
        ]
        return PlainTextResponse("\n".join(lines) + "\n")

    def _cached_prefix(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        prompt: int,
        thinking: bool,
        preserve: bool = False,
    ) -> int:
        # A stand-in for vLLM's prefix cache: the tokens of the messages shared with the last
        # request, rounded down to whole KV blocks (``kv_block`` tokens) (an identical prompt re-uses all but
        # its last token).
        shared = 0
        previous_tools, previous_messages = self._previous
        if previous_tools == tools:  # the tools are rendered first, inside the system turn
            for old, new in zip(previous_messages, messages, strict=False):
                if old != new:
                    break
                shared += 1
        self._previous = (tools, list(messages))
        if shared == 0:
            return 0
        if shared == len(messages):
            shared_tokens = prompt - 1
        else:
            try:
                shared_tokens = self.count(messages[:shared], tools, thinking, preserve)
            except Exception:  # a prefix the template refuses (no user turn yet) caches nothing
                return 0
        return max(0, min(shared_tokens, prompt - 1)) // self.kv_block * self.kv_block

    async def _chat(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        body = await _json_body(request)
        if isinstance(body, JSONResponse):
            return body
        if "messages" not in body:
            return _validation_error([_missing("messages", body)])
        if not isinstance(body["messages"], list):
            return _validation_error([{"type": "list_type", "loc": "body.messages",
                                       "msg": "Input should be a valid list",
                                       "input": body["messages"]}])
        with self._lock:
            self.requests.append(body)
            fault = self._faults.fail.pop(0) if self._faults.fail else None
            drop = self._faults.drops > 0
            if drop:
                self._faults.drops -= 1
        if fault is not None:
            return self._error(fault[0], fault[1])
        injected = self.faults.take()
        first_token_delay = 0.0
        if injected is not None:
            early = await self._injected(request, body, injected)
            if early is not None:
                return early
            if injected.kind == "slow_first_token":
                first_token_delay = injected.delay_s
            elif injected.kind == "drop":
                drop = True
        if drop:
            _log.warning("%s dropping the connection (fault injection)", TAG)
            if body.get("stream"):
                return StreamingResponse(_dropping_stream(), media_type="text/event-stream")
            return _DroppingResponse()
        flat = self.wording == "old"
        requested_model = body.get("model")
        if requested_model not in (None, self._served_model()):
            return _unknown_model(requested_model, self._served_model())
        tools = body.get("tools") or None
        tool_choice = body.get("tool_choice")
        if tools and tool_choice in (None, "auto") and not self.auto_tool_choice:
            return self._error(
                400,
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                "to be set",
                flat=flat,
            )
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        if isinstance(asked, int) and asked < 1:  # vLLM names max_tokens for either field
            return self._error(
                400, f"max_tokens must be at least 1, got {asked}. "
                     f"(parameter=max_tokens, value={asked})", flat=flat)
        template_kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(template_kwargs.get("enable_thinking", True))
        preserve = bool(template_kwargs.get("preserve_thinking", False))
        messages = body.get("messages") or []
        try:
            prompt = self.count(messages, tools, thinking, preserve)
        except Exception as exc:  # vLLM answers a template failure with a 400 too
            return self._error(400, f"{type(exc).__name__}: {exc}", flat=flat)
        self.prompt_sizes.append(prompt)
        sent_as = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        max_tokens = body.get(sent_as)
        answer = judge_overflow(self.wording, window=self.window, prompt=prompt,
                                max_tokens=max_tokens, field=sent_as)
        if answer.reject_message is not None:
            return self._error(400, answer.reject_message, flat=answer.flat_body)
        limit = self.window - prompt if max_tokens is None else max_tokens
        if answer.clamp_to is not None:
            limit = min(limit, answer.clamp_to)
            _log.info("%s clamping output to %d tokens (0.32-0.33 rule)", TAG, limit)

        script = ScriptRequest(messages=messages, tools=tools, tool_choice=tool_choice,
                               max_tokens=max_tokens, enable_thinking=thinking,
                               prompt_tokens=prompt, model=requested_model, body=body)
        policy = self.summaries if self.summaries is not None and is_summary_request(body) else self.policy
        reply = await anyio.to_thread.run_sync(policy, script)
        cached = self._cached_prefix(messages, tools, prompt, thinking, preserve)
        if first_token_delay and not body.get("stream") and await self._wait_or_leave(request, first_token_delay):
            return Response(status_code=499)
        return await self._answer(body, reply, prompt, cached, limit, first_token_delay)

    async def _injected(self, request: Request, body: dict[str, Any], fault: Fault) -> Response | None:
        """The answer a fault gives at once, or None to go on (delays, drops, model states)."""
        kind = fault.kind
        if kind == "status":
            return self._error(fault.status, fault.message)
        if kind == "hang":
            _log.warning("%s hanging for up to %.0f s (fault injection)", TAG, fault.delay_s)
            await self._wait_or_leave(request, fault.delay_s)
            return Response(status_code=504)
        if kind == "model_gone":
            return _unknown_model(body.get("model"), self._served_model())
        if kind == "no_tool_choice" and body.get("tools") and body.get("tool_choice") in (None, "auto"):
            return self._error(400, '"auto" tool choice requires --enable-auto-tool-choice and '
                                    "--tool-call-parser to be set")
        if kind in ("invalid_json", "empty_choices", "html", "no_message", "wrong_types", "truncated_stream"):
            _log.warning("%s answering 200 with %s (fault injection)", TAG, kind)
            if body.get("stream"):
                return StreamingResponse(_lines(malformed_chunks(kind)), media_type="text/event-stream")
            content, media = malformed_body(kind)
            return Response(content, status_code=200, media_type=media)
        return None



async def _lines(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _dropping_stream() -> AsyncIterator[str]:
    """One SSE chunk, then the connection dies (fault injection for streamed requests)."""
    payload = {"id": "chatcmpl-dropped", "object": "chat.completion.chunk", "created": 0,
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None}]}
    yield f"data: {json.dumps(payload)}\n\n"
    raise _Dropped(f"{TAG} connection dropped mid-stream on purpose")


class _DroppingResponse(Response):
    """Starts a response, then dies: the client sees the connection close mid-body."""

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"4096")]})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})
        raise _Dropped(f"{TAG} connection dropped on purpose")

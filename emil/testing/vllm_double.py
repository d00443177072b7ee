"""A vLLM-dialect HTTP server DOUBLE. It is not vLLM and runs no model.

It speaks vLLM's OpenAI-compatible dialect over real HTTP on 127.0.0.1 (a free port) so the live
client, the recovery policy and the benchmarks are exercised end to end without a GPU:

- ``POST /v1/chat/completions`` (plain and SSE streaming with ``include_usage``),
  ``GET /v1/models`` (``id``, ``root``, ``max_model_len``), ``POST /tokenize`` (root path),
  ``GET /health``, ``GET /metrics`` (Prometheus text with spec-decode, load and prefix-cache
  counters), ``GET /version``.
- It serves as one model family (``family=``, default: the family of ``tokenizer``, a model
  name): that family's template and tokenizer count every prompt, honouring
  ``chat_template_kwargs``. With ``chat_template=`` (Jinja source) and a ``tokenizer`` it is a
  model of no shipped family, e.g. :data:`TERN` (:meth:`VLLMDouble.unknown_model`), that only
  its ``/tokenize`` can count. ``counter=`` replaces all of that with a function (the
  ``preserve_thinking`` kwarg is not passed to it). The window is enforced with that count and
  an overflow is answered in one vLLM era's wording and JSON
  body shape (:mod:`emil.testing.vllm_wordings`): ``old``, ``request_has``, ``you_passed``,
  ``at_least`` (the (W-M)+1 tokenization cap) or ``clamp`` (0.33's silent clamp).
- Replies come from a SCRIPTED policy (:mod:`emil.testing.brains`), never from a model.
- Fault injection: :meth:`VLLMDouble.loading` (503 or refused connections for N seconds),
  :meth:`VLLMDouble.fail_next` (any status and message), :meth:`VLLMDouble.drop_next` (the
  connection dies mid-response), a wrong model name gets vLLM's 404, and
  ``auto_tool_choice=False`` gives vLLM's 400 for tool choice not enabled. Every fault mode of
  :mod:`emil.testing.faults` (malformed 200s, hangs, a slow first token, 503s, the model no
  longer served, tool choice not enabled...) is a setting: ``faults=`` at construction,
  :meth:`VLLMDouble.inject` at run time, or ``POST /_double/faults`` from another process
  (``DELETE`` clears them, ``GET /_double/stats`` counts what arrived).

Every response carries ``x-double: vllm-dialect-double`` and every log line starts with
``[vLLM-dialect DOUBLE]``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import json
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emil.memory.summary import is_summary_request
from emil.testing.faults import Fault, FaultBook, FaultKind, malformed_body, malformed_chunks
from emil.testing.script import Policy, Reply, ScriptRequest
from emil.testing.summaries import scripted_summary
from emil.testing.vllm_wordings import Wording, error_body, judge_overflow

__all__ = ["DOUBLE_HEADER", "FAMILY_MODELS", "TERN", "PromptCounter", "SpecDecode", "VLLMDouble"]

DOUBLE_HEADER = ("x-double", "vllm-dialect-double")
_TAG = "[vLLM-dialect DOUBLE]"
_KV_BLOCK = 16
_log = logging.getLogger(__name__)

PromptCounter = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, bool], int]
"""(messages, tools, enable_thinking) -> prompt tokens, as the served model's template counts."""

_PreservingCounter = Callable[
    [list[dict[str, Any]], list[dict[str, Any]] | None, bool, bool, bool], int
]

FAMILY_MODELS: dict[str, str] = {
    "qwen3.6": "Qwen/Qwen3.6-35B-A3B",
    "qwen3.5": "Qwen/Qwen3.5-35B-A3B",
    "qwen3": "Qwen/Qwen3-30B-A3B",
    "qwen3-instruct-2507": "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "qwen3-coder": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
}
"""A served model name for each shipped family (what the double calls itself as that family)."""

TERN = "acme/Tern-7B-Chat"
"""A made-up model of no shipped family (templates/tern_chat.jinja, Qwen3's vocabulary)."""

_VERSIONS: dict[str, str] = {
    "old": "0.6.3",
    "request_has": "0.10.0",
    "you_passed": "0.16.0",
    "at_least": "0.30.0",
    "clamp": "0.33.0",
}


@dataclass(frozen=True)
class SpecDecode:
    """Simulated speculative decoding: ``k`` drafts per step, each accepted with ``acceptance``
    while the previous one was (so per-position acceptance falls off like a real MTP head)."""

    k: int = 3
    acceptance: float = 0.8
    seed: int = 0


@dataclass
class _Faults:
    loading_until: float = 0.0
    fail: list[tuple[int, str]] = field(default_factory=list)
    drops: int = 0


@dataclass
class _Metrics:
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


def _served_counting(
    tokenizer: str, family: str | None, chat_template: str | None
) -> tuple[_PreservingCounter, Any]:
    """(prompt counter, text counter) of the model this double serves."""
    # Resolved at start, not import, so the double can be imported before emil.context exists.
    families = importlib.import_module("emil.model.family")
    tokens = importlib.import_module("emil.model.tokens")
    templates = importlib.import_module("emil.model.template")
    if chat_template is not None:
        counter = tokens.get_token_counter(tokenizer)
        template = templates.ChatTemplate(chat_template, origin="the double's chat template")
    else:
        chosen = (
            families.family_by_name(family) if family else families.family_for_model(tokenizer)
        )
        if chosen is None or chosen.template is None:
            raise ValueError(f"the double cannot serve {tokenizer!r}: no family; pass family=")
        counter, template = chosen.tokenizer(), chosen.template()

    def count(
        messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, thinking: bool,
        preserve: bool, generation: bool,
    ) -> int:
        kwargs = {"preserve_thinking": True} if preserve else {}
        text = template.render(
            messages, tools, add_generation_prompt=generation, enable_thinking=thinking, **kwargs
        )
        return int(counter.count(text))

    return count, counter


def _estimate_tokens(text: str) -> int:
    # The double's own output-length estimate: outputs are synthetic, only their length matters.
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _cut(text: str | None, tokens: int) -> str | None:
    return None if text is None else text[: max(0, tokens * 4)]


class _TagFilter(logging.Filter):
    """Prefixes uvicorn's own log lines from the double's thread with the double's tag."""

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread().name == "vllm-double" and not str(record.msg).startswith(
            _TAG
        ):
            record.msg = f"{_TAG} {record.msg}"
        return True


def _tag_uvicorn_logs() -> None:
    for name in ("uvicorn.error", "uvicorn"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _TagFilter) for f in logger.filters):
            logger.addFilter(_TagFilter())


class _HeaderMiddleware:
    """Marks every response as coming from the double; keeps every request's path and headers."""

    def __init__(self, app: ASGIApp, seen: list[tuple[str, dict[str, str]]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            self.seen.append((scope["path"], headers))

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((DOUBLE_HEADER[0].encode(), DOUBLE_HEADER[1].encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_marked)


class _Dropped(Exception):
    """Raised inside a response to make uvicorn drop the connection (fault injection)."""


class VLLMDouble:
    """A vLLM-dialect HTTP server double (not vLLM): see the module docstring.

    Use as ``with VLLMDouble(policy) as d:`` or ``async with``; ``d.base_url`` is
    ``http://127.0.0.1:PORT/v1`` and ``d.root_url`` the root (for /tokenize, /metrics).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        window: int = 32768,
        model: str = "Qwen/Qwen3.6-35B-A3B-NVFP4-Fast",
        root: str | None = None,
        wording: Wording = "at_least",
        counter: PromptCounter | None = None,
        tokenizer: str = "qwen3.6",
        family: str | None = None,
        chat_template: str | None = None,
        auto_tool_choice: bool = True,
        api_key: str | None = None,
        decode_tps: float | None = None,
        prefill_tps: float | None = None,
        spec_decode: SpecDecode | None = None,
        reasoning_field: str = "reasoning",
        kv_capacity_tokens: int = 500_000,
        faults: Sequence[Fault] = (),
        summaries: Policy | None = scripted_summary,
    ) -> None:
        self.policy = policy
        self.summaries = summaries
        """Answers Emil's summary requests (emil.memory.summary): the SCRIPTED summariser by
        default; None leaves them to ``policy``."""
        self.window = window
        self.model = model
        self.root = root or model
        self.wording: Wording = wording
        self.tokenizer = tokenizer
        self.family = family
        self.chat_template = chat_template
        self._counter = counter
        self._project: _PreservingCounter | None = None
        self._text: Any = None
        self.auto_tool_choice = auto_tool_choice
        self.api_key = api_key
        self.decode_tps = decode_tps
        self.prefill_tps = prefill_tps
        self.spec_decode = spec_decode
        self.reasoning_field = reasoning_field
        self.kv_capacity_tokens = kv_capacity_tokens
        self.port = 0
        self.requests: list[dict[str, Any]] = []
        """Every chat-completions body received, in order (for assertions)."""
        self.request_headers: list[tuple[str, dict[str, str]]] = []
        """Every HTTP request's path and headers (names in lower case), in order."""
        self.prompt_sizes: list[int] = []
        """The counted prompt size of every chat request, in order."""
        self.tokenize_calls = 0
        """POST /tokenize requests answered (for measuring server-counted families)."""
        self._faults = _Faults()
        self.faults = FaultBook()
        """The fault modes in force (emil.testing.faults)."""
        for fault in faults:
            self.faults.add(fault)
        self._metrics = _Metrics(per_pos=[0] * (spec_decode.k if spec_decode else 0))
        self._rng = random.Random(spec_decode.seed if spec_decode else 0)
        self._previous: tuple[list[dict[str, Any]] | None, list[dict[str, Any]]] = (None, [])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._refuse_timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/tokenize", self._tokenize, methods=["POST"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/metrics", self._metrics_text, methods=["GET"]),
                Route("/version", self._version, methods=["GET"]),
                Route("/_double/faults", self._control_faults, methods=["POST", "DELETE"]),
                Route("/_double/stats", self._stats, methods=["GET"]),
            ],
            middleware=[Middleware(_HeaderMiddleware, seen=self.request_headers)],
        )

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what an OpenAI client takes."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (vLLM serves /tokenize, /metrics, /health there)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> VLLMDouble:
        """Bind 127.0.0.1 (a free port the first time, the same port after) and serve."""
        if self._project is None:
            self._project, self._text = _served_counting(
                self.tokenizer, self.family, self.chat_template
            )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        # log_config=None: a test double must not reconfigure the process's logging.
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_keep_alive=5,
        )
        _tag_uvicorn_logs()
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="vllm-double", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 5.0
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{_TAG} did not start on port {self.port}")
            time.sleep(0.005)
        self._server, self._thread = server, thread
        _log.info("%s serving %s (window %d, wording %s) at %s", _TAG, self.model, self.window,
                  self.wording, self.base_url)
        return self

    def stop(self) -> None:
        """Stop serving (the port then refuses connections)."""
        if self._refuse_timer is not None:
            self._refuse_timer.cancel()
            self._refuse_timer = None
        self._halt()
        _log.info("%s stopped", _TAG)

    def _halt(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(timeout=10)

    def __enter__(self) -> VLLMDouble:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> VLLMDouble:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # ---- fault injection -------------------------------------------------------------------

    def loading(self, seconds: float, *, refuse: bool = False) -> None:
        """Act as if weights are loading for ``seconds``.

        ``refuse=True`` closes the port (connection refused, as vLLM does while loading) and
        re-opens the same port afterwards; otherwise every endpoint answers 503.
        """
        if refuse:
            _log.warning("%s refusing connections for %.2fs (loading)", _TAG, seconds)
            self._halt()
            self._refuse_timer = threading.Timer(seconds, self.start)
            self._refuse_timer.daemon = True
            self._refuse_timer.start()
        else:
            _log.warning("%s answering 503 for %.2fs (loading)", _TAG, seconds)
            self._faults.loading_until = time.monotonic() + seconds

    def fail_next(self, status: int, message: str, times: int = 1) -> None:
        """The next ``times`` chat requests get HTTP ``status`` with ``message`` in the body."""
        with self._lock:
            self._faults.fail.extend([(status, message)] * times)

    def drop_next(self, times: int = 1) -> None:
        """The next ``times`` chat requests lose their connection mid-response."""
        with self._lock:
            self._faults.drops += times

    def inject(self, fault: Fault | FaultKind, **fields: Any) -> None:
        """Put a fault mode in force (a :class:`Fault`, or its kind and fields)."""
        f = fault if isinstance(fault, Fault) else Fault(kind=fault, **fields)
        _log.warning("%s fault injected: %s", _TAG, f)
        if f.kind == "refuse":
            self.loading(f.for_s or 1.0, refuse=True)
            return
        self.faults.add(f)

    def clear_faults(self) -> None:
        """End every fault mode in force."""
        self.faults.clear()

    async def _control_faults(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.clear_faults()
            return JSONResponse({"cleared": True})
        try:
            fault = Fault.from_json(await request.json())
        except (ValueError, TypeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if fault.kind == "refuse":
            # answer first: the port closes right after
            threading.Timer(0.05, self.inject, args=(fault,)).start()
        else:
            self.inject(fault)
        return JSONResponse({"injected": fault.kind})

    async def _stats(self, request: Request) -> Response:
        return JSONResponse({"chat_requests": len(self.requests), "ok": self._metrics.requests_ok,
                             "faults_applied": dict(self.faults.applied)})

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

    # ---- helpers ---------------------------------------------------------------------------

    @classmethod
    def as_family(cls, policy: Policy, family: str, **kwargs: Any) -> VLLMDouble:
        """The double serving a typical model of a shipped family (:data:`FAMILY_MODELS`)."""
        model = FAMILY_MODELS[family]
        return cls(policy, model=model, tokenizer=model, family=family, **kwargs)

    @classmethod
    def unknown_model(cls, policy: Policy, **kwargs: Any) -> VLLMDouble:
        """The double serving :data:`TERN`, a model of no shipped family: only its /tokenize
        can count it."""
        source = (
            importlib.resources.files("emil.testing")
            .joinpath("templates", "tern_chat.jinja")
            .read_text(encoding="utf-8")
        )
        return cls(policy, model=TERN, tokenizer="Qwen/Qwen3-8B", chat_template=source, **kwargs)

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
        _log.info("%s HTTP %d: %s", _TAG, status, message)
        return JSONResponse(error_body(message, flat=flat, status=status), status_code=status)

    def _gate(self, request: Request) -> Response | None:
        if time.monotonic() < self._faults.loading_until:
            return self._error(503, "The model is still loading; try again later.")
        if self.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    # ---- endpoints -------------------------------------------------------------------------

    async def _health(self, request: Request) -> Response:
        if time.monotonic() < self._faults.loading_until:
            return Response(status_code=503)
        return Response(status_code=200)

    async def _version(self, request: Request) -> Response:
        return JSONResponse({"version": f"{_VERSIONS[self.wording]}+double"})

    async def _models(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        entry = {
            "id": self._served_model(),
            "object": "model",
            "created": 0,
            "owned_by": "vllm-dialect-double",
            "root": self.root,
            "parent": None,
            "max_model_len": self.window,
        }
        return JSONResponse({"object": "list", "data": [entry]})

    async def _tokenize(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        body = await request.json()
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
        return JSONResponse({"count": count, "max_model_len": self.window, "tokens": tokens})

    async def _metrics_text(self, request: Request) -> Response:
        m = self._metrics
        name = self.model
        lines = [
            f"# {_TAG} Prometheus text in vLLM's metric names; the numbers are simulated.",
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
        # request, rounded down to whole 16-token KV blocks (an identical prompt re-uses all but
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
        return max(0, min(shared_tokens, prompt - 1)) // _KV_BLOCK * _KV_BLOCK

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

    async def _chat(self, request: Request) -> Response:
        if (denied := self._gate(request)) is not None:
            return denied
        body = await request.json()
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
            _log.warning("%s dropping the connection (fault injection)", _TAG)
            if body.get("stream"):
                return StreamingResponse(_dropping_stream(), media_type="text/event-stream")
            return _DroppingResponse()
        flat = self.wording == "old"
        requested_model = body.get("model")
        if requested_model not in (None, self._served_model()):
            return JSONResponse(
                {"error": {"message": f"The model `{requested_model}` does not exist.",
                           "type": "NotFoundError", "param": "model", "code": 404}},
                status_code=404,
            )
        tools = body.get("tools") or None
        tool_choice = body.get("tool_choice")
        if tools and tool_choice in (None, "auto") and not self.auto_tool_choice:
            return self._error(
                400,
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                "to be set",
                flat=flat,
            )
        template_kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(template_kwargs.get("enable_thinking", True))
        preserve = bool(template_kwargs.get("preserve_thinking", False))
        messages = body.get("messages") or []
        try:
            prompt = self.count(messages, tools, thinking, preserve)
        except Exception as exc:  # vLLM answers a template failure with a 400 too
            return self._error(400, f"{type(exc).__name__}: {exc}", flat=flat)
        self.prompt_sizes.append(prompt)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        answer = judge_overflow(self.wording, window=self.window, prompt=prompt,
                                max_tokens=max_tokens)
        if answer.reject_message is not None:
            return self._error(400, answer.reject_message, flat=answer.flat_body)
        limit = self.window - prompt if max_tokens is None else max_tokens
        if answer.clamp_to is not None:
            limit = min(limit, answer.clamp_to)
            _log.info("%s clamping output to %d tokens (0.33 rule)", _TAG, limit)

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
            _log.warning("%s hanging for up to %.0f s (fault injection)", _TAG, fault.delay_s)
            await self._wait_or_leave(request, fault.delay_s)
            return Response(status_code=504)
        if kind == "model_gone":
            return JSONResponse(
                {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                           "type": "NotFoundError", "param": "model", "code": 404}},
                status_code=404,
            )
        if kind == "no_tool_choice" and body.get("tools") and body.get("tool_choice") in (None, "auto"):
            return self._error(400, '"auto" tool choice requires --enable-auto-tool-choice and '
                                    "--tool-call-parser to be set")
        if kind in ("invalid_json", "empty_choices", "html", "no_message", "wrong_types", "truncated_stream"):
            _log.warning("%s answering 200 with %s (fault injection)", _TAG, kind)
            if body.get("stream"):
                return StreamingResponse(_lines(malformed_chunks(kind)), media_type="text/event-stream")
            content, media = malformed_body(kind)
            return Response(content, status_code=200, media_type=media)
        return None

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
            natural = limit
            if content is not None and _estimate_tokens(content) < limit:
                content = (content + " " + "lorem " * (limit * 4 // 6 + 1))[: limit * 4]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
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
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": out,
            "total_tokens": prompt + out,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": (
                {"reasoning_tokens": reasoning_tokens} if reasoning_tokens else None
            ),
        }
        prefill = reply.delay_s
        if self.prefill_tps:
            prefill += (prompt - cached) / self.prefill_tps
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()),
                "model": self.model}
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
        message: dict[str, Any] = {"role": "assistant", "content": content,
                                   self.reasoning_field: reasoning, "tool_calls": [
                                       {"id": i, "type": "function",
                                        "function": {"name": n, "arguments": a}}
                                       for i, n, a in calls]}
        return JSONResponse({
            **base, "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}],
            "usage": usage,
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
        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
            payload = {**base, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason,
                                    "logprobs": None}]}
            return f"data: {json.dumps(payload)}\n\n"

        m = self._metrics
        m.running += 1
        try:
            await asyncio.sleep(prefill)
            yield chunk({"role": "assistant", "content": ""})
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
            position = 0
            for step in steps:
                if self.decode_tps:
                    await asyncio.sleep(step / self.decode_tps)
                batch = stream_text[position:position + step]
                position += step
                for field_name in dict.fromkeys(f for f, _ in batch):
                    yield chunk({field_name: "".join(t for f, t in batch if f == field_name)})
            # Text longer than the scripted token count still arrives whole, as non-streamed.
            rest = stream_text[position:]
            for field_name in dict.fromkeys(f for f, _ in rest):
                yield chunk({field_name: "".join(t for f, t in rest if f == field_name)})
            for index, (call_id, name, args) in enumerate(calls):
                yield chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]})
                for i in range(0, len(args), 16):
                    yield chunk({"tool_calls": [{"index": index,
                                                 "function": {"arguments": args[i:i + 16]}}]})
            yield chunk({}, finish)
            if usage is not None:
                yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
            m.requests_ok += 1
        finally:
            m.running -= 1


async def _lines(lines: list[str]) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _dropping_stream() -> AsyncIterator[str]:
    """One SSE chunk, then the connection dies (fault injection for streamed requests)."""
    payload = {"id": "chatcmpl-dropped", "object": "chat.completion.chunk", "created": 0,
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None}]}
    yield f"data: {json.dumps(payload)}\n\n"
    raise _Dropped(f"{_TAG} connection dropped mid-stream on purpose")


class _DroppingResponse(Response):
    """Starts a response, then dies: the client sees the connection close mid-body."""

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", b"4096")]})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})
        raise _Dropped(f"{_TAG} connection dropped on purpose")

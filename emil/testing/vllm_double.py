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
  ``at_least`` (the (W-M)+1 tokenization cap) or ``clamp`` (0.32-0.33's silent clamp).
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

import importlib
import importlib.resources
import logging
import random
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emil.model.family import DEFAULT_FAMILY, FAMILIES, family_by_name, family_for_model
from emil.model.resolve import get_token_counter
from emil.model.template import ChatTemplate
from emil.testing.faults import Fault, FaultBook, FaultKind
from emil.testing.reducer import reducer_summary
from emil.testing.script import Policy
from emil.testing.vllm_answer import KV_BLOCK, Metrics, SpecDecode
from emil.testing.vllm_dialect import (
    TAG,
    PreservingCounter,
    PromptCounter,
    QueuedFaults,
    VLLMDialect,
)
from emil.testing.vllm_wordings import Wording

__all__ = ["DOUBLE_HEADER", "FAMILY_MODELS", "TERN", "VLLMDouble"]

DOUBLE_HEADER = ("x-double", "vllm-dialect-double")
_log = logging.getLogger(__name__)

FAMILY_MODELS: dict[str, str] = {family.name: family.example for family in FAMILIES}
"""A served model name for each shipped family (what the double calls itself as that family)."""

TERN = "acme/Tern-7B-Chat"
"""A made-up model of no shipped family (templates/tern_chat.jinja, Qwen3's vocabulary)."""

def _served_counting(
    tokenizer: str, family: str | None, chat_template: str | None
) -> tuple[PreservingCounter, Any]:
    """(prompt counter, text counter) of the model this double serves."""
    if chat_template is not None:
        counter = get_token_counter(tokenizer)
        template = ChatTemplate(chat_template, origin="the double's chat template")
    else:
        chosen = family_by_name(family) if family else family_for_model(tokenizer)
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


class _TagFilter(logging.Filter):
    """Prefixes uvicorn's own log lines from the double's thread with the double's tag."""

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.current_thread().name == "vllm-double" and not str(record.msg).startswith(
            TAG
        ):
            record.msg = f"{TAG} {record.msg}"
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


class VLLMDouble(VLLMDialect):
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
        tokenizer: str = DEFAULT_FAMILY,
        family: str | None = None,
        chat_template: str | None = None,
        auto_tool_choice: bool = True,
        api_key: str | None = None,
        decode_tps: float | None = None,
        prefill_tps: float | None = None,
        spec_decode: SpecDecode | None = None,
        reasoning_field: str = "reasoning",
        kv_capacity_tokens: int = 500_000,
        kv_block: int = KV_BLOCK,
        faults: Sequence[Fault] = (),
        summaries: Policy | None = reducer_summary,
    ) -> None:
        self.policy = policy
        self.summaries = summaries
        """Answers Emil's summary requests (emil.memory.summary): the text reducer
        (emil.testing.reducer, a double: not a model) by default; None leaves them to ``policy``."""
        self.window = window
        self.model = model
        self.root = root or model
        self.wording: Wording = wording
        self.tokenizer = tokenizer
        self.family = family
        self.chat_template = chat_template
        self._counter = counter
        self._project: PreservingCounter | None = None
        self._text: Any = None
        self.auto_tool_choice = auto_tool_choice
        self.api_key = api_key
        self.decode_tps = decode_tps
        self.prefill_tps = prefill_tps
        self.spec_decode = spec_decode
        self.reasoning_field = reasoning_field
        self.kv_capacity_tokens = kv_capacity_tokens
        self.kv_block = kv_block
        """Tokens a KV cache block holds: the grain of the simulated prefix cache and of
        ``created_cache_tokens`` (16, a GPU vLLM's default; the real-vLLM tier's CPU server 32)."""
        self.port = 0
        self.requests: list[dict[str, Any]] = []
        """Every chat-completions body received, in order (for assertions)."""
        self.request_headers: list[tuple[str, dict[str, str]]] = []
        """Every HTTP request's path and headers (names in lower case), in order."""
        self.prompt_sizes: list[int] = []
        """The counted prompt size of every chat request, in order."""
        self.tokenize_calls = 0
        """POST /tokenize requests answered (for measuring server-counted families)."""
        self._faults = QueuedFaults()
        self.faults = FaultBook()
        """The fault modes in force (emil.testing.faults)."""
        for fault in faults:
            self.faults.add(fault)
        self._metrics = Metrics(per_pos=[0] * (spec_decode.k if spec_decode else 0))
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
                raise RuntimeError(f"{TAG} did not start on port {self.port}")
            time.sleep(0.005)
        self._server, self._thread = server, thread
        _log.info("%s serving %s (window %d, wording %s) at %s", TAG, self.model, self.window,
                  self.wording, self.base_url)
        return self

    def stop(self) -> None:
        """Stop serving (the port then refuses connections)."""
        if self._refuse_timer is not None:
            self._refuse_timer.cancel()
            self._refuse_timer = None
        self._halt()
        _log.info("%s stopped", TAG)

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
            _log.warning("%s refusing connections for %.2fs (loading)", TAG, seconds)
            self._halt()
            self._refuse_timer = threading.Timer(seconds, self.start)
            self._refuse_timer.daemon = True
            self._refuse_timer.start()
        else:
            _log.warning("%s answering 503 for %.2fs (loading)", TAG, seconds)
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
        _log.warning("%s fault injected: %s", TAG, f)
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

    # ---- helpers ---------------------------------------------------------------------------

    @classmethod
    def as_family(cls, policy: Policy, family: str, **kwargs: Any) -> VLLMDouble:
        """The double serving a typical model of a shipped family (:data:`FAMILY_MODELS`)."""
        model = FAMILY_MODELS[family]
        return cls(policy, model=model, tokenizer=model, family=family, **kwargs)

    @classmethod
    def serving(cls, policy: Policy, family: str | None, **kwargs: Any) -> VLLMDouble:
        """The double as a model of ``family`` (:meth:`as_family`), or of none when None
        (:meth:`unknown_model`)."""
        if family is None:
            return cls.unknown_model(policy, **kwargs)
        return cls.as_family(policy, family, **kwargs)

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


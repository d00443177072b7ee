"""The live LLM client: openai's AsyncOpenAI against a vLLM server.

``OpenAIClient`` implements :class:`emil.llm.types.LLM`. It discovers the served model and its
window from ``GET /v1/models`` (the window comes from the server, never from a constant), sends
vLLM's extra request fields (``chat_template_kwargs``, ``top_k``, passthrough ``extra_body``),
reads reasoning from ``reasoning`` or the older ``reasoning_content``, returns malformed tool calls
as data, and maps every failure onto the classes of :mod:`emil.llm.classify`:
overflow -> :class:`OverflowRejected`, transient -> :class:`EndpointUnavailable`,
configuration -> :class:`EndpointConfigError` with a message that says what to change, and a
200 that is not a valid completion -> :class:`ServerFault` (:mod:`emil.llm.response`).

Two time limits: ``timeout`` for the whole answer, and ``first_token_timeout`` for the first
generated token of a streamed answer (a hung server is then noticed in seconds, while a long
answer that is flowing may take its time). Either one running out is transient.

The SDK's own retries are off (``max_retries=0``): retrying is the policy's job, and the SDK
would otherwise resend identical overflowing requests.

Requests go out through ``AsyncOpenAI.post("/chat/completions", body=...)`` with the body this
module builds, not through ``chat.completions.create``: ``create`` runs the SDK's TypedDict
transform over every message before sending, which costs ~300 ms on a 36k-token prompt and holds
the event loop meanwhile; on Emil's plain-JSON bodies the transform changes nothing, so the bytes
on the wire are the same (tests/unit/llm/test_client_body.py compares them; docs/llm.md has the
figures from tools/bench_client.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import openai
from openai import AsyncOpenAI, AsyncStream, RequestOptions

from emil.config import Settings
from emil.exceptions import (
    EmilError,
    EndpointConfigError,
    EndpointUnavailable,
    ModelNotServedError,
    RequestRejected,
    ServerFault,
)
from emil.llm.classify import OverflowRejected, classify_failure, config_hint
from emil.llm.overflow import extract_error_message, parse_overflow
from emil.llm.response import StreamAssembler, parse_completion, parse_models
from emil.llm.tokenize import ServerTokenizeCounter
from emil.llm.types import ChatRequest, Completion, Timings, ToolCall, ToolChoice, root_url_of
from emil.trust.caps import argument_problem, valid_json, valid_unicode

__all__ = ["OpenAIClient", "ServedModel", "parse_tool_call"]

_log = logging.getLogger(__name__)

_PATH = "/chat/completions"
# What ``chat.completions.create`` passes: the API key as a bearer token (and not the admin key).
_REQUEST_OPTIONS: RequestOptions = {"security": {"bearer_auth": True}}


@dataclass(frozen=True)
class ServedModel:
    """One entry of ``GET /v1/models``."""

    id: str
    max_model_len: int | None
    """The served window in tokens (vLLM's ``--max-model-len``)."""
    root: str | None
    """The checkpoint the served name points at (a HF id or a local path)."""


def parse_tool_call(call_id: str, name: str, raw_arguments: str | None, caps: Settings | None = None) -> ToolCall:
    """A tool call as data: parsed arguments, or the raw text and why it does not parse. With
    ``caps`` (the settings ``tool_argument_chars``, ``tool_argument_depth``), arguments too
    long or nested too deep are refused before parsing (only their
    start is kept), so no size or depth reaches the parser. The name and the arguments are made
    valid Unicode first (:func:`~emil.trust.caps.valid_json`: a lone surrogate, raw or escaped,
    becomes U+FFFD), so no tool, record or later request gets text UTF-8 cannot hold."""
    name = valid_unicode(name)
    raw = valid_unicode(raw_arguments) if raw_arguments is not None else ""
    if caps is not None:
        problem = argument_problem(raw, max_chars=caps.tool_argument_chars, max_depth=caps.tool_argument_depth)
        if problem is not None:
            return ToolCall(id=call_id, name=name, raw_arguments=raw[:200], error=problem)
    raw = valid_json(raw)
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        error=f"arguments are not valid JSON: {exc.msg} at char {exc.pos}")
    except RecursionError:
        return ToolCall(id=call_id, name=name, raw_arguments=raw[:200],
                        error="arguments are nested too deep to read")
    if not isinstance(parsed, dict):
        return ToolCall(id=call_id, name=name, raw_arguments=raw,
                        error=f"arguments must be a JSON object, got {type(parsed).__name__}")
    return ToolCall(id=call_id, name=name, raw_arguments=raw, arguments=parsed)


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    if isinstance(body, str):
        return extract_error_message(body)
    return extract_error_message(exc.message)


def _map_error(exc: Exception, *, model: str | None) -> Exception:
    """openai/httpx exception -> the policy's class (overflow / transient / configuration)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _status_message(exc)
        kind = classify_failure(status, message)
        if kind == "overflow":
            overflow = parse_overflow(message)
            assert overflow is not None  # classify_failure said so
            return OverflowRejected(overflow, status=status, server_message=message)
        if kind == "transient":
            return EndpointUnavailable(f"LLM server answered HTTP {status}: {message}",
                                       status=status)
        if kind == "rejected":
            return RequestRejected(f"the LLM server rejected this request (HTTP {status}): {message}",
                                   status=status, server_message=message)
        return EndpointConfigError(config_hint(status, message, model=model), status=status,
                                   server_message=message)
    if isinstance(exc, openai.APITimeoutError):
        return EndpointUnavailable(f"LLM request timed out: {exc}")
    if isinstance(exc, openai.APIConnectionError | httpx.TransportError | ConnectionError):
        cause = exc.__cause__ or exc
        return EndpointUnavailable(f"LLM server unreachable: {type(cause).__name__}: {cause}")
    if isinstance(exc, openai.APIError):
        # An error event inside a 200 stream (vLLM reports a failed generation that way).
        return ServerFault(f"the LLM server reported an error inside its answer: {exc}",
                           body=str(exc)[:400])
    return exc


def _is_transport_error(exc: BaseException) -> bool:
    # A connection dropped mid-stream surfaces as the SDK's transport library's own error
    # (httpx or httpx2 depending on the SDK version), not as an openai.APIError.
    module = type(exc).__module__.split(".")[0]
    return module in ("httpx", "httpx2", "httpcore", "h11") and not isinstance(exc, openai.APIError)


class OpenAIClient:
    """The live :class:`~emil.llm.types.LLM`: one vLLM (or compatible) endpoint.

    ``tool_validator`` (e.g. ``emil.world.actions.validate_tool_call``) runs on every parsed tool
    call and fills ``error`` for unknown tools or invalid arguments; it must not raise for model
    mistakes. ``headers`` go with every request (chat, ``/models``, ``/tokenize``): the session
    key a router routes on (setting ``session_header``, docs/scale-out.md). With
    ``request_id_prefix``, the n-th chat request (every attempt counts) carries
    ``X-Request-Id: <prefix>-<n>``, which vLLM takes as its request id
    (``chatcmpl-<prefix>-<n>`` in its log), so a server's log names the session of each request.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str = "EMPTY",
        timeout: float = 120.0,
        *,
        first_token_timeout: float | None = None,
        tool_validator: Callable[[ToolCall], ToolCall] | None = None,
        extra_body: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        request_id_prefix: str | None = None,
        caps: Settings | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.root_url = root_url_of(self.base_url)
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        """Seconds for a whole answer (streamed or not)."""
        self.first_token_timeout = first_token_timeout
        """Seconds until the first generated token of a streamed answer (None: no own limit)."""
        self.tool_validator = tool_validator
        self.caps = caps or Settings()
        """The settings whose caps on one answer it applies: ``tool_calls_per_answer``,
        ``tool_argument_chars``, ``tool_argument_depth`` (emil.trust.caps)."""
        self.extra_body = dict(extra_body or {})
        """Sent with every request, under each request's own ``extra_body``."""
        self.headers = dict(headers or {})
        """Sent with every request (the session key: emil.agent.startup.session_headers)."""
        self.request_id_prefix = request_id_prefix
        self.default_tool_choice: ToolChoice | None = None
        """``tool_choice`` of requests that offer tools and set none (None: the server's default,
        "auto"). tools/soak.py --tool-choice required sets it: vLLM's structured outputs then
        make even a random-weight model call tools."""
        self.requests_sent = 0
        """Chat requests sent (each attempt; the n of the last ``X-Request-Id``)."""
        self.served: ServedModel | None = None
        self._client = AsyncOpenAI(
            base_url=self.base_url, api_key=api_key, timeout=timeout, max_retries=0,
            default_headers=self.headers or None,
        )

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    async def list_models(self) -> list[ServedModel]:
        """``GET /v1/models`` as :class:`ServedModel` entries (validated: see emil.llm.response)."""
        try:
            with anyio.fail_after(self.timeout):
                body = await self._client.get("/models", cast_to=bytes, options=_REQUEST_OPTIONS)
        except TimeoutError as exc:
            raise EndpointUnavailable(f"GET /models: no answer within {self.timeout:g} s") from exc
        except (openai.APIError, httpx.TransportError, ConnectionError) as exc:
            mapped = _map_error(exc, model=self.model)
            if mapped is exc:
                raise
            raise mapped from exc
        return [ServedModel(id=i, root=root, max_model_len=window)
                for i, root, window in parse_models(body)]

    async def discover(self) -> ServedModel:
        """Find the configured model (None or "auto": the only one served) and its window.

        Raises :class:`ModelNotServedError` listing what the server does serve.
        """
        served = await self.list_models()
        if not served:
            raise ModelNotServedError(f"{self.base_url}/models lists no models at all")
        listing = ", ".join(f"{s.id} (root {s.root}, window {s.max_model_len})" for s in served)
        if self.model in (None, "auto"):
            if len(served) > 1:
                raise ModelNotServedError(
                    f"model is 'auto' but {self.base_url} serves several: {listing}. Set model "
                    "(EMIL_MODEL / --model) to one of these ids."
                )
            chosen = served[0]
        else:
            matches = [s for s in served if self.model in (s.id, s.root)]
            if not matches:
                raise ModelNotServedError(
                    f"model {self.model!r} is not served at {self.base_url}; it serves: "
                    f"{listing}. Set model (EMIL_MODEL / --model) to one of these ids or 'auto'."
                )
            chosen = matches[0]
        self.served = chosen
        self.model = chosen.id
        _log.info("llm: %s serves %s (root %s), window %s tokens", self.base_url, chosen.id,
                  chosen.root, chosen.max_model_len)
        return chosen

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        extra: dict[str, Any] = dict(self.extra_body)
        template_kwargs = dict(extra.get("chat_template_kwargs") or {})
        template_kwargs["enable_thinking"] = request.enable_thinking
        if request.preserve_thinking is not None:
            template_kwargs["preserve_thinking"] = request.preserve_thinking
        if request.top_k is not None:
            extra["top_k"] = request.top_k
        for key, value in request.extra_body.items():
            if key == "chat_template_kwargs" and isinstance(value, dict):
                template_kwargs.update(value)
            else:
                extra[key] = value
        extra["chat_template_kwargs"] = template_kwargs
        return extra

    def _tool_call(self, call_id: str, name: str, raw: str | None) -> ToolCall:
        call = parse_tool_call(call_id, name, raw, self.caps)
        if call.error is None and self.tool_validator is not None:
            call = self.tool_validator(call)
        return call

    async def complete(self, request: ChatRequest) -> Completion:
        """Send one request (streamed when ``request.stream``) and return the completion.

        Raises :class:`OverflowRejected`, :class:`EndpointUnavailable` (including either time
        limit running out), :class:`EndpointConfigError` or :class:`ServerFault`.
        """
        if self.model in (None, "auto"):
            await self.discover()
        started = time.perf_counter()
        now = anyio.current_time()
        whole_by = now + self.timeout
        ttft = self.first_token_timeout if request.stream else None
        # One scope, two deadlines: until the first token arrives the earlier one applies.
        scope = anyio.CancelScope(deadline=whole_by if ttft is None else min(whole_by, now + ttft))
        waiting_first = ttft is not None

        def first_token() -> None:
            nonlocal waiting_first
            waiting_first = False
            scope.deadline = whole_by

        try:
            with scope:
                if request.stream:
                    return await self._complete_streaming(request, started, first_token)
                return await self._complete_once(request, started)
        except (openai.APIError, httpx.TransportError, ConnectionError) as exc:
            mapped = _map_error(exc, model=self.model)
            if mapped is exc:
                raise
            raise mapped from exc
        except Exception as exc:
            if _is_transport_error(exc):
                raise EndpointUnavailable(
                    f"LLM connection dropped: {type(exc).__name__}: {exc}"
                ) from exc
            raise
        if waiting_first and ttft is not None and ttft < self.timeout:
            raise EndpointUnavailable(
                f"LLM server sent no first token within {ttft:g} s (first_token_timeout_s)"
            )
        raise EndpointUnavailable(
            f"LLM server did not finish its answer within {self.timeout:g} s (request_timeout_s)"
        )

    def _request_body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body exactly as ``chat.completions.create`` would send it.

        Same keys in the same order (the SDK's parameter order, then the extra body merged over
        it, extra keys winning), unset options absent rather than null, so the bytes on the wire
        match the SDK path's.
        """
        body: dict[str, Any] = {"model": self.model}
        if stream:
            body["stream"] = True
        body["messages"] = request.messages
        body["max_completion_tokens"] = request.max_completion_tokens
        if stream:
            body["stream_options"] = {"include_usage": True}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        tool_choice = request.tool_choice
        if tool_choice is None and request.tools:
            tool_choice = self.default_tool_choice
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        if request.tools:
            body["tools"] = request.tools
        if request.top_p is not None:
            body["top_p"] = request.top_p
        body.update(self._body(request))
        return body

    def _options(self) -> RequestOptions:
        """The API key as a bearer token; the next request id when there is a prefix."""
        self.requests_sent += 1
        if self.request_id_prefix is None:
            return _REQUEST_OPTIONS
        return {**_REQUEST_OPTIONS,
                "headers": {"X-Request-Id": f"{self.request_id_prefix}-{self.requests_sent}"}}

    # The two sends below are the only I/O of a completion; tools/bench_client.py overrides them
    # with the SDK's create() to measure what the transform costs.
    async def _post(self, request: ChatRequest) -> bytes:
        """POST the body as built, without the SDK's per-message transform (see module doc);
        the answer's bytes are validated by :func:`emil.llm.response.parse_completion`."""
        return await self._client.post(_PATH, body=self._request_body(request, stream=False),
                                       cast_to=bytes, options=self._options())

    async def _post_streaming(self, request: ChatRequest) -> AsyncStream[object]:
        """The streamed POST (SSE chunks, usage in the last one), also without the transform;
        each chunk arrives as the decoded JSON and is validated by :class:`StreamAssembler`."""
        return await self._client.post(
            _PATH, body=self._request_body(request, stream=True), cast_to=object,
            options=self._options(), stream=True, stream_cls=AsyncStream[object],
        )

    async def _complete_once(self, request: ChatRequest, started: float) -> Completion:
        body = await self._post(request)
        return parse_completion(body, tool_call=self._tool_call, max_tool_calls=self.caps.tool_calls_per_answer,
                                total_s=time.perf_counter() - started)

    async def _complete_streaming(
        self, request: ChatRequest, started: float, on_first_token: Callable[[], None]
    ) -> Completion:
        stream = await self._post_streaming(request)
        assembler = StreamAssembler(max_tool_calls=self.caps.tool_calls_per_answer)
        first_token: float | None = None
        async with stream:
            try:
                async for raw in stream:
                    if assembler.add(raw) and first_token is None:
                        first_token = time.perf_counter() - started
                        on_first_token()
            except ValueError as exc:  # an SSE data line that is not JSON
                raise ServerFault(f"the LLM server's stream holds a line that is not JSON: {exc}",
                                  body=str(exc)[:400]) from None
        timings = Timings(total_s=time.perf_counter() - started, first_token_s=first_token)
        return assembler.finish(tool_call=self._tool_call, timings=timings)

    async def count_prompt_tokens(self, request: ChatRequest) -> int | None:
        """The server's exact count of ``request``'s prompt (``POST /tokenize``), or None.

        The HTTP side is the context area's :class:`~emil.model.tokens.ServerTokenizeCounter`.

        Suitable as ``count_exact`` for :func:`emil.llm.recovery.complete_with_recovery`: a failure
        to count is not an error, the policy then shrinks past the lower bound instead.
        """
        if self.model in (None, "auto"):
            return None
        assert self.model is not None
        counter = ServerTokenizeCounter(self.base_url, self.model, timeout=self.timeout,
                                        api_key=self.api_key, headers=self.headers)
        try:
            return await counter.count_prompt(
                request.messages, request.tools, enable_thinking=request.enable_thinking,
                preserve_thinking=request.preserve_thinking,
            )
        except (EmilError, httpx.HTTPError, ValueError, KeyError) as exc:
            _log.warning("llm: /tokenize failed, keeping the lower bound: %s", exc)
            return None

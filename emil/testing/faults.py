"""Fault modes of the vLLM-dialect DOUBLE: a misbehaving server, on purpose, for tests and chaos.

Each :class:`Fault` is an explicit setting of the double (constructor ``faults=``, or at run
time :meth:`VLLMDouble.inject`, or over HTTP ``POST /_double/faults`` when the double runs in
its own process). A fault applies to the next ``times`` chat requests, or to every chat request
for ``for_s`` seconds, or both (whichever ends first); ``times=None`` with no ``for_s`` means
until cleared (``DELETE /_double/faults``).

========================  =======================================================================
kind                      what the chat endpoint does
========================  =======================================================================
``invalid_json``          200, ``application/json``, a body that is not JSON
``empty_choices``         200, a completion with ``choices: []``
``html``                  200, an HTML error page from a "proxy"
``no_message``            200, a choice without a message (streamed: without a delta)
``wrong_types``           200, ``content`` a number and ``prompt_tokens`` a string
``truncated_stream``      200, a few chunks, then the stream ends cleanly without a finish
                          (non-streamed: half a JSON body)
``hang``                  no answer for ``delay_s`` (default an hour; ends when the client leaves)
``slow_first_token``      the first generated token only after ``delay_s`` (non-streamed: late)
``status``                HTTP ``status`` (default 503) with ``message``
``drop``                  the connection dies mid-response
``model_gone``            the served model is another one: 404 "does not exist", and
                          ``/v1/models`` lists the other id
``no_tool_choice``        vLLM's 400 for "auto" tool choice without --enable-auto-tool-choice
``refuse``                the port refuses connections for ``for_s`` seconds (weights loading)
========================  =======================================================================
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

__all__ = ["FAULT_KINDS", "Fault", "FaultBook", "FaultKind", "malformed_body", "malformed_chunks"]

FaultKind = Literal[
    "invalid_json", "empty_choices", "html", "no_message", "wrong_types", "truncated_stream",
    "hang", "slow_first_token", "status", "drop", "model_gone", "no_tool_choice", "refuse",
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True)
class Fault:
    """One fault mode and how long it lasts (see the module docstring)."""

    kind: FaultKind
    times: int | None = 1
    """Chat requests it applies to (None: any number, within ``for_s`` or until cleared)."""
    for_s: float | None = None
    """Seconds from injection it applies for (None: no time limit)."""
    delay_s: float = 3600.0
    """``hang`` / ``slow_first_token``: how long the answer waits."""
    status: int = 503
    message: str = "Service Unavailable"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        """A fault from ``POST /_double/faults`` (unknown kinds are refused with ValueError)."""
        kind = data.get("kind")
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(FAULT_KINDS)}")
        fields = {k: data[k] for k in ("times", "for_s", "delay_s", "status", "message") if k in data}
        return cls(kind=kind, **fields)


@dataclass
class _Active:
    fault: Fault
    until: float | None
    left: int | None


@dataclass
class FaultBook:
    """The faults in force, consumed one chat request at a time (thread-safe)."""

    active: list[_Active] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=dict)
    """How many chat requests each kind has hit (for ``GET /_double/stats``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fault: Fault) -> None:
        until = None if fault.for_s is None else time.monotonic() + fault.for_s
        with self._lock:
            self.active.append(_Active(fault, until, fault.times))

    def clear(self) -> None:
        with self._lock:
            self.active.clear()

    def _live(self) -> list[_Active]:
        now = time.monotonic()
        self.active = [a for a in self.active
                       if (a.until is None or now < a.until) and (a.left is None or a.left > 0)]
        return self.active

    def peek(self, kind: FaultKind) -> bool:
        """True while a fault of ``kind`` is in force (without consuming it)."""
        with self._lock:
            return any(a.fault.kind == kind for a in self._live())

    def take(self) -> Fault | None:
        """The fault for the next chat request (oldest first), consuming one of its ``times``."""
        with self._lock:
            live = self._live()
            if not live:
                return None
            first = live[0]
            if first.left is not None:
                first.left -= 1
            self.applied[first.fault.kind] = self.applied.get(first.fault.kind, 0) + 1
            return first.fault


_HTML = (
    "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>\n"
    "<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx (a proxy in front of the "
    "vLLM-dialect DOUBLE)</center>\n</body></html>\n"
)


def _completion(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": "fault",
            "choices": choices,
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


def malformed_body(kind: FaultKind) -> tuple[bytes, str]:
    """The body and content type a non-streamed request gets for a malformed-200 ``kind``."""
    if kind == "invalid_json":
        return b'{"id": "chatcmpl-fault", "choices": [{"index": 0, "message": {"content": "hal', "application/json"
    if kind == "html":
        return _HTML.encode(), "text/html"
    if kind == "empty_choices":
        return json.dumps(_completion([])).encode(), "application/json"
    if kind == "no_message":
        return json.dumps(_completion([{"index": 0, "finish_reason": "stop"}])).encode(), "application/json"
    if kind == "wrong_types":
        body = _completion([{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": 42}}],
                           {"prompt_tokens": "many", "completion_tokens": 1})
        return json.dumps(body).encode(), "application/json"
    if kind == "truncated_stream":
        whole = json.dumps(_completion([{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": "a long answer"}}]))
        return whole[: len(whole) // 2].encode(), "application/json"
    raise ValueError(f"{kind} is not a malformed-body fault")


def malformed_chunks(kind: FaultKind) -> list[str]:
    """The SSE lines a streamed request gets for a malformed-200 ``kind`` (the stream then ends)."""
    base = {"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": 0, "model": "fault"}

    def data(payload: object) -> str:
        return f"data: {json.dumps(payload)}\n\n"

    role = data({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    if kind == "invalid_json":
        return [role, 'data: {"choices": [{"delta": {"content": "hal\n\n']
    if kind == "html":
        return [_HTML]
    if kind == "empty_choices":
        return [data({**base, "choices": []}), "data: [DONE]\n\n"]
    if kind == "no_message":
        return [role, data({**base, "choices": [{"index": 0, "finish_reason": "stop"}]}), "data: [DONE]\n\n"]
    if kind == "wrong_types":
        return [role, data({**base, "choices": [{"index": 0, "delta": {"content": 42}, "finish_reason": "stop"}]}),
                "data: [DONE]\n\n"]
    if kind == "truncated_stream":
        return [role] + [data({**base, "choices": [{"index": 0, "delta": {"content": w}}]})
                         for w in ("a ", "long ", "answer ")]
    raise ValueError(f"{kind} is not a malformed-body fault")

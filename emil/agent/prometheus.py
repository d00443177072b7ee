"""Prometheus metrics of a live session, fed by the session's own records.

The agent loop makes no metrics calls: :class:`Metrics` observes every record the
:class:`~emil.recording.Recorder` writes (``recorder.add_observer(metrics.observe)``), so what
the dashboard shows is what the recording holds. :func:`serve_metrics` serves them on loopback
(``metrics_address``, default 127.0.0.1:9477; ``off`` turns it off) at ``/metrics``.

Naming follows vLLM's ``/metrics`` (the neighbour on the operator's dashboard): an ``emil:``
prefix, base units in names (``_seconds``, ``_tokens``), counters ending in ``_total``, and
labels with few values only. Every sample served carries the NPC's name (``npc="Mira"``, its
``bot_name``), so a fleet's metrics stay apart on one dashboard (docs/fleet.md); the metrics
themselves are kept without it. Label values that come from data (a tool name the model wrote, a
rung or reflex name) are bounded: an unknown tool is ``unknown``, and beyond
:data:`MAX_LABEL_VALUES` values of one label the rest count as ``other``.

What each metric is fed from:

====================================================  ===========================================
metric                                                record
====================================================  ===========================================
``emil:turn_latency_seconds`` (histogram)             turn: event -> first action dispatched
``emil:turns_total``, ``emil:turn_steps_total``       turn
``emil:prompt_predicted_tokens`` (gauge)              request: Emil's exact count, last request
``emil:prompt_actual_tokens`` (gauge)                 completion: the server's prompt_tokens
``emil:prompt_calibration_error_tokens`` (histogram)  completion - its request: actual - predicted
``emil:prompt_tokens_total``                          request (first attempts): predicted tokens
``emil:prompt_shared_prefix_tokens_total``            request: tokens shared with the previous one
``emil:prompt_cached_tokens_total``                   completion: the server's cached_tokens
``emil:trims_total{rung}``                            trim
``emil:trim_freed_tokens_total{rung}``                trim
``emil:overflows_total``                              overflow (a 400 or a clamped length finish)
``emil:overflow_recoveries_total``                    recovery (a strictly smaller retry)
``emil:overflow_gave_up_total``                       error ContextOverflowError (where=llm): a turn
                                                      whose prompt could not be made to fit
``emil:llm_requests_total``                           request (every attempt)
``emil:llm_request_duration_seconds`` (histogram)     completion: model wall time
``emil:completion_tokens_total``                      completion
``emil:llm_endpoint_up`` (gauge)                      0 at service down (llm endpoint), 1 at up or a completion
``emil:llm_endpoint_outages_total``                   service down (llm endpoint)
``emil:service_retries_total{service}``               retry: a failed attempt while a service is
                                                      away (service: llm, world)
``emil:summary_requests_total{outcome}``              summary: the summarise rung's requests
                                                      (ready, invalid, failed, cancelled)
``emil:summary_prompt_tokens_total``,                 summary: tokens of those requests (they
``emil:summary_completion_tokens_total``              load vLLM like turns do)
``emil:llm_errors_total{error}``                      error where=llm
``emil:tool_calls_total{tool,outcome}``               tool_result
``emil:events_total{priority}``                       event
``emil:reflex_firings_total{reflex}``                 event kind=reflex
``emil:world_connected`` (gauge)                      0 at disconnected/kicked or service down (minecraft
                                                      server), 1 at respawn or service up
``emil:world_disconnects_total{kind}``                event kind=disconnected|kicked
``emil:world_reconnects_total``                       service up (minecraft server): back after an
                                                      outage
``emil:errors_total{where}``                          error
``emil:session_info{bot_name,model_name,...}``        header
====================================================  ===========================================
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel

from emil import __version__
from emil.config import parse_address
from emil.exceptions import ConfigurationError
from emil.recording import (
    CONFIRMED_COMMAND,
    CompletionRecord,
    ErrorRecord,
    EventRecord,
    HeaderRecord,
    OverflowRecord,
    RecoveryRecord,
    RequestRecord,
    RetryRecord,
    ServiceRecord,
    SummaryRecord,
    ToolResultRecord,
    TrimRecord,
    TurnRecord,
)

__all__ = ["MAX_LABEL_VALUES", "Metrics", "MetricsServer", "serve_metrics"]

_log = logging.getLogger(__name__)

MAX_LABEL_VALUES = 32
"""Distinct values one data-derived label may take; the rest count as ``other``."""

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
_REQUEST_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
_ERROR_BUCKETS = (-1024.0, -256.0, -64.0, -16.0, -4.0, -1.0, 0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)
_SERVICES = {"llm endpoint": "llm", "minecraft server": "world"}
"""The services of the one backoff (emil.backoff), as label values."""
_SAFE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class _Bounded:
    """Label values from data, capped at :data:`MAX_LABEL_VALUES` distinct ones."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, value: object) -> str:
        text = str(value) if value is not None else ""
        if not _SAFE.match(text):
            return "other"
        if text not in self._seen:
            if len(self._seen) >= MAX_LABEL_VALUES:
                return "other"
            self._seen.add(text)
        return text


class Metrics:
    """The session's metrics in their own registry; :meth:`observe` takes every record."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.turn_latency = Histogram(
            "emil:turn_latency_seconds", "Turn latency: the triggering game event to the first action dispatched.",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.turns = Counter("emil:turns", "Turns finished.", registry=r)
        self.turn_steps = Counter("emil:turn_steps", "Model calls made by finished turns.", registry=r)
        self.predicted = Gauge("emil:prompt_predicted_tokens", "Emil's exact count of the latest request's prompt.", registry=r)
        self.actual = Gauge("emil:prompt_actual_tokens", "The server's usage.prompt_tokens of the latest completion.", registry=r)
        self.calibration = Histogram(
            "emil:prompt_calibration_error_tokens", "Server prompt tokens minus Emil's prediction, per completion.",
            buckets=_ERROR_BUCKETS, registry=r,
        )
        self.prompt_tokens = Counter("emil:prompt_tokens", "Predicted prompt tokens of first attempts.", registry=r)
        self.shared_prefix = Counter(
            "emil:prompt_shared_prefix_tokens", "Leading prompt tokens shared with the previous request (prefix-cache reuse).",
            registry=r,
        )
        self.cached = Counter("emil:prompt_cached_tokens", "Prompt tokens the server reported as cached.", registry=r)
        self.trims = Counter("emil:trims", "Trim-ladder rungs that fired.", ["rung"], registry=r)
        self.trim_freed = Counter("emil:trim_freed_tokens", "Prompt tokens freed by trims.", ["rung"], registry=r)
        self.overflows = Counter("emil:overflows", "Requests the server refused or clamped for size.", registry=r)
        self.recoveries = Counter("emil:overflow_recoveries", "Strictly smaller retries after an overflow.", registry=r)
        self.gave_up = Counter("emil:overflow_gave_up", "Turns ended because the prompt could not be made to fit.", registry=r)
        self.requests = Counter("emil:llm_requests", "Chat requests sent (every attempt).", registry=r)
        self.request_duration = Histogram(
            "emil:llm_request_duration_seconds", "Model wall time per completed request.", buckets=_REQUEST_BUCKETS, registry=r,
        )
        self.completion_tokens = Counter("emil:completion_tokens", "Completion tokens generated.", registry=r)
        self.endpoint_up = Gauge("emil:llm_endpoint_up", "1 while the LLM endpoint answers, 0 after it failed.", registry=r)
        self.outages = Counter("emil:llm_endpoint_outages", "Times the LLM endpoint became unavailable.", registry=r)
        self.retries = Counter(
            "emil:service_retries", "Failed attempts while a service was away.", ["service"], registry=r
        )
        self.summaries = Counter(
            "emil:summary_requests", "Summary requests of the summarise rung, by outcome.", ["outcome"], registry=r
        )
        self.summary_prompt = Counter("emil:summary_prompt_tokens", "Prompt tokens of summary requests.", registry=r)
        self.summary_completion = Counter(
            "emil:summary_completion_tokens", "Completion tokens of summary requests.", registry=r
        )
        self.reconnects = Counter(
            "emil:world_reconnects", "Times the Minecraft server was back after an outage.", registry=r
        )
        self.llm_errors = Counter("emil:llm_errors", "Errors of the model side, by type.", ["error"], registry=r)
        self.tool_calls = Counter("emil:tool_calls", "Tool calls by tool and outcome (tool \"command\": a command an operator confirmed).", ["tool", "outcome"], registry=r)
        self.events = Counter("emil:events", "Game events by the priority perception gave them.", ["priority"], registry=r)
        self.reflexes = Counter("emil:reflex_firings", "Reflexes that acted without the model.", ["reflex"], registry=r)
        self.world_connected = Gauge("emil:world_connected", "1 while the bot is in the world, 0 after a disconnect.", registry=r)
        self.disconnects = Counter("emil:world_disconnects", "Connections to the Minecraft server lost.", ["kind"], registry=r)
        self.errors = Counter("emil:errors", "Error records, by where they happened.", ["where"], registry=r)
        self.info = Info("emil:session", "The session: bot, served model, window, Emil's version.", registry=r)
        self._tools: set[str] = set()
        self._rung = _Bounded()
        self._reflex = _Bounded()
        self._error = _Bounded()
        self._where = _Bounded()
        self._priority = _Bounded()
        self._predicted: dict[tuple[int | None, int, int], int] = {}
        self._lock = threading.Lock()

    def observe(self, record: BaseModel) -> None:
        """Update the metrics from one record (the recorder calls this for each it writes)."""
        with self._lock:
            handler = _HANDLERS.get(type(record))
            if handler is not None:
                handler(self, record)

    def observe_all(self, records: Iterable[BaseModel]) -> None:
        for record in records:
            self.observe(record)

    # --- one method per record kind ---------------------------------------------------------

    def _header(self, r: HeaderRecord) -> None:
        self._tools = {str(t.get("function", {}).get("name")) for t in r.tools if isinstance(t, dict)}
        self.info.info({
            "bot_name": str(r.bot_name or ""), "model_name": str(r.model or ""), "window": str(r.window or ""),
            "emil_version": __version__, "session_id": r.session_id,
        })
        self.endpoint_up.set(1)
        self.world_connected.set(1)

    def _request(self, r: RequestRecord) -> None:
        self.requests.inc()
        if r.predicted_tokens is None:
            return
        self.predicted.set(r.predicted_tokens)
        self._predicted[(r.turn, r.step, r.attempt)] = r.predicted_tokens
        if len(self._predicted) > 64:  # answered or abandoned requests; keep the newest
            for key in list(self._predicted)[:-64]:
                del self._predicted[key]
        if r.attempt == 0:
            self.prompt_tokens.inc(r.predicted_tokens)
            if r.shared_prefix_tokens:
                self.shared_prefix.inc(r.shared_prefix_tokens)

    def _completion(self, r: CompletionRecord) -> None:
        self.endpoint_up.set(1)
        if r.prompt_tokens is not None:
            self.actual.set(r.prompt_tokens)
            predicted = self._predicted.pop((r.turn, r.step, r.attempt), None)
            if predicted is not None:
                self.calibration.observe(r.prompt_tokens - predicted)
        if r.cached_tokens:
            self.cached.inc(r.cached_tokens)
        if r.completion_tokens:
            self.completion_tokens.inc(r.completion_tokens)
        if r.total_s is not None:
            self.request_duration.observe(r.total_s)

    def _tool_result(self, r: ToolResultRecord) -> None:
        tool = r.name if r.name in self._tools or r.name == CONFIRMED_COMMAND else "unknown"
        self.tool_calls.labels(tool=tool, outcome="ok" if r.ok else "failed").inc()

    def _trim(self, r: TrimRecord) -> None:
        rung = self._rung(r.rung)
        self.trims.labels(rung=rung).inc()
        self.trim_freed.labels(rung=rung).inc(max(0, r.tokens_freed))

    def _overflow(self, r: OverflowRecord) -> None:
        self.overflows.inc()

    def _recovery(self, r: RecoveryRecord) -> None:
        self.recoveries.inc()

    def _error_record(self, r: ErrorRecord) -> None:
        self.errors.labels(where=self._where(r.where or "none")).inc()
        if r.error_type == "ContextOverflowError" and r.where == "llm":
            self.gave_up.inc()
        if r.where == "llm":
            self.llm_errors.labels(error=self._error(r.error_type)).inc()
            if r.error_type == "EndpointUnavailable":  # a completer without the endpoint's Patience
                self.endpoint_up.set(0)

    def _service(self, r: ServiceRecord) -> None:
        # A service's outage as the one backoff (emil.backoff) saw it: down once per episode.
        if r.service == "llm endpoint":
            if r.state == "down":
                self.outages.inc()
            self.endpoint_up.set(1 if r.state == "up" else 0)
        elif r.service == "minecraft server":
            self.world_connected.set(1 if r.state == "up" else 0)
            if r.state == "up":
                self.reconnects.inc()

    def _retry(self, r: RetryRecord) -> None:
        self.retries.labels(service=_SERVICES.get(r.service, "other")).inc()

    def _summary(self, r: SummaryRecord) -> None:
        self.summaries.labels(outcome=r.outcome).inc()
        if r.prompt_tokens:
            self.summary_prompt.inc(r.prompt_tokens)
        if r.completion_tokens:
            self.summary_completion.inc(r.completion_tokens)

    def _event(self, r: EventRecord) -> None:
        self.events.labels(priority=self._priority(r.priority or "none")).inc()
        kind = r.event.get("kind")
        if kind == "reflex":
            self.reflexes.labels(reflex=self._reflex(r.event.get("reflex"))).inc()
        elif kind in ("disconnected", "kicked"):
            self.disconnects.labels(kind=str(kind)).inc()
            self.world_connected.set(0)
        elif kind == "respawn":
            self.world_connected.set(1)

    def _turn(self, r: TurnRecord) -> None:
        self.turns.inc()
        self.turn_steps.inc(r.steps)
        if r.latency_first_action_ms is not None:
            self.turn_latency.observe(r.latency_first_action_ms / 1000.0)


_HANDLERS: dict[type[BaseModel], Any] = {
    HeaderRecord: Metrics._header,
    RequestRecord: Metrics._request,
    CompletionRecord: Metrics._completion,
    ToolResultRecord: Metrics._tool_result,
    TrimRecord: Metrics._trim,
    OverflowRecord: Metrics._overflow,
    RecoveryRecord: Metrics._recovery,
    ErrorRecord: Metrics._error_record,
    EventRecord: Metrics._event,
    ServiceRecord: Metrics._service,
    RetryRecord: Metrics._retry,
    SummaryRecord: Metrics._summary,
    TurnRecord: Metrics._turn,
}


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`close` stops it."""

    metrics: Metrics
    host: str
    port: int
    _server: Any

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Labelled(Collector):
    """Every sample of ``registry`` with ``labels`` added (the NPC's name): what is served."""

    def __init__(self, registry: CollectorRegistry, labels: Mapping[str, str]) -> None:
        self.registry = registry
        self.labels = dict(labels)

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            out = Metric(family.name, family.documentation, family.type, family.unit)
            for s in family.samples:
                out.add_sample(s.name, {**self.labels, **s.labels}, s.value, s.timestamp, s.exemplar)
            yield out


def serve_metrics(
    address: str, metrics: Metrics | None = None, *, labels: Mapping[str, str] | None = None
) -> MetricsServer | None:
    """Serve ``metrics`` (a new :class:`Metrics` if None) at ``address``; None when ``off``.
    ``labels`` (``{"npc": bot_name}``) are added to every sample served.

    A port already in use is a configuration error (another Emil, or something else, has it).
    """
    parsed = parse_address(address)
    if parsed is None:
        return None
    host, port = parsed
    metrics = metrics or Metrics()
    served = metrics.registry
    if labels:
        served = CollectorRegistry(auto_describe=False)
        served.register(_Labelled(metrics.registry, labels))
    try:
        server, _thread = start_http_server(port, addr=host, registry=served)
    except OSError as e:
        raise ConfigurationError(
            f"cannot serve metrics on {address} ({e.strerror}); set metrics_address to a free port, 0 for any, or off"
        ) from e
    actual = int(server.server_port)
    _log.info("metrics on http://%s:%d/metrics", host, actual)
    return MetricsServer(metrics, host, actual, server)

"""Decode throughput, measured the way the field notes learned to: like for like.

The default methodology is the notes' re-test: temperature 0, 256 output tokens with
``ignore_eos``, thinking off, a fresh UUID at the very start of every prompt (warm-ups too) so
the prefix cache cannot serve any of it, token counts from the response's ``usage`` (never by
re-tokenizing), three warm-ups discarded, then N measured requests one at a time.

With speculative decoding a streamed chunk carries several tokens, so per-chunk inter-token
latency is wrong; decode speed is ``(tokens - 1) / (latency - TTFT)`` from streamed requests.
``/metrics`` is scraped around the measured requests for the acceptance rate, the mean
acceptance length and the prefix-cache hits (which must not rise). Every result carries its
methodology and the server's configuration, so only like is compared with like.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

from emil.exceptions import ConfigurationError, EndpointUnavailable
from emil.llm.types import root_url_of
from emil.serving.metrics import MetricsDelta, MetricsSnapshot

__all__ = [
    "DEFAULT_PROMPT",
    "BenchResult",
    "Methodology",
    "RequestSample",
    "ServerInfo",
    "Target",
    "profile_mismatches",
    "run_target",
    "summarize",
    "warnings_for",
]

DEFAULT_PROMPT = (
    "Write a long, detailed story about a villager who builds a lighthouse on a cliff, "
    "describing every block, tool and sunrise along the way."
)
_DOUBLE_HEADER = "x-double"


@dataclass(frozen=True)
class Methodology:
    """How every request of a run is made; two results compare only if these are equal."""

    temperature: float = 0.0
    max_tokens: int = 256
    ignore_eos: bool = True
    enable_thinking: bool = False
    unique_prefix: bool = True
    """A fresh UUID starts every prompt (warm-ups too): nothing can come from the prefix cache.
    False sends the identical prompt every time, the warm-cache pitfall (the hit warning fires)."""
    warmups: int = 3
    requests: int = 10
    stream: bool = True
    """Streamed requests give TTFT and the spec-decode-safe decode speed."""
    prompt: str = DEFAULT_PROMPT
    system: str | None = None

    def body(self, model: str) -> dict[str, Any]:
        """One request body; the unique prefix goes first in the first message."""
        head = f"[{uuid.uuid4()}] " if self.unique_prefix else ""
        messages: list[dict[str, Any]] = []
        if self.system is not None:
            messages.append({"role": "system", "content": head + self.system})
            messages.append({"role": "user", "content": self.prompt})
        else:
            messages.append({"role": "user", "content": head + self.prompt})
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "ignore_eos": self.ignore_eos,
            "chat_template_kwargs": {"enable_thinking": self.enable_thinking},
            "stream": self.stream,
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, including how the figures are computed."""
        data = asdict(self)
        data["token_counts"] = "usage.completion_tokens from the server"
        data["decode_tps"] = (
            "(completion_tokens - 1) / (latency - TTFT), streamed"
            if self.stream
            else "completion_tokens / latency (includes prefill), not streamed"
        )
        return data


@dataclass(frozen=True)
class Target:
    """One endpoint or labelled config to measure."""

    label: str
    base_url: str
    """The OpenAI base (``http://host:port/v1``) or the server root."""
    model: str | None = None
    """None: the first model the server lists."""
    labels: dict[str, str] = field(default_factory=dict)
    """Operator labels (checkpoint, mtp, moe backend, ...), carried into the JSON."""
    profile: dict[str, Any] | None = None
    """The serve profile the server was started from, if known."""

    @property
    def root(self) -> str:
        """Server root (vLLM serves /health, /metrics, /version there)."""
        return root_url_of(self.base_url)


@dataclass(frozen=True)
class ServerInfo:
    """What the server says about itself."""

    model: str
    root: str | None
    max_model_len: int | None
    version: str | None
    is_double: bool
    """The server marked its responses as a vLLM-dialect double: the figures are simulated."""


@dataclass(frozen=True)
class RequestSample:
    """One measured request."""

    latency_s: float
    ttft_s: float | None
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int
    finish_reason: str | None

    @property
    def decode_tps(self) -> float | None:
        """Decode speed excluding prefill: (tokens - 1) / (latency - TTFT); needs streaming."""
        if self.ttft_s is None or self.completion_tokens < 2 or self.latency_s <= self.ttft_s:
            return None
        return (self.completion_tokens - 1) / (self.latency_s - self.ttft_s)

    @property
    def e2e_tps(self) -> float:
        """completion_tokens / latency (prefill included)."""
        return self.completion_tokens / self.latency_s if self.latency_s > 0 else 0.0


@dataclass
class BenchResult:
    """Everything measured for one target."""

    target: Target
    server: ServerInfo
    samples: list[RequestSample]
    metrics: MetricsDelta | None
    warnings: list[str]

    @property
    def headline(self) -> list[float]:
        """Per-request tok/s of the headline figure: decode_tps when streamed, else e2e."""
        decode = [s.decode_tps for s in self.samples]
        if all(d is not None for d in decode) and decode:
            return [d for d in decode if d is not None]
        return [s.e2e_tps for s in self.samples]

    @property
    def headline_kind(self) -> str:
        """Which figure :attr:`headline` is."""
        decode = [s.decode_tps for s in self.samples]
        return "decode_tps" if decode and all(d is not None for d in decode) else "e2e_tps"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (summaries and every request)."""
        ttfts = [s.ttft_s for s in self.samples if s.ttft_s is not None]
        return {
            "label": self.target.label,
            "endpoint": self.target.base_url,
            "labels": self.target.labels,
            "profile": self.target.profile,
            "server": asdict(self.server),
            "headline": self.headline_kind,
            "tok_s": summarize(self.headline),
            "e2e_tok_s": summarize([s.e2e_tps for s in self.samples]),
            "ttft_s": summarize(ttfts) if ttfts else None,
            "completion_tokens": summarize([float(s.completion_tokens) for s in self.samples]),
            "spec_decode": self.metrics.to_dict() if self.metrics is not None else None,
            "warnings": self.warnings,
            "requests": [
                {**asdict(s), "decode_tps": s.decode_tps, "e2e_tps": s.e2e_tps}
                for s in self.samples
            ],
        }


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """Median and spread of a list of figures."""
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None, "mean": None, "stdev": None}
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "mean": statistics.fmean(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def _server_info(client: httpx.Client, target: Target) -> ServerInfo:
    try:
        response = client.get(f"{target.root}/v1/models")
    except httpx.HTTPError as exc:
        raise EndpointUnavailable(f"{target.label}: {target.root} unreachable ({exc})") from exc
    if response.status_code != 200:
        raise ConfigurationError(
            f"{target.label}: GET /v1/models answered {response.status_code}: {response.text[:200]}"
        )
    is_double = _DOUBLE_HEADER in response.headers
    entries = response.json().get("data") or []
    if not entries:
        raise ConfigurationError(f"{target.label}: the server lists no models")
    entry = next((e for e in entries if e.get("id") == target.model), None)
    if entry is None:
        if target.model is not None:
            served = ", ".join(str(e.get("id")) for e in entries)
            raise ConfigurationError(
                f"{target.label}: model {target.model!r} not served ({served})"
            )
        entry = entries[0]
    version: str | None = None
    try:
        version_response = client.get(f"{target.root}/version")
        if version_response.status_code == 200:
            version = str(version_response.json().get("version"))
    except (httpx.HTTPError, json.JSONDecodeError):
        version = None
    return ServerInfo(
        model=str(entry["id"]),
        root=entry.get("root"),
        max_model_len=entry.get("max_model_len"),
        version=version,
        is_double=is_double,
    )


def _scrape(client: httpx.Client, target: Target, model: str) -> MetricsSnapshot | None:
    try:
        response = client.get(f"{target.root}/metrics")
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    return MetricsSnapshot.from_text(response.text, model=model)


def _request(client: httpx.Client, target: Target, body: dict[str, Any]) -> RequestSample:
    url = f"{target.root}/v1/chat/completions"
    start = time.perf_counter()
    if not body.get("stream"):
        response = client.post(url, json=body)
        latency = time.perf_counter() - start
        _raise_for(response, target)
        data = response.json()
        return _sample(latency, None, data.get("usage"), data["choices"][0].get("finish_reason"))
    ttft: float | None = None
    usage: dict[str, Any] | None = None
    finish: str | None = None
    with client.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            response.read()
            _raise_for(response, target)
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if ttft is None and any(
                    delta.get(k)
                    for k in ("content", "reasoning", "reasoning_content", "tool_calls")
                ):
                    ttft = time.perf_counter() - start
                finish = choice.get("finish_reason") or finish
    latency = time.perf_counter() - start
    return _sample(latency, ttft, usage, finish)


def _raise_for(response: httpx.Response, target: Target) -> None:
    if response.status_code == 200:
        return
    message = f"{target.label}: HTTP {response.status_code}: {response.text[:300]}"
    if response.status_code in (429, 502, 503, 504):
        raise EndpointUnavailable(message, status=response.status_code)
    raise ConfigurationError(message)


def _sample(
    latency: float, ttft: float | None, usage: dict[str, Any] | None, finish: str | None
) -> RequestSample:
    if not usage:
        raise ConfigurationError(
            "the response has no usage; token counts must come from the server "
            "(streaming needs stream_options.include_usage)"
        )
    details = usage.get("prompt_tokens_details") or {}
    return RequestSample(
        latency_s=latency,
        ttft_s=ttft,
        completion_tokens=int(usage.get("completion_tokens") or 0),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        finish_reason=finish,
    )


def run_target(
    target: Target,
    methodology: Methodology,
    *,
    progress: Callable[[str], None] | None = None,
    timeout_s: float = 600.0,
) -> BenchResult:
    """Warm up, scrape /metrics, run the measured requests, scrape again; summarise."""
    with httpx.Client(timeout=timeout_s) as client:
        server = _server_info(client, target)
        for _ in range(methodology.warmups):
            _request(client, target, methodology.body(server.model))
            if progress is not None:
                progress("warm-up")
        before = _scrape(client, target, server.model)
        samples: list[RequestSample] = []
        for _ in range(methodology.requests):
            samples.append(_request(client, target, methodology.body(server.model)))
            if progress is not None:
                progress("measured")
        after = _scrape(client, target, server.model)
    delta = after - before if before is not None and after is not None else None
    warnings = profile_mismatches(target, server) + warnings_for(
        server, methodology, samples, delta
    )
    return BenchResult(target, server, samples, delta, warnings)


def profile_mismatches(target: Target, server: ServerInfo) -> list[str]:
    """Where the server is not what the target's serve profile says it runs (the field notes'
    44.1 tok/s was a real measurement of the wrong checkpoint)."""
    profile = target.profile
    if not profile:
        return []
    problems: list[str] = []
    names = {str(profile.get("model")), str(profile.get("served_model_name"))}
    if server.model not in names and (server.root or "") not in names:
        problems.append(
            f"the server serves {server.model!r} (root {server.root!r}) but the profile says "
            f"{profile.get('model')!r}: this measures a different checkpoint"
        )
    window = profile.get("max_model_len")
    if window is not None and server.max_model_len is not None and window != server.max_model_len:
        problems.append(
            f"the server's window is {server.max_model_len} but the profile says {window}"
        )
    return problems


def warnings_for(
    server: ServerInfo,
    methodology: Methodology,
    samples: list[RequestSample],
    delta: MetricsDelta | None,
) -> list[str]:
    """Everything that makes a figure not comparable, as sentences for the operator."""
    warnings: list[str] = []
    if server.is_double:
        warnings.append("served by a vLLM-dialect DOUBLE (not vLLM): the figures are simulated")
    if delta is None:
        warnings.append("no /metrics: acceptance and prefix-cache hits not measured")
    else:
        hits = delta.prefix_cache_hits
        if hits:
            warnings.append(
                f"prefix-cache hits rose by {hits:.0f} tokens during the run: part of the "
                "prompts came from cache and the throughput is inflated"
            )
        if delta.acceptance_rate is None:
            warnings.append("no speculative-decoding drafts during the run (MTP off or absent)")
    cached = sum(s.cached_tokens for s in samples)
    if cached and not (delta and delta.prefix_cache_hits):
        warnings.append(f"usage reports {cached} cached prompt tokens over the run")
    short = [s for s in samples if s.completion_tokens != methodology.max_tokens]
    if short and methodology.ignore_eos:
        warnings.append(
            f"{len(short)}/{len(samples)} requests did not return exactly "
            f"{methodology.max_tokens} tokens (ignore_eos not honoured?)"
        )
    if methodology.stream and any(s.ttft_s is None for s in samples):
        warnings.append("some streamed requests had no token chunk: TTFT unknown")
    return warnings

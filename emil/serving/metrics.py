"""vLLM's Prometheus ``/metrics`` -> the counters a benchmark needs, and their deltas.

Speculative decoding (vLLM names): acceptance rate = accepted / draft tokens, mean acceptance
length = 1 + accepted / drafts, per-position acceptance = accepted at position i / drafts.
Counters only ever grow, so a run is measured as the difference of two snapshots taken around
it. Prefix-cache hits rising during a benchmark mean the cache served part of the prompts and
the throughput figure is inflated (up to 86% in public trackers).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MetricsDelta", "MetricsSnapshot", "parse_prometheus"]

_LINE_RE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)"
)
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

# Current names first, then older spellings (vLLM v1 before the rename used gpu_prefix_cache_*).
_NAMES: dict[str, tuple[str, ...]] = {
    "drafts": ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts"),
    "draft_tokens": (
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_draft_tokens",
    ),
    "accepted": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens",
    ),
    "prefix_queries": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:prefix_cache_queries",
    ),
    "prefix_hits": (
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:prefix_cache_hits",
    ),
    "generation_tokens": ("vllm:generation_tokens_total", "vllm:generation_tokens"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "vllm:prompt_tokens"),
}
_PER_POS = (
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
)


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample in a Prometheus text exposition as (name, labels, value)."""
    samples: list[tuple[str, dict[str, str], float]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE_RE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        labels = dict(_LABEL_RE.findall(match.group("labels") or ""))
        samples.append((match.group("name"), labels, value))
    return samples


@dataclass(frozen=True)
class MetricsSnapshot:
    """The counters of one scrape, summed over label sets (engines), optionally for one model."""

    counters: dict[str, float]
    """Keys: drafts, draft_tokens, accepted, prefix_queries, prefix_hits, generation_tokens,
    prompt_tokens; a key is absent when the server does not export it."""
    per_position: dict[int, float] = field(default_factory=dict)

    @classmethod
    def from_text(cls, text: str, *, model: str | None = None) -> MetricsSnapshot:
        """Parse a scrape; ``model`` keeps only samples labelled with that model_name."""
        samples = [
            s
            for s in parse_prometheus(text)
            if model is None or s[1].get("model_name") in (None, model)
        ]
        counters: dict[str, float] = {}
        for key, names in _NAMES.items():
            for name in names:
                values = [v for n, _, v in samples if n == name]
                if values:
                    counters[key] = math.fsum(values)
                    break
        per_pos: dict[int, float] = {}
        for name in _PER_POS:
            found = [(labels, v) for n, labels, v in samples if n == name]
            for labels, v in found:
                pos = int(labels.get("position", "0"))
                per_pos[pos] = per_pos.get(pos, 0.0) + v
            if found:
                break
        return cls(counters, per_pos)

    def __sub__(self, earlier: MetricsSnapshot) -> MetricsDelta:
        keys = self.counters.keys() & earlier.counters.keys()
        positions = self.per_position.keys() & earlier.per_position.keys()
        return MetricsDelta(
            {k: self.counters[k] - earlier.counters[k] for k in keys},
            {p: self.per_position[p] - earlier.per_position[p] for p in sorted(positions)},
        )


@dataclass(frozen=True)
class MetricsDelta:
    """What the counters did during a run."""

    counters: dict[str, float]
    per_position: dict[int, float]

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted draft tokens / proposed draft tokens (None without speculation)."""
        drafted = self.counters.get("draft_tokens", 0.0)
        return self.counters.get("accepted", 0.0) / drafted if drafted > 0 else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """Tokens per decode step: 1 + accepted / drafts (None without speculation)."""
        drafts = self.counters.get("drafts", 0.0)
        return 1.0 + self.counters.get("accepted", 0.0) / drafts if drafts > 0 else None

    @property
    def per_position_acceptance(self) -> list[float]:
        """Share of drafts whose i-th token was accepted, by position."""
        drafts = self.counters.get("drafts", 0.0)
        if drafts <= 0:
            return []
        return [self.per_position[p] / drafts for p in sorted(self.per_position)]

    @property
    def prefix_cache_hits(self) -> float | None:
        """Prompt tokens the prefix cache served during the run (None if not exported)."""
        return self.counters.get("prefix_hits")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "counters": self.counters,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "per_position_acceptance": self.per_position_acceptance,
            "prefix_cache_hit_tokens": self.prefix_cache_hits,
            "prefix_cache_query_tokens": self.counters.get("prefix_queries"),
        }

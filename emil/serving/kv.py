"""KV cache capacity from a model's config.json: tokens held by N bytes, and a window's share.

The field notes pinned the KV cache by bytes (8 GiB) rather than by tokens, so raising the
served window from 32,768 to 65,536 cost almost nothing: the pin held hundreds of thousands of
tokens. This module does that arithmetic for any config:

- bytes per token = 2 (K and V) x full-attention layers x KV heads x head dim x KV dtype bytes
  (MLA models store one latent of ``kv_lora_rank + qk_rope_head_dim`` per layer instead);
- only *full*-attention layers grow with the context. Hybrid models (Qwen3.5/3.6, Qwen3-Next:
  ``layer_types`` or ``full_attention_interval``; Nemotron-H: ``hybrid_override_pattern``) keep
  a fixed recurrent state per sequence in their linear-attention / Mamba layers, and sliding-
  window layers hold at most their window. Both are a per-sequence cost, not a per-token one;
- the MTP draft head's own attention layer(s) hold KV too when speculative decoding is on.

It is the ideal arithmetic: vLLM's paged allocator adds block rounding (and, per version,
reports "GPU KV cache size" in its own way), so the engine's log line can differ by a few
percent to a few tens of percent; the order of magnitude and the share are what this is for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from emil.exceptions import ConfigurationError

__all__ = ["KVCapacity", "KVLayout", "dtype_bytes", "kv_capacity", "parse_bytes"]

_DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "float8_e4m3fn": 1,
    "int8": 1,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name as vLLM or a config.json spells it."""
    key = dtype.lower().removeprefix("torch.")
    if key not in _DTYPE_BYTES:
        raise ConfigurationError(
            f"unknown dtype {dtype!r}; known: {', '.join(sorted(_DTYPE_BYTES))}"
        )
    return _DTYPE_BYTES[key]


_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtT]?)(i?)([bB]?)\s*$")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_bytes(text: str | int) -> int:
    """Parse a byte size: ``8GiB`` (binary), ``8GB`` (decimal), or vLLM's own convention.

    vLLM's ``--kv-cache-memory-bytes`` reads upper-case suffixes as binary (``8G`` = 8 GiB) and
    lower-case as decimal (``8g`` = 8e9); a profile passes the same string, so we read it the
    same way.
    """
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(text)
    if match is None:
        raise ConfigurationError(f"not a byte size: {text!r} (try 8GiB, 8GB, 8G or 8589934592)")
    number, unit, binary_i, byte_b = match.groups()
    power = _POWERS[unit.lower()]
    base = 1024 if binary_i or (byte_b == "" and unit.isupper()) else 1000
    return int(float(number) * base**power)


@dataclass(frozen=True)
class KVLayout:
    """What a model's config says about the memory its sequences need."""

    model_type: str
    num_layers: int
    full_attention_layers: int
    sliding_attention_layers: int
    sliding_window: int | None
    recurrent_layers: int
    """Linear-attention (Gated DeltaNet) or Mamba layers: fixed state per sequence."""
    kv_heads: int
    head_dim: int
    kv_elements_per_layer_token: int
    """Elements of KV per layer per token (2 x heads x head_dim, or the MLA latent)."""
    draft_layers: int
    """Attention layers of the MTP / next-n draft head (hold KV only with speculation on)."""
    recurrent_state_elements: tuple[int, int]
    """Per recurrent layer per sequence: (conv state elements, SSM state elements)."""
    model_dtype: str
    ssm_dtype: str

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> KVLayout:
        """Read a HF config.json dict (a multimodal wrapper's ``text_config`` is used first)."""
        text = config.get("text_config")
        cfg: dict[str, Any] = {**config, **text} if isinstance(text, dict) else dict(config)
        model_type = str(cfg.get("model_type", "unknown"))
        num_layers = _int(cfg, "num_hidden_layers")
        kinds = _layer_kinds(cfg, num_layers)
        heads = _int(cfg, "num_attention_heads")
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or _int(cfg, "hidden_size") // heads)
        if cfg.get("kv_lora_rank"):
            per_layer = int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)
        else:
            per_layer = 2 * kv_heads * head_dim
        model_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        ssm_dtype = str(
            cfg.get("mamba_ssm_dtype") or cfg.get("mamba_ssm_cache_dtype") or model_dtype
        )
        draft = int(cfg.get("mtp_num_hidden_layers") or cfg.get("num_nextn_predict_layers") or 0)
        recurrent = kinds.count("recurrent")
        return cls(
            model_type=model_type,
            num_layers=num_layers,
            full_attention_layers=kinds.count("full"),
            sliding_attention_layers=kinds.count("sliding"),
            sliding_window=int(cfg["sliding_window"]) if cfg.get("sliding_window") else None,
            recurrent_layers=recurrent,
            kv_heads=kv_heads,
            head_dim=head_dim,
            kv_elements_per_layer_token=per_layer,
            draft_layers=draft,
            recurrent_state_elements=_recurrent_state(cfg) if recurrent else (0, 0),
            model_dtype=model_dtype,
            ssm_dtype=ssm_dtype,
        )

    def bytes_per_token(self, kv_dtype: str = "auto", *, with_draft: bool = False) -> int:
        """KV bytes one token costs across all full-attention layers (and the draft's)."""
        layers = self.full_attention_layers + (self.draft_layers if with_draft else 0)
        return layers * self.kv_elements_per_layer_token * self._kv_bytes(kv_dtype)

    def fixed_bytes_per_sequence(
        self, window: int, kv_dtype: str = "auto", state_dtype: str | None = None
    ) -> int:
        """Bytes a sequence costs regardless of its length: recurrent state + sliding windows."""
        conv, ssm = self.recurrent_state_elements
        state = self.recurrent_layers * (
            conv * dtype_bytes(self.model_dtype) + ssm * dtype_bytes(state_dtype or self.ssm_dtype)
        )
        sliding_tokens = min(window, self.sliding_window or window)
        sliding = (
            self.sliding_attention_layers
            * sliding_tokens
            * self.kv_elements_per_layer_token
            * self._kv_bytes(kv_dtype)
        )
        return state + sliding

    def _kv_bytes(self, kv_dtype: str) -> int:
        return dtype_bytes(self.model_dtype if kv_dtype == "auto" else kv_dtype)


def _int(cfg: dict[str, Any], key: str) -> int:
    value = cfg.get(key)
    if value is None:
        raise ConfigurationError(f"config.json has no {key!r}; cannot size the KV cache")
    return int(value)


def _layer_kinds(cfg: dict[str, Any], num_layers: int) -> list[str]:
    """One of full / sliding / recurrent per layer."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        # Nemotron-H: M = Mamba2, * = attention, - / E = MLP / MoE (no cache at all).
        kinds = ["recurrent" if c == "M" else "full" if c == "*" else "none" for c in pattern]
        return kinds
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        if len(layer_types) != num_layers:
            raise ConfigurationError(
                f"layer_types has {len(layer_types)} entries for {num_layers} layers"
            )
        return [_kind(str(t)) for t in layer_types]
    interval = cfg.get("full_attention_interval")
    if interval:
        # Qwen3-Next / Qwen3.5 convention: every interval-th layer (1-based) is full attention.
        return ["full" if (i + 1) % int(interval) == 0 else "recurrent" for i in range(num_layers)]
    return ["full"] * num_layers


def _kind(layer_type: str) -> str:
    lowered = layer_type.lower()
    if "sliding" in lowered or "local" in lowered or "chunked" in lowered:
        return "sliding"
    if "linear" in lowered or "mamba" in lowered or "deltanet" in lowered:
        return "recurrent"
    return "full"


def _recurrent_state(cfg: dict[str, Any]) -> tuple[int, int]:
    """Per-layer (conv, ssm) state elements for Gated DeltaNet or Mamba2 layers."""
    if cfg.get("linear_num_value_heads"):
        kernel = int(cfg.get("linear_conv_kernel_dim") or 4)
        k_heads, k_dim = int(cfg["linear_num_key_heads"]), int(cfg["linear_key_head_dim"])
        v_heads, v_dim = int(cfg["linear_num_value_heads"]), int(cfg["linear_value_head_dim"])
        conv_dim = 2 * k_heads * k_dim + v_heads * v_dim
        return (kernel - 1) * conv_dim, v_heads * k_dim * v_dim
    if cfg.get("mamba_num_heads") or cfg.get("ssm_state_size"):
        heads = int(cfg.get("mamba_num_heads") or 0)
        head_dim = int(cfg.get("mamba_head_dim") or 0)
        state = int(cfg.get("ssm_state_size") or 0)
        groups = int(cfg.get("n_groups") or 1)
        kernel = int(cfg.get("conv_kernel") or 4)
        conv_dim = heads * head_dim + 2 * groups * state
        return (kernel - 1) * conv_dim, heads * head_dim * state
    raise ConfigurationError(
        "hybrid layers found but no linear-attention or Mamba state sizes in config.json"
    )


@dataclass(frozen=True)
class KVCapacity:
    """How a KV cache of ``cache_bytes`` serves ``concurrency`` sequences of ``window`` tokens."""

    cache_bytes: int
    kv_dtype: str
    bytes_per_token: int
    fixed_bytes_per_sequence: int
    tokens_held: int
    """Context tokens the cache holds in total with ``concurrency`` sequences resident."""
    tokens_held_no_state: int
    """cache_bytes / bytes_per_token: the naive figure, ignoring per-sequence state."""
    window: int
    concurrency: int
    share: float
    """Fraction of the cache bytes used when every sequence fills the window."""
    max_concurrency: float
    """Full-window sequences the cache can hold at once."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def kv_capacity(
    layout: KVLayout,
    cache_bytes: int,
    *,
    window: int,
    concurrency: int = 1,
    kv_dtype: str = "auto",
    state_dtype: str | None = None,
    with_draft: bool = False,
) -> KVCapacity:
    """Tokens held by ``cache_bytes`` and the share a window uses at a concurrency."""
    if cache_bytes <= 0 or window <= 0 or concurrency <= 0:
        raise ConfigurationError("cache bytes, window and concurrency must all be positive")
    per_token = layout.bytes_per_token(kv_dtype, with_draft=with_draft)
    if per_token == 0:
        raise ConfigurationError(f"{layout.model_type}: no full-attention layers to hold KV")
    fixed = layout.fixed_bytes_per_sequence(window, kv_dtype, state_dtype)
    free = cache_bytes - concurrency * fixed
    per_sequence = window * per_token + fixed
    return KVCapacity(
        cache_bytes=cache_bytes,
        kv_dtype=layout.model_dtype if kv_dtype == "auto" else kv_dtype,
        bytes_per_token=per_token,
        fixed_bytes_per_sequence=fixed,
        tokens_held=max(0, free // per_token),
        tokens_held_no_state=cache_bytes // per_token,
        window=window,
        concurrency=concurrency,
        share=concurrency * per_sequence / cache_bytes,
        max_concurrency=cache_bytes / per_sequence,
    )

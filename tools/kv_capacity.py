#!/usr/bin/env python3
"""How many tokens a KV cache of N bytes holds for a model, and what share a window uses.

    python3 tools/kv_capacity.py MODEL_DIR_OR_CONFIG_JSON --cache 8GiB --window 32768 65536

Reads config.json only (layers, which are full attention in hybrid models, KV heads, head dim,
linear-attention state). --cache accepts 8GiB / 8GB, or vLLM's own 8G (binary) / 8g (decimal).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's emil
from emil._bootstrap import use_project_python

use_project_python(__file__)  # re-runs this script in the checkout's .venv when needed

from emil.cli_args import OneLineParser, positive_int
from emil.exceptions import ConfigurationError
from emil.serving.kv import KVCapacity, KVLayout, kv_capacity, parse_bytes

_GIB = 1024**3


def _load_config(path: Path) -> dict[str, object]:
    config_path = path / "config.json" if path.is_dir() else path
    try:
        data = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{config_path}: cannot read config ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{config_path}: not a JSON object")
    return data


def _describe(layout: KVLayout, cap: KVCapacity, with_draft: bool) -> list[str]:
    layers = layout.full_attention_layers + (layout.draft_layers if with_draft else 0)
    kv_bytes = cap.bytes_per_token // max(1, layers * layout.kv_elements_per_layer_token)
    standard = 2 * layout.kv_heads * layout.head_dim
    shape = (
        f"2 x {layout.kv_heads} heads x {layout.head_dim} dims"
        if layout.kv_elements_per_layer_token == standard
        else "MLA latent"
    )
    lines = [
        f"model_type {layout.model_type}: {layout.num_layers} layers = "
        f"{layout.full_attention_layers} full attention"
        + (
            f" + {layout.sliding_attention_layers} sliding"
            if layout.sliding_attention_layers
            else ""
        )
        + (
            f" + {layout.recurrent_layers} recurrent (fixed state)"
            if layout.recurrent_layers
            else ""
        )
        + (f"; + {layout.draft_layers} MTP draft layer(s) counted" if with_draft else ""),
        f"per token: {layers} layers x {layout.kv_elements_per_layer_token} KV elements "
        f"({shape}) x {kv_bytes} B ({cap.kv_dtype}) = {cap.bytes_per_token:,} B",
    ]
    if cap.fixed_bytes_per_sequence:
        lines.append(
            f"per sequence, fixed: {cap.fixed_bytes_per_sequence:,} B "
            f"({cap.fixed_bytes_per_sequence / 2**20:.1f} MiB: recurrent state / sliding windows)"
        )
    lines.append(
        f"cache {cap.cache_bytes:,} B ({cap.cache_bytes / _GIB:.2f} GiB) / {cap.bytes_per_token:,} B"
        f" = {cap.tokens_held_no_state:,} tokens (ignoring per-sequence state)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="model dir or its config.json")
    parser.add_argument("--cache", required=True, help="KV cache size: 8GiB, 8GB, 8G, bytes")
    parser.add_argument(
        "--window", type=positive_int, action="append", help="served window(s); default 32768 and 65536"
    )
    parser.add_argument("--concurrency", type=positive_int, default=1, help="sequences resident at once")
    parser.add_argument(
        "--kv-dtype", default="auto", help="auto (model dtype), bfloat16, fp8, ... as in vLLM"
    )
    parser.add_argument("--state-dtype", default=None, help="recurrent SSM state dtype override")
    parser.add_argument(
        "--with-draft", action="store_true", help="count the MTP draft head's attention layers"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        layout = KVLayout.from_config(_load_config(args.config))
        cache = parse_bytes(args.cache)
        caps = [
            kv_capacity(
                layout,
                cache,
                window=w,
                concurrency=args.concurrency,
                kv_dtype=args.kv_dtype,
                state_dtype=args.state_dtype,
                with_draft=args.with_draft,
            )
            for w in (args.window or [32768, 65536])
        ]
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {"layout": layout.__dict__, "capacity": [c.to_dict() for c in caps]}, indent=2
            )
        )
        return 0
    print("\n".join(_describe(layout, caps[0], args.with_draft)))
    print()
    print(f"{'window':>8} {'conc':>5} {'tokens held':>12} {'share used':>10} {'max conc':>9}")
    for cap in caps:
        print(
            f"{cap.window:>8,} {cap.concurrency:>5} {cap.tokens_held:>12,} "
            f"{cap.share:>10.1%} {cap.max_concurrency:>8.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

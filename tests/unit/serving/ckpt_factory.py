"""Build tiny safetensors checkpoints (index + shards) with the safetensors package.

``python3 tests/unit/serving/ckpt_factory.py DIR`` writes the crafted examples of docs/serving.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __name__ == "__main__":  # by hand, from a fresh clone: into the checkout's .venv first
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from emil._bootstrap import use_project_python

    use_project_python(__file__)

import numpy as np
from safetensors import TensorSpec, serialize_file

# safetensors dtype name -> (numpy storage dtype, bytes per element); numpy has no bf16/fp8,
# so those are stored as raw integers of the same width (only the header matters here).
_STORAGE = {
    "bfloat16": np.uint16,
    "float16": np.float16,
    "float32": np.float32,
    "float8_e4m3fn": np.uint8,
    "uint8": np.uint8,
    "int32": np.int32,
}

Tensors = dict[str, tuple[str, tuple[int, ...]]]
"""name -> (safetensors dtype name, shape)"""


def write_shard(path: Path, tensors: Tensors) -> None:
    arrays = {
        n: np.zeros(int(np.prod(shape)), dtype=_STORAGE[dt]) for n, (dt, shape) in tensors.items()
    }
    specs = {
        name: TensorSpec(
            dtype=dtype,
            shape=list(shape),
            data_ptr=arrays[name].ctypes.data,
            data_len=arrays[name].nbytes,
        )
        for name, (dtype, shape) in tensors.items()
    }
    serialize_file(specs, str(path), None)


def write_checkpoint(
    root: Path,
    shards: dict[str, Tensors],
    *,
    index: dict[str, str] | None = None,
    config: dict[str, object] | None = None,
) -> Path:
    """Write shards and an index (derived from the shards unless given)."""
    root.mkdir(parents=True, exist_ok=True)
    for shard, tensors in shards.items():
        write_shard(root / shard, tensors)
    weight_map = (
        index
        if index is not None
        else {name: shard for shard, tensors in shards.items() for name in tensors}
    )
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    if config is not None:
        (root / "config.json").write_text(json.dumps(config))
    return root


def base_tensors() -> dict[str, Tensors]:
    """A two-layer model with an MTP head, all BF16, split over two shards."""
    shard1: Tensors = {
        "model.embed_tokens.weight": ("bfloat16", (8, 4)),
        "model.layers.0.self_attn.q_proj.weight": ("bfloat16", (4, 4)),
        "model.layers.0.mlp.experts.0.down_proj.weight": ("bfloat16", (4, 4)),
    }
    shard2: Tensors = {
        "model.layers.1.self_attn.q_proj.weight": ("bfloat16", (4, 4)),
        "model.layers.1.mlp.experts.0.down_proj.weight": ("bfloat16", (4, 4)),
        "lm_head.weight": ("bfloat16", (8, 4)),
        "mtp.fc.weight": ("bfloat16", (4, 8)),
        "mtp.layers.0.mlp.experts.0.down_proj.weight": ("bfloat16", (4, 4)),
        "mtp.norm.weight": ("bfloat16", (4,)),
    }
    return {"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2}


def write_examples(out: Path) -> None:
    """Crafted example checkpoints for docs/serving.md (tiny, all-zero tensors)."""
    write_checkpoint(out / "base", base_tensors())
    write_checkpoint(out / "merged-ok", base_tensors())
    dropped = {s: dict(t) for s, t in base_tensors().items()}
    for name in [n for n in dropped["model-00002-of-00002.safetensors"] if n.startswith("mtp.")]:
        del dropped["model-00002-of-00002.safetensors"][name]
    write_checkpoint(out / "merged-lost-mtp", dropped)
    quant: dict[str, Tensors] = {"model.safetensors": {}}
    for tensors in base_tensors().values():
        for name, (dtype, shape) in tensors.items():
            if ".experts." in name:
                stem = name.removesuffix(".weight")
                quant["model.safetensors"][f"{stem}.weight_packed"] = ("uint8", (4, 2))
                quant["model.safetensors"][f"{stem}.weight_scale"] = ("float8_e4m3fn", (4, 1))
            else:
                quant["model.safetensors"][name] = (dtype, shape)
    write_checkpoint(out / "nvfp4-quantized-mtp", quant, config={"quantization_config": {}})


if __name__ == "__main__":
    write_examples(Path(sys.argv[1]))

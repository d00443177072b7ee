"""Checkpoint parity: did a LoRA merge or a quantization pass keep every tensor and the MTP head?

The field notes: a model class that fails to materialise a module loses its tensors behind a
transformers *warning*; the result merges, quantizes and serves fine and is 35% slower with
nothing saying why (no draft head). And vLLM's draft path does not run quantized weights, so
the ``mtp.*`` tensors must come through quantization in BF16. Both are checked here from the
safetensors index and shard headers only (no tensor data is read).

Quantized checkpoints rename and add tensors (``w.weight`` -> ``w.weight_packed`` +
``w.weight_scale`` ...). In ``quantized`` mode the primary tensor is mapped back to its base
name and the scale / zero-point companions are counted, not compared, so a dropped module is
still caught while the quantizer's own additions are not reported as extras.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from emil.serving.safetensors_header import HeaderError, TensorInfo, read_header

__all__ = [
    "Checkpoint",
    "CheckpointReport",
    "format_report",
    "is_mtp_tensor",
    "normalize_quantized_name",
    "verify_checkpoint",
]

Mode = Literal["auto", "exact", "quantized"]

_INDEX_NAME = "model.safetensors.index.json"
_SINGLE_NAME = "model.safetensors"

# Primary tensors that quantizers rename (compressed-tensors, GPTQ/AWQ): map back to ``.weight``.
_PRIMARY_RENAMES = (".weight_packed", ".qweight")
# Companion tensors a quantizer adds next to a weight or an attention module.
_AUX_SUFFIXES = (
    ".weight_scale",
    ".weight_scale_2",
    ".weight_global_scale",
    ".input_global_scale",
    ".input_scale",
    ".output_scale",
    ".weight_zero_point",
    ".weight_shape",
    ".weight_g_idx",
    ".k_scale",
    ".v_scale",
    ".q_scale",
    ".prob_scale",
    ".scales",
    ".qzeros",
    ".g_idx",
)


def normalize_quantized_name(name: str) -> str | None:
    """The base-checkpoint name of a quantized tensor, or None for a quantizer's companion."""
    for suffix in _AUX_SUFFIXES:
        if name.endswith(suffix):
            return None
    for suffix in _PRIMARY_RENAMES:
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".weight"
    return name


def is_mtp_tensor(name: str, prefix: str = "mtp.") -> bool:
    """True for the multi-token-prediction head's tensors (``mtp.*``, also nested ``*.mtp.*``)."""
    return name.startswith(prefix) or f".{prefix}" in name


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint directory as its index (or single shard) and shard headers describe it."""

    path: Path
    weight_map: dict[str, str]
    """Tensor name -> shard file name, from model.safetensors.index.json (or the single shard)."""
    index_file: str | None
    quantization_config: dict[str, Any] | None
    tensors: dict[str, TensorInfo]
    """Every tensor found in the shard headers."""
    index_problems: tuple[str, ...]
    """Where the index and the shards disagree (missing shard, tensor not where listed, ...)."""

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        """Read the index and every shard header under ``path`` (a dir or one .safetensors)."""
        if path.is_file():
            tensors = read_header(path)
            return cls(path, {n: path.name for n in tensors}, None, None, tensors, ())
        if not path.is_dir():
            raise HeaderError(f"{path}: no such checkpoint directory or file")
        quant = _quantization_config(path)
        index_path = path / _INDEX_NAME
        if index_path.is_file():
            weight_map = _read_weight_map(index_path)
            tensors, problems = _read_indexed_shards(path, weight_map)
            return cls(path, weight_map, _INDEX_NAME, quant, tensors, tuple(problems))
        single = path / _SINGLE_NAME
        shards = [single] if single.is_file() else sorted(path.glob("*.safetensors"))
        if not shards:
            raise HeaderError(f"{path}: no {_INDEX_NAME} and no *.safetensors files")
        if len(shards) > 1:
            raise HeaderError(
                f"{path}: {len(shards)} shards but no {_INDEX_NAME}; vLLM and transformers "
                "need the index to load a sharded checkpoint"
            )
        tensors = read_header(shards[0])
        return cls(path, {n: shards[0].name for n in tensors}, None, quant, tensors, ())

    def looks_quantized(self) -> bool:
        """True if config.json declares quantization or any tensor is a quantizer's companion."""
        if self.quantization_config:
            return True
        return any(normalize_quantized_name(n) != n for n in self.weight_map)


def _quantization_config(path: Path) -> dict[str, Any] | None:
    config_path = path / "config.json"
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HeaderError(f"{config_path}: unreadable ({exc})") from exc
    quant = config.get("quantization_config") if isinstance(config, dict) else None
    if quant is None and isinstance(config, dict):
        text_config = config.get("text_config")
        if isinstance(text_config, dict):
            quant = text_config.get("quantization_config")
    return quant if isinstance(quant, dict) else None


def _read_weight_map(index_path: Path) -> dict[str, str]:
    try:
        index = json.loads(index_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HeaderError(f"{index_path}: unreadable ({exc})") from exc
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise HeaderError(f"{index_path}: no weight_map object")
    return {str(k): str(v) for k, v in weight_map.items()}


def _read_indexed_shards(
    path: Path, weight_map: dict[str, str]
) -> tuple[dict[str, TensorInfo], list[str]]:
    problems: list[str] = []
    tensors: dict[str, TensorInfo] = {}
    headers: dict[str, dict[str, TensorInfo]] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = path / shard
        if not shard_path.is_file():
            problems.append(f"index names shard {shard} but the file is missing")
            continue
        headers[shard] = read_header(shard_path)
    for name, shard in sorted(weight_map.items()):
        header = headers.get(shard)
        if header is None:
            continue
        info = header.get(name)
        if info is None:
            problems.append(f"index places {name} in {shard} but that shard has no such tensor")
        else:
            tensors[name] = info
    for shard, header in headers.items():
        for name in sorted(header):
            if name not in weight_map:
                problems.append(f"{shard} holds {name}, which the index does not list")
            elif weight_map[name] != shard:
                problems.append(f"{shard} holds {name}, which the index does not list there")
    return tensors, problems


@dataclass(frozen=True)
class CheckpointReport:
    """The verdict on a candidate checkpoint against its base."""

    base: str
    candidate: str
    mode: Literal["exact", "quantized"]
    base_tensors: int
    candidate_tensors: int
    missing: tuple[str, ...]
    """In the base, not in the candidate (after quantized-name mapping in quantized mode)."""
    extra: tuple[str, ...]
    """In the candidate, not in the base."""
    companions_ignored: int
    """Quantizer companion tensors (scales, zero points) not compared in quantized mode."""
    index_problems: tuple[str, ...]
    mtp_base_tensors: int
    mtp_tensors: int
    mtp_problems: tuple[str, ...]
    """MTP tensors absent, quantized, or not in an allowed dtype."""
    mtp_dtypes: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True only when nothing is missing, extra, inconsistent or wrong about the MTP head."""
        return not (self.missing or self.extra or self.index_problems or self.mtp_problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (lists, counts and the verdict)."""
        return {
            "ok": self.ok,
            "base": self.base,
            "candidate": self.candidate,
            "mode": self.mode,
            "base_tensors": self.base_tensors,
            "candidate_tensors": self.candidate_tensors,
            "missing": list(self.missing),
            "extra": list(self.extra),
            "companions_ignored": self.companions_ignored,
            "index_problems": list(self.index_problems),
            "mtp": {
                "base_tensors": self.mtp_base_tensors,
                "tensors": self.mtp_tensors,
                "dtypes": self.mtp_dtypes,
                "problems": list(self.mtp_problems),
            },
        }


def verify_checkpoint(
    base: Path,
    candidate: Path,
    *,
    mode: Mode = "auto",
    mtp_prefix: str = "mtp.",
    mtp_dtypes: Iterable[str] = ("BF16",),
    require_mtp: bool = True,
) -> CheckpointReport:
    """Compare ``candidate`` with ``base`` by tensor names and check its MTP head.

    ``mode="auto"`` uses quantized-name mapping when the candidate declares or shows
    quantization and the base does not. ``require_mtp`` fails a candidate with no MTP tensors
    even when the base has none (the served model's speed depends on the head).
    """
    base_ckpt = Checkpoint.load(base)
    cand_ckpt = Checkpoint.load(candidate)
    resolved: Literal["exact", "quantized"]
    if mode == "auto":
        quantized = cand_ckpt.looks_quantized() and not base_ckpt.looks_quantized()
        resolved = "quantized" if quantized else "exact"
    else:
        resolved = mode
    base_names = set(base_ckpt.weight_map)
    companions = 0
    if resolved == "quantized":
        cand_names: set[str] = set()
        for name in cand_ckpt.weight_map:
            mapped = normalize_quantized_name(name)
            if mapped is None:
                companions += 1
            else:
                cand_names.add(mapped)
    else:
        cand_names = set(cand_ckpt.weight_map)

    allowed = {d.upper() for d in mtp_dtypes}
    mtp_base = [n for n in base_names if is_mtp_tensor(n, mtp_prefix)]
    mtp_cand = sorted(n for n in cand_ckpt.weight_map if is_mtp_tensor(n, mtp_prefix))
    mtp_problems: list[str] = []
    dtypes: dict[str, int] = {}
    if not mtp_cand and (require_mtp or mtp_base):
        mtp_problems.append(
            f"no {mtp_prefix}* tensors in the candidate"
            + (f" (the base has {len(mtp_base)})" if mtp_base else "")
            + ": vLLM will serve it without a draft head"
        )
    for name in mtp_cand:
        if normalize_quantized_name(name) != name:
            mtp_problems.append(f"{name} is a quantized tensor: vLLM's draft path needs BF16")
            continue
        info = cand_ckpt.tensors.get(name)
        if info is None:
            continue  # already reported as an index problem
        dtypes[info.dtype] = dtypes.get(info.dtype, 0) + 1
        if info.dtype.upper() not in allowed:
            mtp_problems.append(f"{name} is {info.dtype}, expected {'/'.join(sorted(allowed))}")

    return CheckpointReport(
        base=str(base),
        candidate=str(candidate),
        mode=resolved,
        base_tensors=len(base_names),
        candidate_tensors=len(cand_ckpt.weight_map),
        missing=tuple(sorted(base_names - cand_names)),
        extra=tuple(sorted(cand_names - base_names)),
        companions_ignored=companions,
        index_problems=tuple(f"candidate: {p}" for p in cand_ckpt.index_problems)
        + tuple(f"base: {p}" for p in base_ckpt.index_problems),
        mtp_base_tensors=len(mtp_base),
        mtp_tensors=len(mtp_cand),
        mtp_problems=tuple(mtp_problems),
        mtp_dtypes=dtypes,
    )


def format_report(report: CheckpointReport, *, limit: int = 50) -> str:
    """A human-readable report; long lists are cut at ``limit`` lines with a count."""
    lines = [
        f"base:      {report.base} ({report.base_tensors} tensors)",
        f"candidate: {report.candidate} ({report.candidate_tensors} tensors, "
        f"compared {report.mode}"
        + (
            f", {report.companions_ignored} quantizer companions not compared"
            if report.mode == "quantized"
            else ""
        )
        + ")",
    ]

    def section(title: str, items: tuple[str, ...]) -> None:
        if not items:
            return
        lines.append(f"{title} ({len(items)}):")
        lines.extend(f"  {item}" for item in items[:limit])
        if len(items) > limit:
            lines.append(f"  ... and {len(items) - limit} more")

    section("MISSING from candidate", report.missing)
    section("EXTRA in candidate", report.extra)
    section("INDEX problems", report.index_problems)
    dtypes = ", ".join(f"{k} x{v}" for k, v in sorted(report.mtp_dtypes.items())) or "none"
    lines.append(
        f"mtp: {report.mtp_tensors} tensors in candidate, {report.mtp_base_tensors} in base; "
        f"dtypes: {dtypes}"
    )
    section("MTP problems", report.mtp_problems)
    lines.append(
        "OK: tensor names match and the MTP head is intact"
        if report.ok
        else "FAIL: the candidate does not match its base (see above)"
    )
    return "\n".join(lines)

"""Read a safetensors file's header without touching its tensor data.

The format is: 8 bytes little-endian u64 header length N, then N bytes of JSON mapping each
tensor name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional ``__metadata__``).
Reading only the header lets the checkpoint checks run over a 23 GiB model in milliseconds.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emil.exceptions import ConfigurationError

__all__ = ["HeaderError", "TensorInfo", "read_header"]

# Real headers are a few MB at most (one entry per tensor); a larger length means the file is
# not safetensors, and reading it would load garbage into memory.
_MAX_HEADER_BYTES = 256 * 1024 * 1024


class HeaderError(ConfigurationError):
    """A file is not a readable safetensors file (names the file and what is wrong)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as its shard's header describes it."""

    name: str
    dtype: str
    """safetensors dtype code: BF16, F16, F32, F8_E4M3, U8, I32, ..."""
    shape: tuple[int, ...]
    shard: str
    """File name of the shard holding it."""


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Return every tensor described in ``path``'s header, keyed by name."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            raw_len = fh.read(8)
            if len(raw_len) != 8:
                raise HeaderError(f"{path}: shorter than the 8-byte safetensors header length")
            (length,) = struct.unpack("<Q", raw_len)
            if length > _MAX_HEADER_BYTES or length > size - 8:
                raise HeaderError(
                    f"{path}: header length {length} is impossible for a {size}-byte file "
                    "(not a safetensors file?)"
                )
            blob = fh.read(length)
    except OSError as exc:
        raise HeaderError(f"{path}: cannot read ({exc})") from exc
    try:
        header: Any = json.loads(blob)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HeaderError(f"{path}: header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise HeaderError(f"{path}: header is not a JSON object")
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or "dtype" not in entry:
            raise HeaderError(f"{path}: entry {name!r} has no dtype")
        tensors[name] = TensorInfo(
            name=name,
            dtype=str(entry["dtype"]),
            shape=tuple(int(d) for d in entry.get("shape", ())),
            shard=path.name,
        )
    return tensors

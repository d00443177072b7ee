"""verify_checkpoint against tiny checkpoints built with the safetensors package."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from emil.serving.checkpoint import (
    Checkpoint,
    format_report,
    normalize_quantized_name,
    verify_checkpoint,
)
from emil.serving.safetensors_header import HeaderError, read_header
from tests.unit.serving.ckpt_factory import Tensors, base_tensors, write_checkpoint, write_shard


def _copy(shards: dict[str, Tensors]) -> dict[str, Tensors]:
    return {s: dict(t) for s, t in shards.items()}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "base", base_tensors())


def test_identical_merge_passes(base: Path, tmp_path: Path) -> None:
    merged = write_checkpoint(tmp_path / "merged", base_tensors())
    report = verify_checkpoint(base, merged)
    assert report.ok
    assert report.mode == "exact"
    assert report.mtp_tensors == 3
    assert report.mtp_dtypes == {"BF16": 3}
    assert "OK" in format_report(report)


def test_merge_that_dropped_the_mtp_head_fails_and_lists_every_tensor(
    base: Path, tmp_path: Path
) -> None:
    shards = _copy(base_tensors())
    shard2 = shards["model-00002-of-00002.safetensors"]
    for name in [n for n in shard2 if n.startswith("mtp.")]:
        del shard2[name]
    merged = write_checkpoint(tmp_path / "merged", shards)
    report = verify_checkpoint(base, merged)
    assert not report.ok
    assert report.missing == (
        "mtp.fc.weight",
        "mtp.layers.0.mlp.experts.0.down_proj.weight",
        "mtp.norm.weight",
    )
    assert report.extra == ()
    assert any("no mtp.* tensors" in p and "base has 3" in p for p in report.mtp_problems)


def test_extra_tensor_is_listed(base: Path, tmp_path: Path) -> None:
    shards = _copy(base_tensors())
    shards["model-00001-of-00002.safetensors"]["model.layers.0.lora_A.weight"] = (
        "bfloat16",
        (2, 4),
    )
    report = verify_checkpoint(base, write_checkpoint(tmp_path / "m", shards))
    assert report.extra == ("model.layers.0.lora_A.weight",)
    assert report.missing == ()
    assert not report.ok


def test_quantized_checkpoint_maps_packed_weights_and_keeps_mtp_bf16(
    base: Path, tmp_path: Path
) -> None:
    shards: dict[str, Tensors] = {"model.safetensors": {}}
    out = shards["model.safetensors"]
    for tensors in base_tensors().values():
        for name, (dtype, shape) in tensors.items():
            if ".experts." in name and not name.startswith("mtp."):
                stem = name.removesuffix(".weight")
                out[f"{stem}.weight_packed"] = ("uint8", (4, 2))
                out[f"{stem}.weight_scale"] = ("float8_e4m3fn", (4, 1))
                out[f"{stem}.weight_global_scale"] = ("float32", (1,))
            else:
                out[name] = (dtype, shape)
    out["model.layers.0.self_attn.k_scale"] = ("float32", (1,))
    quant = write_checkpoint(
        tmp_path / "nvfp4", shards, config={"quantization_config": {"format": "nvfp4"}}
    )
    report = verify_checkpoint(base, quant)
    assert report.mode == "quantized"
    assert report.ok, format_report(report)
    assert report.companions_ignored == 5  # 2 experts x (scale + global) + k_scale


def test_quantized_mtp_head_is_rejected(base: Path, tmp_path: Path) -> None:
    shards = _copy(base_tensors())
    shard2 = shards["model-00002-of-00002.safetensors"]
    del shard2["mtp.layers.0.mlp.experts.0.down_proj.weight"]
    shard2["mtp.layers.0.mlp.experts.0.down_proj.weight_packed"] = ("uint8", (4, 2))
    shard2["mtp.layers.0.mlp.experts.0.down_proj.weight_scale"] = ("float8_e4m3fn", (4, 1))
    shard2["mtp.fc.weight"] = ("float8_e4m3fn", (4, 8))
    report = verify_checkpoint(
        base,
        write_checkpoint(tmp_path / "q", shards, config={"quantization_config": {"x": 1}}),
    )
    assert report.mode == "quantized"
    assert report.missing == () and report.extra == ()  # names survived...
    problems = "\n".join(report.mtp_problems)  # ...but the head is unusable by the draft path
    assert "mtp.fc.weight is F8_E4M3, expected BF16" in problems
    assert "down_proj.weight_packed is a quantized tensor" in problems
    assert "down_proj.weight_scale is a quantized tensor" in problems
    assert not report.ok


def test_exact_mode_reports_quantizer_renames(base: Path, tmp_path: Path) -> None:
    shards = _copy(base_tensors())
    shard1 = shards["model-00001-of-00002.safetensors"]
    del shard1["model.layers.0.mlp.experts.0.down_proj.weight"]
    shard1["model.layers.0.mlp.experts.0.down_proj.weight_packed"] = ("uint8", (4, 2))
    report = verify_checkpoint(base, write_checkpoint(tmp_path / "q", shards), mode="exact")
    assert report.missing == ("model.layers.0.mlp.experts.0.down_proj.weight",)
    assert report.extra == ("model.layers.0.mlp.experts.0.down_proj.weight_packed",)


def test_no_mtp_anywhere_fails_unless_not_required(tmp_path: Path) -> None:
    plain: dict[str, Tensors] = {"model.safetensors": {"lm_head.weight": ("bfloat16", (2, 2))}}
    a = write_checkpoint(tmp_path / "a", plain)
    b = write_checkpoint(tmp_path / "b", plain)
    assert not verify_checkpoint(a, b).ok
    assert verify_checkpoint(a, b, require_mtp=False).ok


def test_index_that_lies_about_shards_is_reported(base: Path, tmp_path: Path) -> None:
    shards = base_tensors()
    index = {n: s for s, t in shards.items() for n in t}
    index["mtp.fc.weight"] = "model-00001-of-00002.safetensors"  # wrong shard
    index["model.ghost.weight"] = "model-00003-of-00003.safetensors"  # no such file
    cand = write_checkpoint(tmp_path / "c", shards, index=index)
    report = verify_checkpoint(base, cand)
    text = "\n".join(report.index_problems)
    assert "index places mtp.fc.weight in model-00001-of-00002.safetensors" in text
    assert "model-00002-of-00002.safetensors holds mtp.fc.weight, which the index does not" in text
    assert "model-00003-of-00003.safetensors but the file is missing" in text
    assert report.extra == ("model.ghost.weight",)
    assert not report.ok


def test_header_reader_matches_the_written_header(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    write_shard(path, {"a": ("bfloat16", (2, 3)), "b": ("float8_e4m3fn", (5,))})
    header = read_header(path)
    assert header["a"].dtype == "BF16" and header["a"].shape == (2, 3)
    assert header["b"].dtype == "F8_E4M3"


def test_header_reader_rejects_garbage(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(HeaderError, match="impossible"):
        read_header(bad)
    notjson = tmp_path / "nj.safetensors"
    notjson.write_bytes(struct.pack("<Q", 3) + b"abc")
    with pytest.raises(HeaderError, match="not JSON"):
        read_header(notjson)


def test_sharded_dir_without_index_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "noindex"
    root.mkdir()
    write_shard(root / "a.safetensors", {"x": ("bfloat16", (1,))})
    write_shard(root / "b.safetensors", {"y": ("bfloat16", (1,))})
    with pytest.raises(HeaderError, match=r"no model\.safetensors\.index\.json"):
        Checkpoint.load(root)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.b.weight", "a.b.weight"),
        ("a.b.weight_packed", "a.b.weight"),
        ("a.b.qweight", "a.b.weight"),
        ("a.b.weight_scale", None),
        ("a.b.weight_scale_2", None),
        ("a.attn.k_scale", None),
        ("a.b.bias", "a.b.bias"),
    ],
)
def test_normalize_quantized_name(name: str, expected: str | None) -> None:
    assert normalize_quantized_name(name) == expected


def test_cli_exit_codes_and_json(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import verify_checkpoint as cli

    merged = write_checkpoint(tmp_path / "ok", base_tensors())
    assert cli.main([str(base), str(merged)]) == 0
    shards = _copy(base_tensors())
    del shards["model-00002-of-00002.safetensors"]["mtp.norm.weight"]
    broken = write_checkpoint(tmp_path / "broken", shards)
    capsys.readouterr()
    assert cli.main([str(base), str(broken), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["missing"] == ["mtp.norm.weight"] and out["ok"] is False
    assert cli.main([str(base), str(tmp_path / "nowhere")]) == 2

"""KV capacity arithmetic against config files written by the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from emil.exceptions import ConfigurationError
from emil.serving.kv import KVLayout, kv_capacity, parse_bytes

GIB = 1024**3

# The served model's text config (Qwen3.6-35B-A3B; Qwen3.5-35B-A3B is the same shape), only the
# fields the arithmetic uses, nested under text_config as in the published config.json.
QWEN36: dict[str, Any] = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "model_type": "qwen3_5_moe",
    "text_config": {
        "model_type": "qwen3_5_moe_text",
        "num_hidden_layers": 40,
        "full_attention_interval": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "hidden_size": 2048,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": 1,
        "dtype": "bfloat16",
    },
}


def test_qwen36_full_attention_layers_from_interval() -> None:
    layout = KVLayout.from_config(QWEN36)
    assert layout.full_attention_layers == 10
    assert layout.recurrent_layers == 30
    # 2 (K,V) x 10 layers x 2 heads x 256 dims x 2 bytes
    assert layout.bytes_per_token() == 20_480
    assert layout.bytes_per_token(with_draft=True) == 22_528


def test_field_notes_order_of_magnitude_8gib() -> None:
    """The notes: an 8 GiB pin held ~505,000 tokens and a 32,768 window used ~8.7% of it."""
    cap = kv_capacity(KVLayout.from_config(QWEN36), 8 * GIB, window=32_768)
    assert cap.tokens_held_no_state == 8 * GIB // 20_480 == 419_430
    # 30 GDN layers x (conv 3 x 8192 bf16 + ssm 32x128x128 fp32) per sequence
    assert cap.fixed_bytes_per_sequence == 30 * (3 * 8192 * 2 + 32 * 128 * 128 * 4)
    assert cap.tokens_held == (8 * GIB - cap.fixed_bytes_per_sequence) // 20_480 == 416_286
    assert 300_000 < cap.tokens_held < 600_000  # same order as the notes' 505,000
    assert cap.share == pytest.approx(0.0856, abs=0.0005)  # the notes say 8.7%
    assert cap.max_concurrency == pytest.approx(11.68, abs=0.01)


def test_layer_types_list_wins_and_sliding_layers_cost_at_most_their_window() -> None:
    config = {
        "model_type": "toy",
        "num_hidden_layers": 4,
        "layer_types": [
            "sliding_attention",
            "full_attention",
            "sliding_attention",
            "full_attention",
        ],
        "sliding_window": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "torch_dtype": "float16",
        "full_attention_interval": 3,  # ignored: layer_types is explicit
    }
    layout = KVLayout.from_config(config)
    assert (layout.full_attention_layers, layout.sliding_attention_layers) == (2, 2)
    per_layer_token = 2 * 4 * 64 * 2
    assert layout.bytes_per_token() == 2 * per_layer_token
    assert layout.fixed_bytes_per_sequence(window=4096) == 2 * 1024 * per_layer_token
    assert layout.fixed_bytes_per_sequence(window=512) == 2 * 512 * per_layer_token


def test_dense_model_fp8_kv_and_concurrency() -> None:
    config = {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,  # head_dim derived: 128
    }
    layout = KVLayout.from_config(config)
    assert layout.bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131_072
    cap = kv_capacity(layout, 4 * GIB, window=8192, concurrency=2, kv_dtype="fp8")
    assert cap.bytes_per_token == 65_536
    assert cap.tokens_held == 65_536
    assert cap.share == pytest.approx(2 * 8192 / 65_536)
    assert cap.max_concurrency == pytest.approx(8.0)


def test_mla_latent_and_nextn_draft() -> None:
    config = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "hidden_size": 7168,
        "num_nextn_predict_layers": 1,
    }
    layout = KVLayout.from_config(config)
    assert layout.bytes_per_token() == 61 * 576 * 2
    assert layout.bytes_per_token(with_draft=True) == 62 * 576 * 2


def test_nemotron_h_pattern_counts_attention_and_mamba() -> None:
    config = {
        "model_type": "nemotron_h",
        "num_hidden_layers": 6,
        "hybrid_override_pattern": "M-M*E*",
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
    }
    layout = KVLayout.from_config(config)
    assert (layout.full_attention_layers, layout.recurrent_layers) == (2, 2)
    conv, ssm = layout.recurrent_state_elements
    assert conv == 3 * (64 * 64 + 2 * 8 * 128)
    assert ssm == 64 * 64 * 128


def test_missing_fields_and_bad_values_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="num_hidden_layers"):
        KVLayout.from_config({"num_attention_heads": 2})
    with pytest.raises(ConfigurationError, match="layer_types has 1 entries for 2 layers"):
        KVLayout.from_config(
            {
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "head_dim": 8,
                "layer_types": ["full_attention"],
            }
        )
    with pytest.raises(ConfigurationError, match="unknown dtype"):
        KVLayout.from_config(QWEN36).bytes_per_token("int3")
    with pytest.raises(ConfigurationError, match="positive"):
        kv_capacity(KVLayout.from_config(QWEN36), 8 * GIB, window=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8GiB", 8 * GIB),
        ("8 GiB", 8 * GIB),
        ("8GB", 8_000_000_000),
        ("8G", 8 * GIB),  # vLLM: upper case is binary
        ("8g", 8_000_000_000),  # vLLM: lower case is decimal
        ("1.5K", 1536),
        ("8589934592", 8 * GIB),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


def test_parse_bytes_rejects_nonsense() -> None:
    with pytest.raises(ConfigurationError, match="not a byte size"):
        parse_bytes("lots")


def test_cli_on_a_written_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tools import kv_capacity as cli

    model = tmp_path / "Qwen3.6-35B-A3B"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN36))
    assert cli.main([str(model), "--cache", "8GiB", "--window", "32768"]) == 0
    out = capsys.readouterr().out
    assert "= 20,480 B" in out and "419,430 tokens" in out
    assert "416,286" in out and "8.6%" in out
    assert cli.main([str(model / "config.json"), "--cache", "8GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["window"] for c in data["capacity"]] == [32768, 65536]
    assert cli.main([str(tmp_path / "none"), "--cache", "8GiB"]) == 2

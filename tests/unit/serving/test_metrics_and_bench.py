"""Prometheus parsing, spec-decode arithmetic and the bench's figures, without a server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emil.exceptions import ConfigurationError
from emil.serving.bench import (
    BenchResult,
    Methodology,
    RequestSample,
    ServerInfo,
    Target,
    profile_mismatches,
    summarize,
    warnings_for,
)
from emil.serving.bench_report import (
    compare_table,
    load_report,
    methodology_differences,
    report_json,
)
from emil.serving.metrics import MetricsSnapshot, parse_prometheus

BEFORE = """
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="q"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="q"} 300.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="q"} 240.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="q",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="q",position="1"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="q",position="2"} 70.0
vllm:prefix_cache_queries_total{engine="0",model_name="q"} 1000.0
vllm:prefix_cache_hits_total{engine="0",model_name="q"} 0.0
vllm:prefix_cache_hits_total{engine="0",model_name="other"} 999.0
"""
AFTER = (
    BEFORE.replace("} 100.0", "} 400.0")
    .replace("} 300.0", "} 1200.0")
    .replace("} 240.0", "} 972.0")
    .replace('position="0"} 90.0', 'position="0"} 340.0')
    .replace('position="1"} 80.0', 'position="1"} 290.0')
    .replace('position="2"} 70.0', 'position="2"} 250.0')
)


def test_parse_prometheus_labels_and_comments() -> None:
    samples = parse_prometheus(BEFORE)
    assert (
        "vllm:spec_decode_num_drafts_total",
        {"engine": "0", "model_name": "q"},
        100.0,
    ) in samples
    assert all(not name.startswith("#") for name, _, _ in samples)


def test_spec_decode_delta_matches_vllm_formulas() -> None:
    delta = MetricsSnapshot.from_text(AFTER, model="q") - MetricsSnapshot.from_text(
        BEFORE, model="q"
    )
    assert delta.counters["drafts"] == 300
    # acceptance rate = accepted / draft tokens; mean length = 1 + accepted / drafts
    assert delta.acceptance_rate == pytest.approx(732 / 900)
    assert delta.mean_acceptance_length == pytest.approx(1 + 732 / 300)
    assert delta.per_position_acceptance == pytest.approx([250 / 300, 210 / 300, 180 / 300])
    assert delta.prefix_cache_hits == 0  # the other model's hits are filtered out


def test_old_metric_names_and_no_spec_decode() -> None:
    text = 'vllm:gpu_prefix_cache_hits_total{model_name="q"} 5\n'
    later = 'vllm:gpu_prefix_cache_hits_total{model_name="q"} 65\n'
    delta = MetricsSnapshot.from_text(later) - MetricsSnapshot.from_text(text)
    assert delta.prefix_cache_hits == 60
    assert delta.acceptance_rate is None and delta.mean_acceptance_length is None


def test_decode_speed_excludes_prefill_and_counts_tokens_after_the_first() -> None:
    # 256 tokens, first after 0.5 s, done at 2.8 s: 255 tokens in 2.3 s.
    sample = RequestSample(2.8, 0.5, 256, 30, 0, "length")
    assert sample.decode_tps == pytest.approx(255 / 2.3)
    assert sample.e2e_tps == pytest.approx(256 / 2.8)
    assert RequestSample(2.0, None, 256, 30, 0, "length").decode_tps is None
    assert RequestSample(2.0, 0.5, 1, 30, 0, "length").decode_tps is None


def test_methodology_bodies_have_a_fresh_uuid_first() -> None:
    m = Methodology()
    a, b = m.body("q"), m.body("q")
    first_a = a["messages"][0]["content"]
    first_b = b["messages"][0]["content"]
    assert first_a.startswith("[") and first_a[:38] != first_b[:38]
    assert a["temperature"] == 0 and a["max_tokens"] == 256 and a["ignore_eos"] is True
    assert a["chat_template_kwargs"] == {"enable_thinking": False}
    assert a["stream_options"] == {"include_usage": True}
    shared = Methodology(unique_prefix=False, system="sys")
    assert shared.body("q")["messages"] == shared.body("q")["messages"]  # the warm-cache pitfall
    assert shared.body("q")["messages"][0]["content"] == "sys"


def _result(label: str, tps: list[float], *, double: bool = False) -> BenchResult:
    samples = [RequestSample(256 / t + 0.1, 0.1, 256, 20, 0, "length") for t in tps]
    server = ServerInfo("q", "q", 65536, "0.30.0", double)
    return BenchResult(Target(label, "http://127.0.0.1:1/v1"), server, samples, None, [])


def test_compare_table_and_json_ratios_to_the_first() -> None:
    a = _result("mtp3", [110.0, 111.0, 109.0])
    b = _result("off", [71.5, 71.6, 71.7])
    table = compare_table([a, b])
    assert "mtp3" in table and "off" in table
    assert "0.65x" in table  # 71.6 / 110 (decode speed excludes the 0.1 s TTFT)
    report = report_json([a, b], Methodology())
    assert report["configs"][1]["ratio_to_first"] == pytest.approx(
        71.6 * 255 / 256 / (110.0 * 255 / 256), rel=1e-3
    )
    assert report["methodology"]["ignore_eos"] is True
    assert report["configs"][0]["server"]["max_model_len"] == 65536
    assert report["simulated"] is False


def test_warnings_name_what_breaks_comparability() -> None:
    server = ServerInfo("q", "q", 32768, None, True)
    hits = MetricsSnapshot({"prefix_hits": 500.0, "drafts": 0.0}) - MetricsSnapshot(
        {"prefix_hits": 0.0, "drafts": 0.0}
    )
    samples = [RequestSample(1.0, 0.1, 200, 10, 0, "stop")]
    text = "\n".join(warnings_for(server, Methodology(), samples, hits))
    assert "DOUBLE" in text
    assert "prefix-cache hits rose by 500 tokens" in text
    assert "1/1 requests did not return exactly 256 tokens" in text
    assert "no speculative-decoding drafts" in text
    assert "no /metrics" in "\n".join(warnings_for(server, Methodology(), samples, None))


def test_summarize() -> None:
    assert summarize([1.0, 3.0, 2.0]) == {
        "n": 3,
        "median": 2.0,
        "min": 1.0,
        "max": 3.0,
        "mean": 2.0,
        "stdev": 1.0,
    }
    assert summarize([])["median"] is None


def test_saved_reports_compare_only_like_for_like(tmp_path: Path) -> None:
    report = report_json([_result("mtp3", [110.0])], Methodology())
    path = tmp_path / "old.json"
    path.write_text(json.dumps(report))
    loaded = load_report(path)
    same = Methodology(requests=30, warmups=5).to_dict()  # N and warm-ups do not matter
    assert methodology_differences(same, loaded["methodology"]) == []
    other = Methodology(max_tokens=128, enable_thinking=True).to_dict()
    diffs = methodology_differences(other, loaded["methodology"])
    assert any(d.startswith("max_tokens: 128 vs 256") for d in diffs)
    assert any(d.startswith("enable_thinking") for d in diffs)
    table = compare_table([_result("now", [55.0]), *loaded["configs"]])
    assert "mtp3" in table and "2.00x" in table
    path.write_text('{"tool": "other"}')
    with pytest.raises(ConfigurationError, match="not a bench_throughput report"):
        load_report(path)


def test_profile_mismatch_names_the_wrong_checkpoint_and_window() -> None:
    server = ServerInfo(
        "Qwen/Qwen3.6-35B-A3B-NVFP4", "Qwen/Qwen3.6-35B-A3B-NVFP4", 32768, None, False
    )
    profile = {
        "model": "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast",
        "served_model_name": "qwen3.6",
        "max_model_len": 65536,
    }
    problems = profile_mismatches(Target("fast", "http://x/v1", profile=profile), server)
    assert len(problems) == 2
    assert "different checkpoint" in problems[0] and "32768" in problems[1]
    right = ServerInfo("qwen3.6", "unsloth/Qwen3.6-35B-A3B-NVFP4-Fast", 65536, None, False)
    assert profile_mismatches(Target("fast", "http://x/v1", profile=profile), right) == []
    assert profile_mismatches(Target("none", "http://x/v1"), server) == []

"""bench_throughput against the vLLM-dialect DOUBLE (real HTTP on loopback, simulated speeds)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from emil.serving.bench import Methodology, Target, run_target
from emil.testing.brains import fixed_reply
from emil.testing.script import Reply
from emil.testing.vllm_answer import SpecDecode
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow

POLICY = fixed_reply(Reply(content="[scripted] story"))


@pytest.fixture
def mtp_double() -> Iterator[VLLMDouble]:
    with VLLMDouble(
        POLICY, window=65536, decode_tps=4000.0, spec_decode=SpecDecode(k=3, acceptance=0.8)
    ) as double:
        yield double


def test_methodology_on_the_wire_and_spec_decode_from_metrics(mtp_double: VLLMDouble) -> None:
    method = Methodology(max_tokens=48, requests=4, warmups=3)
    result = run_target(Target("mtp3", mtp_double.base_url, labels={"mtp": "3"}), method)

    bodies = mtp_double.requests
    assert len(bodies) == 7  # 3 warm-ups + 4 measured, warm-ups discarded from the figures
    assert len(result.samples) == 4
    prefixes = {b["messages"][0]["content"][:38] for b in bodies}
    assert len(prefixes) == 7  # a fresh UUID first in every prompt, warm-ups included
    for body in bodies:
        assert body["temperature"] == 0 and body["max_tokens"] == 48
        assert body["ignore_eos"] is True and body["stream"] is True
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert all(s.completion_tokens == 48 for s in result.samples)  # from usage
    assert all(s.ttft_s is not None and s.decode_tps is not None for s in result.samples)

    assert result.server.is_double and result.server.max_model_len == 65536
    assert result.server.version is not None and result.server.version.endswith("+double")
    assert result.metrics is not None
    rate = result.metrics.acceptance_rate
    length = result.metrics.mean_acceptance_length
    assert rate is not None and 0.3 < rate < 0.95
    assert length is not None and 1.5 < length < 4.0
    # Only the measured requests are in the delta: 4 x 48 generated tokens.
    assert result.metrics.counters["generation_tokens"] == 4 * 48
    assert result.metrics.prefix_cache_hits == 0
    assert any("DOUBLE" in w for w in result.warnings)


def test_no_spec_decode_and_no_stream(tmp_path: Path) -> None:
    with VLLMDouble(POLICY, window=32768, decode_tps=4000.0) as double:
        method = Methodology(max_tokens=16, requests=2, warmups=1, stream=False)
        result = run_target(Target("off", double.base_url), method)
    assert result.headline_kind == "e2e_tps"
    assert all(s.ttft_s is None for s in result.samples)
    assert result.metrics is not None and result.metrics.acceptance_rate is None
    assert any("no speculative-decoding drafts" in w for w in result.warnings)


def test_cli_side_by_side_json(
    mtp_double: VLLMDouble, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import bench_throughput as cli

    profile = tmp_path / "mtp3.toml"
    profile.write_text(
        'model = "q"\nmax_model_len = 65536\nlabels = { checkpoint = "NVFP4-Fast" }\n'
    )
    with VLLMDouble(POLICY, window=65536, decode_tps=2000.0) as off:
        out_file = tmp_path / "bench.json"
        code = cli.main(
            [
                f"mtp3={mtp_double.base_url}",
                f"off={off.root_url}",
                "-n",
                "3",
                "--warmups",
                "1",
                "--max-tokens",
                "32",
                "--no-progress",
                "--meta",
                "mtp3:mtp=3",
                "--meta",
                "off:mtp=off",
                "--profile",
                f"mtp3={profile}",
                "--json-out",
                str(out_file),
            ]
        )
    assert code == 0
    out = capsys.readouterr().out
    assert "mtp3" in out and "off" in out and "1.00x" in out
    report = json.loads(out_file.read_text())
    assert report["simulated"] is True
    assert report["methodology"]["requests"] == 3
    first, second = report["configs"]
    assert first["labels"] == {"checkpoint": "NVFP4-Fast", "mtp": "3"}
    assert first["profile"]["max_model_len"] == 65536
    # The profile names model "q", the double serves the Qwen checkpoint: said, not hidden.
    assert any("this measures a different checkpoint" in w for w in first["warnings"])
    assert not any("window" in w for w in first["warnings"])
    assert second["labels"] == {"mtp": "off"}
    assert first["ratio_to_first"] == 1.0 and second["ratio_to_first"] > 0
    assert first["spec_decode"]["acceptance_rate"] is not None
    assert second["spec_decode"]["acceptance_rate"] is None
    assert len(first["requests"]) == 3


def test_unreachable_endpoint_is_an_error_exit(capsys: pytest.CaptureFixture[str]) -> None:
    from tools import bench_throughput as cli

    assert cli.main(["http://127.0.0.1:9/v1", "--no-progress", "-n", "1"]) == 2
    assert "unreachable" in capsys.readouterr().err


def test_cli_compare_refuses_a_report_measured_differently(
    mtp_double: VLLMDouble, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools import bench_throughput as cli

    old = tmp_path / "old.json"
    base = [f"now={mtp_double.base_url}", "-n", "2", "--warmups", "1", "--no-progress"]
    assert cli.main([*base, "--max-tokens", "16", "--json-out", str(old)]) == 0
    capsys.readouterr()
    assert cli.main([*base, "--max-tokens", "16", "--compare", str(old)]) == 0
    assert "now (old.json)" in capsys.readouterr().out
    assert cli.main([*base, "--max-tokens", "32", "--compare", str(old)]) == 2
    assert "max_tokens: 32 vs 16" in capsys.readouterr().err


def test_identical_prompts_raise_prefix_cache_hits_and_warn(mtp_double: VLLMDouble) -> None:
    method = Methodology(max_tokens=16, requests=3, warmups=1, unique_prefix=False)
    result = run_target(Target("warm", mtp_double.base_url), method)
    assert result.metrics is not None
    hits = result.metrics.prefix_cache_hits
    assert hits is not None and hits > 0
    assert any(w.startswith("prefix-cache hits rose by") for w in result.warnings)
    assert all(s.cached_tokens > 0 for s in result.samples)

"""emil.agent.prometheus: records in, Prometheus samples out (one module, crafted records, no server
except the loopback endpoint of the last test)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from emil.agent.prometheus import MAX_LABEL_VALUES, Metrics, serve_metrics
from emil.config import load_settings
from emil.exceptions import ConfigurationError
from emil.recording import (
    CompletionRecord,
    ErrorRecord,
    EventRecord,
    HeaderRecord,
    OverflowRecord,
    Recorder,
    RecoveryRecord,
    RequestRecord,
    RetryRecord,
    ServiceRecord,
    SummaryRecord,
    ToolResultRecord,
    TrimRecord,
    TurnRecord,
)

TOOLS = [{"type": "function", "function": {"name": n}} for n in ("say", "follow")]


def sample(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels or None)


def test_requests_and_completions_give_prompt_gauges_and_calibration() -> None:
    m = Metrics()
    m.observe_all([
        HeaderRecord(model="qwen3.6", tools=TOOLS, bot_name="Emil", window=65536),
        RequestRecord(turn=1, step=1, predicted_tokens=3000, shared_prefix_tokens=0),
        CompletionRecord(turn=1, step=1, prompt_tokens=3004, cached_tokens=2900, completion_tokens=20, total_s=0.4),
        RequestRecord(turn=2, step=1, predicted_tokens=3100, shared_prefix_tokens=2990),
        CompletionRecord(turn=2, step=1, prompt_tokens=3100, completion_tokens=5, total_s=0.1),
    ])
    assert sample(m, "emil:prompt_predicted_tokens") == 3100
    assert sample(m, "emil:prompt_actual_tokens") == 3100
    assert sample(m, "emil:prompt_calibration_error_tokens_count") == 2
    # +4 and 0 (a histogram with negative buckets has no _sum in Prometheus' model)
    assert sample(m, "emil:prompt_calibration_error_tokens_bucket", le="-1.0") == 0
    assert sample(m, "emil:prompt_calibration_error_tokens_bucket", le="0.0") == 1
    assert sample(m, "emil:prompt_calibration_error_tokens_bucket", le="4.0") == 2
    assert sample(m, "emil:prompt_tokens_total") == 6100
    assert sample(m, "emil:prompt_shared_prefix_tokens_total") == 2990
    assert sample(m, "emil:prompt_cached_tokens_total") == 2900
    assert sample(m, "emil:completion_tokens_total") == 25
    assert sample(m, "emil:llm_request_duration_seconds_count") == 2
    assert sample(m, "emil:session_info", bot_name="Emil", model_name="qwen3.6", window="65536",
                  emil_version=__import__("emil").__version__, session_id="") == 1


def test_overflow_recovery_trims_and_gave_up() -> None:
    m = Metrics()
    m.observe_all([
        RequestRecord(turn=1, step=1, attempt=0, predicted_tokens=9000),
        OverflowRecord(turn=1, window=8192, prompt_tokens=9100),
        RecoveryRecord(turn=1, attempt=1, limit=7000),
        RequestRecord(turn=1, step=1, attempt=1, predicted_tokens=6900),
        TrimRecord(turn=1, rung="old_reasoning", tokens_freed=500),
        TrimRecord(turn=1, rung="evict_turns", tokens_freed=1500),
        TrimRecord(turn=2, rung="evict_turns", tokens_freed=700),
        CompletionRecord(turn=1, step=1, attempt=1, prompt_tokens=6950),
        # what the loop writes when a turn's prompt cannot fit after the ladder and the retries
        ErrorRecord(turn=3, error_type="ContextOverflowError", where="llm", message="cannot fit"),
        ErrorRecord(turn=4, error_type="ContextOverflowError", where="turn", message="a bug's"),
    ])
    assert sample(m, "emil:overflows_total") == 1
    assert sample(m, "emil:overflow_recoveries_total") == 1
    assert sample(m, "emil:overflow_gave_up_total") == 1
    assert sample(m, "emil:llm_requests_total") == 2
    assert sample(m, "emil:prompt_tokens_total") == 9000  # first attempts only
    # paired with its own attempt (6950 - 6900 = 50), not with the first (6950 - 9000)
    assert sample(m, "emil:prompt_calibration_error_tokens_bucket", le="16.0") == 0
    assert sample(m, "emil:prompt_calibration_error_tokens_bucket", le="64.0") == 1
    assert sample(m, "emil:trims_total", rung="evict_turns") == 2
    assert sample(m, "emil:trim_freed_tokens_total", rung="evict_turns") == 2200
    assert sample(m, "emil:trim_freed_tokens_total", rung="old_reasoning") == 500


def test_turns_events_reflexes_world_and_endpoint_state() -> None:
    m = Metrics()
    m.observe_all([
        HeaderRecord(tools=TOOLS),
        EventRecord(event={"kind": "chat", "sender": "alex"}, priority="urgent"),
        EventRecord(event={"kind": "reflex", "reflex": "defend"}, priority="normal"),
        EventRecord(event={"kind": "reflex", "reflex": "defend"}, priority="normal"),
        EventRecord(event={"kind": "disconnected", "reason": "x"}, priority="urgent"),
        ErrorRecord(turn=1, error_type="EndpointUnavailable", where="llm"),
        # an outage as the endpoint's Patience records it (issue #11): one down per episode
        ServiceRecord(turn=1, service="llm endpoint", state="down"),
        TurnRecord(turn=1, steps=2, latency_first_action_ms=420.0),
        TurnRecord(turn=2, steps=1, latency_first_action_ms=None),
    ])
    assert sample(m, "emil:events_total", priority="urgent") == 2
    assert sample(m, "emil:reflex_firings_total", reflex="defend") == 2
    assert sample(m, "emil:world_disconnects_total", kind="disconnected") == 1
    assert sample(m, "emil:world_connected") == 0
    assert sample(m, "emil:llm_endpoint_up") == 0
    assert sample(m, "emil:llm_endpoint_outages_total") == 1
    assert sample(m, "emil:llm_errors_total", error="EndpointUnavailable") == 1
    assert sample(m, "emil:turns_total") == 2 and sample(m, "emil:turn_steps_total") == 3
    assert sample(m, "emil:turn_latency_seconds_count") == 1
    assert sample(m, "emil:turn_latency_seconds_bucket", le="0.5") == 1
    assert sample(m, "emil:turn_latency_seconds_bucket", le="0.25") == 0
    m.observe(CompletionRecord(turn=3, step=1, prompt_tokens=10))
    assert sample(m, "emil:llm_endpoint_up") == 1
    m.observe(ServiceRecord(service="llm endpoint", state="down"))
    m.observe(ServiceRecord(service="llm endpoint", state="up", attempts=3))
    assert sample(m, "emil:llm_endpoint_outages_total") == 2 and sample(m, "emil:llm_endpoint_up") == 1
    m.observe(ServiceRecord(service="minecraft server", state="down"))
    assert sample(m, "emil:world_reconnects_total") == 0
    m.observe(ServiceRecord(service="minecraft server", state="up"))
    assert sample(m, "emil:world_connected") == 1 and sample(m, "emil:world_reconnects_total") == 1


def test_retries_and_summary_requests() -> None:
    m = Metrics()
    m.observe_all([
        RetryRecord(turn=1, service="llm endpoint", attempt=1, error="503", delay_s=0.4),
        RetryRecord(turn=1, service="llm endpoint", attempt=2, error="503", delay_s=0.9),
        RetryRecord(service="minecraft server", attempt=1, error="refused", delay_s=0.5),
        SummaryRecord(outcome="ready", prompt_tokens=1200, completion_tokens=150),
        SummaryRecord(outcome="ready", prompt_tokens=1300, completion_tokens=90),
        SummaryRecord(outcome="failed", reason="busy"),
    ])
    assert sample(m, "emil:service_retries_total", service="llm") == 2
    assert sample(m, "emil:service_retries_total", service="world") == 1
    assert sample(m, "emil:summary_requests_total", outcome="ready") == 2
    assert sample(m, "emil:summary_requests_total", outcome="failed") == 1
    assert sample(m, "emil:summary_prompt_tokens_total") == 2500
    assert sample(m, "emil:summary_completion_tokens_total") == 240
    # a summary request is not a turn's request
    assert sample(m, "emil:llm_requests_total") == 0
    m.observe(ServiceRecord(service="minecraft server", state="down"))
    assert sample(m, "emil:world_connected") == 0


def test_labels_from_data_stay_few() -> None:
    """A model inventing tool names, or a flood of odd reflex names, cannot blow up cardinality."""
    m = Metrics()
    m.observe(HeaderRecord(tools=TOOLS))
    for i in range(200):
        m.observe(ToolResultRecord(name=f"invented_{i}", ok=False))
        m.observe(EventRecord(event={"kind": "reflex", "reflex": f"r{i}"}))
    m.observe(ToolResultRecord(name="say", ok=True))
    m.observe(EventRecord(event={"kind": "reflex", "reflex": "<|im_start|>system"}))
    assert sample(m, "emil:tool_calls_total", tool="unknown", outcome="failed") == 200
    assert sample(m, "emil:tool_calls_total", tool="say", outcome="ok") == 1
    reflex_series = [s for f in m.registry.collect() if f.name == "emil:reflex_firings" for s in f.samples if s.name.endswith("_total")]
    assert len(reflex_series) == MAX_LABEL_VALUES + 1  # the first 32 names and "other"
    assert sample(m, "emil:reflex_firings_total", reflex="other") == 200 - MAX_LABEL_VALUES + 1


class _Boom(Exception):
    pass


def test_recorder_feeds_observers_and_drops_a_failing_one(tmp_path: Path) -> None:
    seen: list[BaseModel] = []
    calls = 0

    def failing(_: BaseModel) -> None:
        nonlocal calls
        calls += 1
        raise _Boom

    rec = Recorder(tmp_path / "r.jsonl")
    rec.add_observer(failing)
    rec.add_observer(seen.append)
    rec.write(TurnRecord(turn=1))
    rec.write(TurnRecord(turn=2))
    rec.close()
    assert calls == 1  # removed after its first failure; the session went on
    assert [type(r).__name__ for r in seen] == ["TurnRecord", "TurnRecord", "EndRecord"]


@pytest.mark.parametrize(
    ("given", "stored"),
    [("127.0.0.1:9477", "127.0.0.1:9477"), ("off", "off"), ("OFF", "off"), ("[::1]:0", "[::1]:0"), ("localhost:80", "localhost:80")],
)
def test_metrics_address_setting(given: str, stored: str) -> None:
    assert load_settings({"metrics_address": given}, env={}, config_file=None).settings.metrics_address == stored


@pytest.mark.parametrize("bad", ["9477", "127.0.0.1:", "127.0.0.1:99999", "host:port"])
def test_bad_metrics_address_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="metrics_address"):
        load_settings({"metrics_address": bad}, env={}, config_file=None)


def test_serves_on_loopback_and_a_taken_port_is_a_configuration_error() -> None:
    assert serve_metrics("off") is None
    server = serve_metrics("127.0.0.1:0")
    assert server is not None
    try:
        server.metrics.observe(TurnRecord(turn=1, steps=1, latency_first_action_ms=80))
        with urllib.request.urlopen(server.url, timeout=5) as response:
            text = response.read().decode()
        names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
        assert {"emil:turns_total", "emil:turn_latency_seconds_bucket", "emil:llm_endpoint_up"} <= names
        with pytest.raises(ConfigurationError, match=f"cannot serve metrics on 127.0.0.1:{server.port}"):
            serve_metrics(f"127.0.0.1:{server.port}")
    finally:
        server.close()


def _exposed_names(m: Metrics) -> set[str]:
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_count", "_sum"], "info": ["_info"]}
    return {f.name + s for f in m.registry.collect() for s in suffixes.get(f.type, [""])}


def test_the_shipped_grafana_dashboard_asks_for_metrics_that_exist() -> None:
    import json
    import re

    dashboard = json.loads((Path(__file__).resolve().parents[3] / "docs" / "grafana-emil.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    wanted = {n for e in exprs for n in re.findall(r"emil:[a-z_]+", e)}
    exposed = _exposed_names(Metrics())
    assert wanted and wanted <= exposed, sorted(wanted - exposed)
    # every metric Emil exposes is on the dashboard (created timestamps aside)
    families = {re.sub(r"_(total|bucket|count|sum|info)$", "", n) for n in exposed}
    shown = {re.sub(r"_(total|bucket|count|sum|info)$", "", n) for n in wanted}
    assert families - shown <= {"emil:session"}, sorted(families - shown)  # the $job variable's query

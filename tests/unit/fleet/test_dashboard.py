"""The shipped Grafana dashboard shows the fleet: per-NPC turn latency, requests, errors."""

from __future__ import annotations

import json
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[3] / "docs" / "grafana-emil.json"


def test_every_query_follows_the_npc_variable_and_the_fleet_panels_split_by_npc() -> None:
    d = json.loads(DASHBOARD.read_text())
    assert any(v["name"] == "npc" and "npc)" in v["query"] for v in d["templating"]["list"])
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in d["panels"]}
    for title, queries in exprs.items():
        for q in queries:
            assert 'npc=~"$npc"' in q, (title, q)
    by_npc = [q for qs in exprs.values() for q in qs if "by (npc" in q]
    for metric in ("emil:turn_latency_seconds_bucket", "emil:llm_requests_total", "emil:errors_total"):
        assert any(metric in q for q in by_npc), metric

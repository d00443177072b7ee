"""Live metrics, scraped over real HTTP while a session plays, parsed with prometheus_client's
own parser and checked against the session's recording.

Real embedded server, real bots, the real loop and client; the LLM is the vLLM-dialect double
answering with a SCRIPTED brain (not a model). The endpoint is served on a free loopback port.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from emil.recording import (
    CompletionRecord,
    EventRecord,
    RequestRecord,
    ToolResultRecord,
    TurnRecord,
)
from emil.testing.brains import DemoBrain
from tests.integration.agent.services import ALEX_HITS_EMIL, World, events_of, running_world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(w: World) -> Samples:
    """Every sample of the session's /metrics, by (name, sorted labels)."""
    metrics = w.session.metrics
    assert metrics is not None and metrics.host == "127.0.0.1"
    async with httpx.AsyncClient() as client:
        response = await client.get(metrics.url, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            labels = dict(s.labels)
            assert labels.pop("npc", None) == "Emil", s  # every sample names its NPC (docs/fleet.md)
            out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


async def test_metrics_follow_a_session_through_an_llm_outage(tmp_path: Path) -> None:
    async with running_world(tmp_path, DemoBrain()) as w:
        await w.say("Hello Emil!")
        await w.wait_for("greeting", lambda: any("Hello, alex" in h for h in w.heard))
        await w.wait_for("turn record", lambda: any(isinstance(r, TurnRecord) for r in w.records()))
        first = await scrape(w)
        records = w.records()
        completions = [r for r in records if isinstance(r, CompletionRecord)]
        requests = [r for r in records if isinstance(r, RequestRecord)]
        assert value(first, "emil:turns_total") >= 1
        assert value(first, "emil:turn_latency_seconds_count") >= 1
        assert value(first, "emil:prompt_actual_tokens") == completions[-1].prompt_tokens
        assert value(first, "emil:prompt_predicted_tokens") == requests[-1].predicted_tokens
        assert value(first, "emil:prompt_calibration_error_tokens_count") == len(completions)
        assert value(first, "emil:llm_endpoint_up") == 1
        assert value(first, "emil:tool_calls_total", tool="say", outcome="ok") >= 1
        assert value(first, "emil:prompt_shared_prefix_tokens_total") > 0
        assert value(first, "emil:session_info", bot_name="Emil", emil_version=__import__("emil").__version__,
                     model_name=w.session.served.id, session_id=records[0].session_id,  # type: ignore[union-attr]
                     window=str(w.session.window)) == 1

        # The LLM server goes away: the endpoint is down and the reflex still fires.
        near = await w.player.act("go_to", {"player": "Emil", "range": 1.5}, timeout=30)
        assert near.ok, near.error
        w.double.stop()
        out = await w.player.act("attack", {"target": "Emil", "duration_s": 2, "authority": ALEX_HITS_EMIL}, timeout=10)
        assert out.ok, out.error
        await w.wait_for("reflex", lambda: bool(events_of(w.records(), "reflex")), within=20)
        # (an outage is a "service down" record of the endpoint's Patience: issue #11)
        await w.wait_for("outage", lambda: any(r.kind == "service" and r.state == "down" for r in w.records()))  # type: ignore[union-attr]
        down = await scrape(w)
        assert value(down, "emil:llm_endpoint_up") == 0
        assert value(down, "emil:llm_endpoint_outages_total") == 1
        assert total(down, "emil:reflex_firings_total") >= 1

        w.double.start()
        await w.wait_for("complaint after the outage", lambda: any("Ouch" in h for h in w.heard), within=40)
        await w.stop_agent()  # the loop has returned: no record comes after this
        back = await scrape(w)
        records = w.records()
    assert value(back, "emil:llm_endpoint_up") == 1
    # Counters agree with the recording they were fed from.
    assert value(back, "emil:turns_total") == sum(isinstance(r, TurnRecord) for r in records)
    assert total(back, "emil:tool_calls_total") == sum(isinstance(r, ToolResultRecord) for r in records)
    assert total(back, "emil:events_total") == sum(isinstance(r, EventRecord) for r in records)
    assert value(back, "emil:llm_requests_total") == sum(isinstance(r, RequestRecord) for r in records)
    assert total(back, "emil:reflex_firings_total") == len(events_of(records, "reflex"))

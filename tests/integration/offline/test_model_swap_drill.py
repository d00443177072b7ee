"""The model-swap drill (docs/context.md): the shipped sample recording replayed under every
family against the vLLM-dialect double (not vLLM) serving as that family, and as a model of no
family: zero overflows and calibration error 0 under each, with trims."""

from __future__ import annotations

from pathlib import Path

import pytest

from emil.model.family import FAMILIES
from emil.offline.swap_drill import UNKNOWN, drill, format_drill
from emil.testing.brains import echo_brain
from emil.testing.vllm_double import VLLMDouble

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parents[3] / "emil" / "data" / "samples" / "demo-session.jsonl"


async def test_one_recording_under_every_family() -> None:
    def serve(family: str, window: int) -> VLLMDouble:
        return VLLMDouble.serving(echo_brain, None if family == UNKNOWN else family, window=window)

    rows = await drill(SAMPLE, serve=serve)
    table = format_drill(rows)
    assert [r.served_as for r in rows] == [*(f.name for f in FAMILIES), UNKNOWN], table
    for row in rows:
        assert row.requests > 5 and row.trims > 0, table
        assert row.overflows == 0 and row.errors == 0, table
        assert row.max_calibration_error == 0, table
    resolved = {r.served_as: r.resolved.split(" ")[0] for r in rows}
    assert resolved == {**{f.name: f.name for f in FAMILIES}, UNKNOWN: "server"}, table
    unknown = rows[-1]
    assert 0 < unknown.tokenize_calls <= 3 * unknown.requests, table
    assert all(r.tokenize_calls == 0 for r in rows[:-1]), table
    assert table.rstrip().endswith("calibration error 0 under every family")

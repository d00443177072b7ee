"""Replay's settings: a recording's header loaded the way live loads a config file."""

from __future__ import annotations

import pytest

from emil.config import Settings, SettingsError, load_recorded_settings


def test_the_recording_then_the_flags_with_their_sources() -> None:
    recorded = Settings(bot_name="Mira", output_reserve=4096, operators=("Olga",)).public_dump()
    loaded = load_recorded_settings(recorded, {"output_reserve": 2048, "window": None})
    s = loaded.settings
    assert (s.bot_name, s.operators, s.output_reserve) == ("Mira", ("Olga",), 2048)
    assert loaded.sources["bot_name"] == "the recording"
    assert loaded.sources["output_reserve"] == "flag --output-reserve"
    assert loaded.sources["window"] == "the recording"  # None in the dump: auto, as recorded
    assert load_recorded_settings({}).settings == Settings()


def test_what_this_version_refuses_or_does_not_know_is_left_at_its_default() -> None:
    recorded = {"bot_name": "Mira", "step_limit": 0, "a_setting_from_the_future": 3, "api_key": "***",
                "trim_rungs": ["fold", "no_such_rung", "evict", "cut_newest"]}
    s = load_recorded_settings(recorded).settings
    assert s.bot_name == "Mira"
    assert (s.step_limit, s.api_key, s.trim_rungs) == (Settings().step_limit, "EMPTY", Settings().trim_rungs)


def test_values_that_disagree_fall_back_to_every_default() -> None:
    # operators and npc_players may not share a name: a check across fields, no single culprit.
    s = load_recorded_settings({"operators": ["Olga"], "npc_players": ["Olga"], "bot_name": "Mira"}).settings
    assert s == Settings()


def test_a_bad_flag_is_an_error_naming_it() -> None:
    with pytest.raises(SettingsError, match=r"bad setting output_reserve=0 \(flag --output-reserve\)"):
        load_recorded_settings({"bot_name": "Mira"}, {"output_reserve": 0})

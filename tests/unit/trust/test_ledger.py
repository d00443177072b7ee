"""The ownership ledger: chests, holdings, the give rate, and a damaged or read-only file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from emil.trust.ledger import SELF, UNSURE, Ledger, chest_key


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_chests_and_holdings_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "ownership.json"
    led = Ledger.open(path)
    k = chest_key(4, 5, 0)
    led.set_chest(k, "bob", "placed")
    led.set_chest(chest_key(1, 2, 3, "minecraft:the_nether"), SELF, "emil")
    led.hold("bob", {"diamond": 5})
    led.hold(SELF, {"dirt": 3})  # Emil's own: nothing to note
    again = Ledger.open(path)
    assert again.chest_owner(k) == "bob" and again.chest_how(k) == "placed"
    assert again.chest_owner("1,2,3@the_nether") == SELF
    assert again.held == {"bob": {"diamond": 5}}
    again.forget_chest(k)
    assert Ledger.open(path).chest_owner(k) is None


def test_own_items_and_spending() -> None:
    led = Ledger()
    led.hold("bob", {"diamond": 5})
    led.hold("carl", {"diamond": 1})
    inv = {"diamond": 8, "dirt": 2}
    assert led.own(inv, "diamond") == 2 and led.own(inv, "dirt") == 2
    assert led.held_total("diamond", besides=frozenset({"bob"})) == 1
    assert led.spend("diamond", 3, first=("bob",)) == {"bob": 3}
    assert led.held_for("bob") == {"diamond": 2}
    assert led.release("bob", "diamond", 10) == 2 and "bob" not in led.held


def test_reconcile_cuts_holdings_to_what_is_carried() -> None:
    led = Ledger()
    led.hold("bob", {"diamond": 5, "bread": 2})
    led.hold("amy", {"diamond": 2})
    led.reconcile({"diamond": 4})  # died, a reflex ate the bread...
    assert led.held_total("diamond") == 4 and led.held_total("bread") == 0
    assert led.held == {"bob": {"diamond": 4}}  # cut in name order: amy first


def test_the_give_rate_counts_within_the_hour() -> None:
    clock = Clock()
    led = Ledger(clock=clock)
    led.record_gift("carl", 10)
    clock.now += 1800
    led.record_gift("carl", 5)
    led.record_gift("dave", 1)
    assert led.given_recently("carl") == 15
    clock.now += 1801
    assert led.given_recently("carl") == 5 and led.given_recently("dave") == 1


@pytest.mark.parametrize("content", ["{not json", '{"version": 99}', '{"version": 1, "chests": []}', "[]", '"x"'])
def test_a_damaged_file_is_moved_aside_and_emil_plays_on_unsure(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ownership.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING, "emil.trust"):
        led = Ledger.open(path)
    assert len(caplog.records) == 1 and "unsure" in caplog.text
    assert (tmp_path / "ownership.json.damaged").read_text() == content
    assert led.unsure and led.chests == {}
    led.reconcile({"diamond": 3, "bread": 1})  # everything carried now: unknown owner
    assert led.held == {UNSURE: {"diamond": 3, "bread": 1}}
    assert led.own({"diamond": 3, "bread": 1}, "diamond") == 0
    led.reconcile({"diamond": 3, "bread": 1, "dirt": 4})  # collected later: Emil's own
    assert led.own({"diamond": 3, "bread": 1, "dirt": 4}, "dirt") == 4
    assert json.loads(path.read_text())["held"][UNSURE] == {"bread": 1, "diamond": 3}


def test_a_store_that_cannot_be_written_warns_once_and_the_rules_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "a-file").write_text("")
    led = Ledger.open(tmp_path / "a-file" / "ownership.json")  # its directory is a file: every write fails
    with caplog.at_level(logging.WARNING, "emil.trust"):
        led.set_chest(chest_key(0, 0, 0), "bob", "placed")
        led.hold("bob", {"diamond": 1})
    assert len(caplog.records) == 1 and "cannot write" in caplog.text
    assert led.chest_owner(chest_key(0, 0, 0)) == "bob" and led.held_for("bob") == {"diamond": 1}
    assert not led.save()


def test_an_unreadable_file_is_unsure_too(tmp_path: Path) -> None:
    path = tmp_path / "ownership.json"
    path.mkdir()  # a directory where the file should be: reading fails with an OSError
    led = Ledger.open(path)
    assert led.unsure

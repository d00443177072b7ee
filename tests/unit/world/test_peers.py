"""Other Emils on the same server find each other without a list (emil.world.peers)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from emil.world.peers import PeerRegistry


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_emils_on_one_server_see_each_other_and_not_others(tmp_path: Path) -> None:
    clock = Clock()
    with (
        PeerRegistry("127.0.0.1", 25565, "Emil", root=tmp_path, clock=clock) as emil,
        PeerRegistry("127.0.0.1", 25565, "Otto", root=tmp_path, clock=clock) as otto,
        PeerRegistry("10.0.0.2", 25565, "Ida", root=tmp_path, clock=clock),
    ):
        assert emil.peers() == {"Otto"} and otto.peers() == {"Emil"}
        # an entry of a process that is gone, and a damaged one, are no peers
        (emil.dir / "Ghost.json").write_text(json.dumps({"name": "Ghost", "pid": 2**22 + 12345}))
        (emil.dir / "Broken.json").write_text("{")
        clock.now += 10
        assert emil.peers() == {"Otto"}
    assert not (tmp_path / "127.0.0.1_25565" / "Emil.json").exists()  # removed on the way out


def test_a_directory_that_cannot_be_written_means_no_peers(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "file").write_text("")
    with caplog.at_level(logging.WARNING, "emil.world"), PeerRegistry("h", 1, "Emil", root=tmp_path / "file") as reg:
        assert reg.peers() == frozenset()
    assert "npc_players" in caplog.text


def test_peers_are_npcs_to_the_budget(tmp_path: Path) -> None:
    from emil.trust.npc import TurnBudget

    with PeerRegistry("h", 1, "Emil", root=tmp_path) as emil, PeerRegistry("h", 1, "Otto", root=tmp_path):
        budget = TurnBudget(peers=emil.peers)
        assert budget.is_npc("Otto") and not budget.is_npc("alex")

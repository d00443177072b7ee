"""The notes store: upserts, bounds, forget, export, and what happens to bad directories,
corrupt files, a second Emil and a process killed mid-write."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from emil.memory import DataDirLocked, Fact, MemoryStore, MemoryStoreError
from emil.memory.store import DB_FILE, KEEP_PER_TOPIC

ROOT = Path(__file__).resolve().parents[3]


def _gift(player: str, item: str, n: int) -> Fact:
    return Fact(about="player", subject=player, topic="gave_me", detail=item, count=n)


def test_a_repeated_fact_adds_up_in_one_note(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    store.learn(_gift("alex", "bread", 3), t=100.0)
    store.learn(_gift("alex", "bread", 2), t=200.0)
    store.learn(_gift("alex", "apple", 1), t=150.0)
    notes = [n for n in store.notes() if n.topic == "gave_me"]
    assert [(n.detail, n.count, n.first_t, n.last_t) for n in notes] == [("bread", 5, 100.0, 200.0), ("apple", 1, 150.0, 150.0)]
    store.close()


def test_notes_survive_reopening(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    store.learn(Fact(about="place", subject="chest", topic="at", detail="10,64,-5", told_by="alex"), t=1.0)
    store.close()
    again = MemoryStore.open(tmp_path)
    [note] = again.notes()
    assert (note.subject, note.detail, note.told_by, note.source) == ("chest", "10,64,-5", "alex", "event")
    again.close()


def test_a_flood_keeps_only_the_newest_notes_per_topic(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    for i in range(200):
        store.learn(Fact(about="player", subject="spammer", topic="asked", detail=f"line {i}"), t=float(i))
    asked = [n.detail for n in store.notes() if n.topic == "asked"]
    assert len(asked) == KEEP_PER_TOPIC
    assert set(asked) == {f"line {i}" for i in range(200 - KEEP_PER_TOPIC, 200)}
    store.close()


def test_facts_from_a_summary_are_marked_so(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    n = store.facts_from_summary(
        [Fact(about="player", subject="alex", topic="trust", detail="kept every promise"),
         Fact(about="goal", subject="build a house for alex", topic="goal", note="active")],
        t=5.0,
    )
    assert n == 2
    assert {note.source for note in store.notes()} == {"summary"}
    store.close()


def test_forget_removes_a_player_and_what_they_told(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    store.learn(_gift("alex", "bread", 3), t=1.0)
    store.learn(Fact(about="place", subject="chest", topic="at", detail="1,2,3", told_by="alex"), t=1.0)
    store.learn(_gift("steve", "apple", 1), t=1.0)
    assert store.forget("ALEX") == 2
    assert [n.subject for n in store.notes()] == ["steve"]
    assert store.forget("nobody") == 0
    store.close()


def test_goals_left_active_are_interrupted_at_the_next_start(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    store.set_goal_status("collect 5 oak_log for alex", "active", t=1.0)
    store.set_goal_status("go_to home", "done", t=1.0)
    assert store.interrupt_goals(t=2.0) == 1
    assert {n.subject: n.note for n in store.notes()} == {"collect 5 oak_log for alex": "interrupted", "go_to home": "done"}
    store.close()


def test_export_is_json(tmp_path: Path) -> None:
    store = MemoryStore.open(tmp_path)
    store.learn(_gift("alex", "bread", 3), t=1.0)
    data = json.loads(json.dumps(store.export()))
    assert data["notes"][0]["subject"] == "alex" and data["schema_version"] == 1
    store.close()


def test_a_second_emil_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    first = MemoryStore.open(tmp_path)
    code = textwrap.dedent(f"""
        from pathlib import Path
        from emil.memory import MemoryStore, DataDirLocked
        try:
            MemoryStore.open(Path({str(tmp_path)!r}))
        except DataDirLocked as e:
            print("LOCKED", e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.startswith("LOCKED") and "in use by another Emil" in out.stdout
    first.close()
    MemoryStore.open(tmp_path).close()  # released with the first one


def test_the_lock_is_per_process_and_released_on_close(tmp_path: Path) -> None:
    first = MemoryStore.open(tmp_path)
    with pytest.raises(DataDirLocked, match="give each Emil its own data_dir"):
        MemoryStore.open(tmp_path)
    first.close()
    MemoryStore.open(tmp_path).close()


def test_an_unwritable_data_dir_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(MemoryStoreError, match=r"data_dir .*a-file/notes is not writable .*set data_dir"):
        MemoryStore.open(blocker / "notes")


def test_a_corrupt_database_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"this is not an sqlite file at all" * 100)
    with pytest.raises(MemoryStoreError, match=r"unreadable .*move it aside"):
        MemoryStore.open(tmp_path)
    with pytest.raises(MemoryStoreError, match="unreadable"):
        MemoryStore.open_existing(tmp_path)
    # The failed start released the lock: a fixed directory can be used at once.
    (tmp_path / DB_FILE).unlink()
    MemoryStore.open(tmp_path).close()


def test_another_sqlite_file_is_not_taken_for_notes(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_FILE)
    conn.execute("CREATE TABLE other (x)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with pytest.raises(MemoryStoreError, match="not Emil's notes"):
        MemoryStore.open_existing(tmp_path)


def test_a_process_killed_mid_write_leaves_a_readable_database(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from emil.memory import MemoryStore, Fact
        store = MemoryStore.open(Path({str(tmp_path)!r}))
        for i in range(100000):
            store.learn(Fact(about="player", subject=f"p{{i % 50}}", topic="asked", detail="x" * 300 + str(i)), t=float(i))
            if i == 400:
                print("WRITING", flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "WRITING"
        proc.kill()  # SIGKILL: no cleanup, maybe in the middle of a transaction
        proc.wait()
    store = MemoryStore.open(tmp_path)  # integrity-checked on open
    assert len(store.notes()) >= 400
    store.close()


def test_a_deleted_database_is_said_at_start_and_under_a_running_emil(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from emil.memory.archive import ARCHIVE_FILE
    from emil.memory.wiring import open_memory

    with open_memory(tmp_path, bot_name="Emil") as memory:
        memory.store.learn(Fact(about="player", subject="alex", topic="seen"), t=1.0)
        memory.archive.add(time.time(), "chat", "hello there", speaker="alex")
        (tmp_path / DB_FILE).unlink()  # an operator's rm while Emil plays
        with caplog.at_level(logging.WARNING, logger="emil.memory"):
            memory.check()
        assert any("deleted while Emil ran" in r.message for r in caplog.records)
    with open_memory(tmp_path, bot_name="Emil") as memory:  # nothing was lost
        assert [n.subject for n in memory.store.notes()] == ["alex"] and memory.archive.count() == 1
    caplog.clear()
    (tmp_path / DB_FILE).unlink()
    (tmp_path / ARCHIVE_FILE).unlink()
    with caplog.at_level(logging.WARNING, logger="emil.memory"), open_memory(tmp_path, bot_name="Emil") as memory:
        assert memory.store.notes() == []
    said = [r.message for r in caplog.records]
    assert any("notes database" in m and "is gone" in m for m in said), said
    caplog.clear()
    (tmp_path / ARCHIVE_FILE).unlink()
    with caplog.at_level(logging.WARNING, logger="emil.memory"), open_memory(tmp_path, bot_name="Emil"):
        pass
    assert [r.message for r in caplog.records if "archive" in r.message and "is gone" in r.message]


def test_a_fresh_data_dir_and_one_from_before_the_archive_start_without_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from emil.memory.wiring import open_memory

    old = MemoryStore.open(tmp_path / "old")  # notes from before the archive existed
    old.close()
    with caplog.at_level(logging.WARNING, logger="emil.memory"):
        for folder in (tmp_path / "fresh", tmp_path / "old"):
            with open_memory(folder, bot_name="Emil"):
                pass
    assert not caplog.records


def test_a_full_disk_at_start_is_one_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from emil.memory import store as store_mod

    real = shutil.disk_usage
    monkeypatch.setattr(store_mod.shutil, "disk_usage", lambda p: real(p)._replace(free=1024 * 100))
    with pytest.raises(MemoryStoreError, match=r"has 100 KiB free, less than the 8 MiB .* free space or point data_dir elsewhere"):
        MemoryStore.open(tmp_path)
    monkeypatch.undo()
    MemoryStore.open(tmp_path).close()  # the lock was released: the next start works

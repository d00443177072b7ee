"""The archive: lines in, ranked search out, kept across reopening, retention, hostile queries,
and a disk that refuses writes (the line waits in memory and is written later)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from emil.memory import archive as archive_mod
from emil.memory.archive import ARCHIVE_FILE, Archive, fts_query, words
from emil.memory.store import MemoryStoreError

DAY = 1_779_948_000.0


def _filled(tmp_path: Path) -> Archive:
    a = Archive.open(tmp_path, now=DAY)
    a.add(DAY + 1, "chat", "Emil, my chest is at 12 64 -7", speaker="alex")
    a.add(DAY + 2, "chat", "anyone seen diamonds?", speaker="bella")
    a.add(DAY + 3, "chat", "the gate code is 4471, don't tell cody", speaker="dana")
    a.add(DAY + 4, "said", "Sure, I'll bring you torches later", speaker="Emil", target="gus")
    a.add(DAY + 5, "event", "you picked up 3 bread (tossed by alex)", speaker="alex")
    return a


def test_a_search_finds_the_line_by_any_of_its_words_best_first(tmp_path: Path) -> None:
    a = _filled(tmp_path)
    [line, *_] = a.search(["what", "was", "the", "gate", "code"])
    assert (line.speaker, line.text) == ("dana", "the gate code is 4471, don't tell cody")
    assert [x.text for x in a.search(["torch"])] == ["Sure, I'll bring you torches later"]  # stemmed
    assert a.search(["nothing-like-this"]) == []
    a.close()


def test_lines_survive_reopening_and_the_speaker_column_counts(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    again = Archive.open(tmp_path, now=DAY)
    assert again.count() == 5
    by_alex = again.search(["alex"], limit=10)
    assert {x.text for x in by_alex} == {"Emil, my chest is at 12 64 -7", "you picked up 3 bread (tossed by alex)"}
    again.close()


def test_before_and_exclude_leave_lines_out(tmp_path: Path) -> None:
    a = _filled(tmp_path)
    assert a.search(["chest", "gate"], before=DAY + 2) == [a.search(["chest"])[0]]
    first = a.search(["chest", "gate"])
    assert [x.id for x in a.search(["chest", "gate"], exclude={first[0].id})] == [first[1].id]
    assert [x.kind for x in a.search(["torches", "bread"], kinds=("said",))] == ["said"]
    a.close()


def test_a_word_searched_before_it_was_said_is_found_once_said(tmp_path: Path) -> None:
    a = _filled(tmp_path)
    assert a.search(["Ortalmi"]) == []
    a.add(DAY + 9, "chat", "call me Ortalmi", speaker="cody")
    assert [x.text for x in a.search(["Ortalmi"])] == ["call me Ortalmi"]
    a.close()


def test_retention_drops_old_lines_at_open(tmp_path: Path) -> None:
    a = Archive.open(tmp_path, now=DAY)
    a.add(DAY - 100 * 86400, "chat", "ancient words", speaker="alex")
    a.add(DAY - 10 * 86400, "chat", "recent words", speaker="alex")
    a.close()
    b = Archive.open(tmp_path, retention_days=90, now=DAY)
    assert [x.text for x in b.search(["words"])] == ["recent words"]
    b.close()
    c = Archive.open(tmp_path, retention_days=0, now=DAY + 1000 * 86400)  # 0 keeps everything
    assert c.count() == 1
    c.close()


@pytest.mark.parametrize("hostile", ['" OR 1=1 --', "NEAR(a b)", "col:text", "a AND NOT b", "*", "^x", '"""', "x'); DROP TABLE lines; --"])
def test_a_hostile_query_is_words_only(tmp_path: Path, hostile: str) -> None:
    a = _filled(tmp_path)
    a.search([hostile])  # never an FTS5 syntax error, never SQL
    assert a.count() == 5
    query = fts_query([hostile])
    assert all(part.startswith('"') and part.endswith('"') for part in query.split(" OR ") if part)
    a.close()


def test_words_split_as_the_index_does() -> None:
    assert words("Alex's chest, 12 64 -7! über-cool_x") == ["alex's", "chest", "12", "64", "7", "über", "cool", "x"]


def test_lines_are_committed_in_bursts_within_a_second(tmp_path: Path) -> None:
    clock = [0.0]
    a = Archive.open(tmp_path, now=DAY)
    a._clock = lambda: clock[0]
    a.add(DAY, "chat", "one", speaker="alex")
    a.add(DAY, "chat", "two", speaker="alex")
    assert a.pending == 2 and a.written == 0  # searchable, not yet committed
    clock[0] = archive_mod.COMMIT_S
    a.add(DAY, "chat", "three", speaker="alex")
    assert a.pending == 0 and a.written == 3  # one commit for the burst
    for i in range(archive_mod.BATCH):
        a.add(DAY, "chat", f"flood {i}", speaker="dana")
    assert a.pending == 0  # a full batch commits at once
    a.add(DAY, "chat", "waits", speaker="dana")
    a.check()  # a turn's start commits what waits
    assert a.pending == 0
    a.close()


def test_a_long_line_is_clipped(tmp_path: Path) -> None:
    a = Archive.open(tmp_path, now=DAY)
    a.add(DAY, "chat", "spam " * 1000, speaker="x")
    [line] = a.search(["spam"])
    assert len(line.text) == archive_mod.LINE_CHARS
    a.close()


class _Broken:
    """A connection whose writes fail like a full or read-only disk, until healed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.broken = conn, True

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if self.broken and sql.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __enter__(self) -> _Broken:
        self.conn.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.__exit__(*exc)  # type: ignore[arg-type]

    def close(self) -> None:
        self.conn.close()


def test_a_refused_write_waits_in_memory_is_searched_and_written_later(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    a = Archive.open(tmp_path, now=DAY)
    a._clock = lambda: clock[0]
    a.add(DAY, "chat", "written before the fault", speaker="alex")
    a.check()  # a turn starts: committed
    broken = _Broken(a._file.conn)
    a._file.conn = broken  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="emil.memory"):
        for i in range(3):
            a.add(DAY + 1 + i, "chat", f"waiting line {i} about lapis", speaker="bella")
            a.check()
    assert sum("cannot write to" in r.message for r in caplog.records) == 1  # one warning
    assert a.pending == 3
    assert a.search(["lapis"])[0].text.startswith("waiting line")
    broken.broken = False
    a.check()  # not yet time to retry
    assert a.pending == 3
    clock[0] = archive_mod.RETRY_S + 1
    a.check()
    assert a.pending == 0
    a.close()
    b = Archive.open(tmp_path, now=DAY)
    assert b.count() == 4  # nothing lost, nothing written twice
    b.close()


def test_a_deleted_archive_is_written_back_from_the_open_copy(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a = _filled(tmp_path)
    (tmp_path / ARCHIVE_FILE).unlink()
    with caplog.at_level(logging.WARNING, logger="emil.memory"):
        a.check()
    assert any("deleted while Emil ran" in r.message for r in caplog.records)
    a.add(DAY + 9, "chat", "after the restore", speaker="alex")
    a.close()
    b = Archive.open(tmp_path, now=DAY)
    assert b.count() == 6
    b.close()


def test_a_file_that_is_not_an_archive_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / ARCHIVE_FILE).write_bytes(b"not a database at all" * 100)
    with pytest.raises(MemoryStoreError, match="unreadable"):
        Archive.open(tmp_path)
    other = sqlite3.connect(tmp_path / "x.sqlite3")
    other.execute("CREATE TABLE something (x)")
    other.commit()
    other.close()
    (tmp_path / "x.sqlite3").replace(tmp_path / ARCHIVE_FILE)
    with pytest.raises(MemoryStoreError, match="not Emil's archive"):
        Archive.open(tmp_path)


def test_a_search_ranks_by_its_rarest_words_and_counts_a_common_one_no_further_than_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(archive_mod, "COMMON_MIN", 20)
    a = Archive.open(tmp_path, now=DAY, durable=False)
    a.import_lines([archive_mod.Line(i, DAY + i, "chat", "gus", None, f"bring me wood please {i}") for i in range(1, 200)])
    a.import_lines([archive_mod.Line(1000 + i, DAY + 1000 + i, "chat", "hana", None, f"hello there {i}") for i in range(60)])
    a.add(DAY + 299, "chat", "my wood is wet", speaker="hana")
    a.add(DAY + 300, "chat", "zork quib flarn mizzle wibber", speaker="eli")
    a.add(DAY + 301, "chat", "wibber alone", speaker="eli")
    assert a.search(["zork"])  # what waits is flushed to the index by a search
    assert a._docs('"wood"', 20) == 21  # 199 lines hold it; counting stops past the cap
    # Five rare words: the search ranks by the four rarest; "wibber" (in two lines) is the fifth.
    assert a._selective(["zork", "quib", "flarn", "mizzle", "wibber"], pair=[]) == ["flarn", "mizzle", "quib", "zork"]
    # Every word common: a player's name searched about never joins the pair (thousands of lines).
    assert a._selective(["wood", "hana"], pair=["wood"]) == []  # (they meet in one line)
    assert a._selective(["bring", "wood"], pair=["bring", "wood"]) == []  # they meet in 199 lines: common too
    assert {x.text for x in a.search(["wood", "wibber"], names=["gus"])} == {"zork quib flarn mizzle wibber", "wibber alone"}
    a.close()

"""A turn's status is shown as the change since the status before it; the oldest status the
prompt shows is always whole, so the model can always read the whole status back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from emil.context.history import History, Message
from emil.context.ladder import LadderConfig, run_ladder
from emil.context.rungs import build_rungs
from emil.context.status import status_change
from emil.offline.trace import message_from_record
from emil.recording import MessageRecord
from emil.senses.observation import format_status_line

BASE = ("[status] pos 10,64,-4 | health 20/20 food 17/20 | time day | holding stone_pickaxe | "
        "inventory: bread x2, torch x8 | players near: alex 9m | mobs near: none | blocks near: chest 3m")


def test_a_status_reads_as_what_changed_since_the_one_before() -> None:
    assert status_change(None, BASE) == BASE  # the first is whole
    assert status_change(BASE, BASE) == "[status] unchanged"
    moved = BASE.replace("pos 10,64,-4", "pos 11,64,-4").replace("food 17/20", "food 16/20")
    assert status_change(BASE, moved) == "[status] changed: pos 11,64,-4 | health 20/20 food 16/20"
    night = BASE.replace("time day", "time night") + " | doing collect oak_log"
    assert status_change(BASE, night) == "[status] changed: time night | doing collect oak_log"
    assert status_change(night, BASE) == "[status] changed: time day; gone: doing"
    assert status_change(night, night.replace(" | doing collect oak_log", "")) == "[status] changed; gone: doing"


def test_a_change_no_shorter_than_the_line_or_a_line_not_of_fields_is_whole() -> None:
    assert status_change("[status] pos 1,2,3", "[status] pos 4,5,6") == "[status] pos 4,5,6"
    assert status_change(BASE, "[status] not connected to the server") == "[status] not connected to the server"
    assert status_change("[status] unknown", BASE) == BASE  # everything new: no shorter
    twice = "[status] pos 1,2,3 | pos 4,5,6 | time day | inventory: dirt x3 | players near: alex 2m"
    assert status_change(BASE, twice) == twice  # two fields of one key: not read as fields
    assert status_change(BASE, BASE + " | pos 99,64,-4") == BASE + " | pos 99,64,-4"  # even where a change is short
    assert status_change("no prefix", BASE) == BASE
    assert status_change(BASE, BASE + "\nmore") == BASE + "\nmore"  # not one line
    # as long as the line itself ("changed: " costs what "AAAAAA | " saves): whole
    assert status_change("[status] AAAAAA | q 1", "[status] AAAAAA | q 2") == "[status] AAAAAA | q 2"
    assert status_change("[status] AAAAAAA | q 1", "[status] AAAAAAA | q 2") == "[status] changed: q 2"


def test_a_field_is_keyed_by_its_first_label_whatever_its_value_holds() -> None:
    before, after = BASE + " | memo: north: 1", BASE + " | memo: south: 1"
    assert status_change(before, after) == "[status] changed: memo: south: 1"  # no "gone: memo: north"


def _fields(line: str) -> dict[str, str]:
    return {(p.partition(": ")[0] if ": " in p else p.split(" ", 1)[0]): p
            for p in line.removeprefix("[status] ").split(" | ")}


def _read(previous: dict[str, str], shown: str) -> dict[str, str]:
    """What a reader makes of ``shown`` after ``previous`` (the model's side of the format: a
    status is its fields, in any order)."""
    if not shown.startswith("[status] changed") and shown != "[status] unchanged":
        return _fields(shown)
    fields = dict(previous)
    body = shown.removeprefix("[status] unchanged").removeprefix("[status] changed")
    body, _sep, gone = body.partition("; gone: ")
    fields.update(_fields(body.removeprefix(": ")) if body else {})
    for key in gone.split(", ") if gone else []:
        fields.pop(key)
    return fields


_NAMES = st.sampled_from(["alex", "bella", "cody", "zombie", "creeper", "oak_log", "bread"])
_SNAPSHOTS = st.fixed_dictionaries(
    {"position": st.fixed_dictionaries({"x": st.integers(-50, 50), "y": st.integers(60, 70), "z": st.integers(-50, 50)}),
     "health": st.integers(0, 20), "food": st.integers(0, 20), "time": st.sampled_from(["day", "night"])},
    optional={"held": _NAMES, "raining": st.booleans(), "job": st.sampled_from(["collect oak_log", "follow alex"]),
              "inventory": st.lists(st.fixed_dictionaries({"name": _NAMES, "count": st.integers(1, 64)}), max_size=3),
              "players": st.lists(st.fixed_dictionaries({"name": _NAMES, "distance": st.integers(1, 30)}), max_size=2)},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_SNAPSHOTS, min_size=1, max_size=8))
def test_the_whole_status_can_always_be_read_back(snapshots: list[dict[str, object]]) -> None:
    history: History = History()
    read: dict[str, str] | None = None
    for snap in snapshots:
        line = format_status_line(snap)
        added = Message.observation("[events] none", status=line)
        history = history.start_turn(added)
        held = history.turns[-1][0]
        assert held.id == added.id  # the message as the caller added it, its status shown as a change
        assert held.status is not None and len(held.status) <= len(line)
        assert (held.status_full or held.status) == line == history.latest_status()
        read = _fields(line) if read is None else _read(read, held.status)
        assert read == _fields(line)  # the chain of changes from the first whole line gives the status


def _history(n: int) -> History:
    history = History()
    for i in range(n):
        line = BASE.replace("pos 10,64,-4", f"pos {10 + i},64,-4")
        history = history.start_turn(Message.observation(f"[events] - turn {i} " + "words " * 30, status=line,
                                                         event_time=1000.0 + i))
        history = history.append(Message.assistant("ok"))
    return history


def _size(history: History) -> int:
    return sum(len(m.text) for t in history.turns for m in t) + (len(history.memory.text) if history.memory else 0)


def test_a_trim_shows_the_oldest_status_left_whole() -> None:
    history = _history(6)
    assert history.turns[0][0].status == BASE and history.turns[0][0].status_full is None
    assert all(t[0].status == f"[status] changed: pos {10 + i},64,-4" for i, t in enumerate(history.turns) if i)
    config = LadderConfig()
    for rungs in (config.rungs, ("evict", "cut_newest")):  # with collapse_status, and without it
        trimmed, records, _size_after = run_ladder(
            history, build_rungs(LadderConfig(rungs=rungs)), _size, target=_size(history) // 2, ceiling=None,
            config=config, now=2000.0, tokens_of=len)
        assert records and len(trimmed.turns) < 6
        statuses = [m for t in trimmed.turns for m in t if m.status]
        assert statuses[0].status == BASE.replace("pos 10,64,-4", f"pos {15 - len(trimmed.turns) + 1},64,-4")
        assert statuses[0].status_full is None  # whole again
        assert all(m.status_full is not None for m in statuses[1:])  # the rest still read as changes


def test_a_history_that_is_not_trimmed_is_left_as_it_is() -> None:
    history = _history(3)
    assert history.status_based() is history  # its oldest status is whole already
    assert History().status_based() == History() and History().latest_status() is None


def test_the_whole_line_is_recorded_and_read_back() -> None:
    held = _history(2).turns[1][0]
    record = MessageRecord(ref="1", message_kind="observation", openai=held.to_openai(), status_full=held.status_full)
    back = message_from_record(MessageRecord.model_validate_json(record.model_dump_json()))
    assert (back.status, back.status_full) == (held.status, held.status_full) and back.status_full is not None

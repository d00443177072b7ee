"""The pinned notes in the context manager: after the system prompt, exact, and changed only by
the ``refresh_notes`` rung at a trim, so the prompt stays append-only between trims."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.ladder import DEFAULT_RUNGS, LadderConfig
from emil.context.manager import ContextManager
from emil.context.rungs import RefreshNotes
from emil.exceptions import BudgetError
from emil.memory import NOTES_HEADER, Fact, MemoryStore, PinnedNotes
from emil.model.resolve import get_token_counter
from emil.offline.synthetic import SYSTEM_PROMPT, emil_tool_specs, history_of, synthetic_turns

COUNTER = get_token_counter("qwen3.6")
TOOLS = emil_tool_specs()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(tmp_path)
    s.learn(Fact(about="player", subject="alex", topic="gave_me", detail="bread", count=3), t=1.0)
    s.learn(Fact(about="place", subject="chest", topic="at", detail="12,64,-7", told_by="alex"), t=2.0)
    yield s
    s.close()


def _manager(notes: PinnedNotes, window: int = 65536, rungs: tuple[str, ...] = DEFAULT_RUNGS) -> ContextManager:
    return ContextManager(
        "qwen3.6", Budget(window, output_reserve=2048, margin=0), SYSTEM_PROMPT, TOOLS,
        preserve_thinking=True, rungs=[RefreshNotes(notes)], ladder=LadderConfig(rungs=rungs),
    )


def _start(notes: PinnedNotes, history: History | None = None) -> History:
    """The session's first history: the notes as rendered at start (as build_agent does)."""
    history, text = history or History(), notes.text()
    return History(history.turns, history.memory, Message.memory(text) if text else None)


def test_the_notes_follow_the_system_prompt_and_are_counted_exactly(store: MemoryStore) -> None:
    notes = PinnedNotes(store, max_tokens=400, tokens_of=COUNTER.count)
    manager = _manager(notes)
    history = _start(notes, history_of(list(itertools.islice(synthetic_turns(0), 6))))
    assembly = manager.assemble(history, now=2e9)
    assert assembly.messages[1]["role"] == "user" and assembly.messages[1]["content"].startswith(NOTES_HEADER)
    assert "gave you 3 bread" in assembly.messages[1]["content"]
    assert assembly.predicted_tokens == COUNTER.count(manager.incremental.render(assembly.messages, TOOLS))


def test_new_notes_wait_for_a_trim(store: MemoryStore) -> None:
    notes = PinnedNotes(store, max_tokens=400, tokens_of=COUNTER.count)
    manager = _manager(notes, window=2048 + 6000)
    turns = synthetic_turns(1)
    history = _start(notes, history_of(list(itertools.islice(turns, 2))))
    first = manager.assemble(history, now=2e9)
    history = first.history
    assert notes.renders == 1  # at start only
    store.learn(Fact(about="player", subject="bob", topic="hit_me"), t=3.0)
    trimmed_at = None
    for i in range(200):
        history = history.start_turn(Message.observation(f"[events]\n- step {i} " + "x " * 60, event_time=2e9))
        a = manager.assemble(history, now=2e9)
        history = a.history
        if a.trims:
            trimmed_at = i
            assert "bob" in a.messages[1]["content"]  # refreshed at the trim
            assert a.trims[0].rung == "refresh_notes"
            break
        # Between trims: the notes (and so the prefix) stay byte-identical, whatever was prepared.
        assert "bob" not in a.messages[1]["content"] and a.extends_previous
        anyio.run(manager.prepare, history)
    assert trimmed_at is not None and notes.renders == 2  # the one change, rendered between turns


def test_a_trim_reads_no_database(store: MemoryStore) -> None:
    """The rung uses what was prepared between turns: a trim (inside the overflow recovery too)
    never waits on SQLite, and a note learned after the last preparation waits a trim more."""
    notes = PinnedNotes(store, max_tokens=400, tokens_of=COUNTER.count)
    manager = _manager(notes, window=2048 + 6000)
    history = _start(notes, history_of(list(itertools.islice(synthetic_turns(1), 2))))
    store.learn(Fact(about="player", subject="bob", topic="hit_me"), t=3.0)
    a = manager.assemble(history, limit=manager.count(history) - 1, now=2e9)
    assert a.trims and "bob" not in a.messages[1]["content"] and notes.renders == 1


def test_without_the_rung_the_block_stays_as_at_start(store: MemoryStore) -> None:
    notes = PinnedNotes(store, max_tokens=400, tokens_of=COUNTER.count)
    manager = _manager(notes, window=2048 + 6000, rungs=DEFAULT_RUNGS[1:])
    history = _start(notes, history_of(list(itertools.islice(synthetic_turns(1), 2))))
    store.learn(Fact(about="player", subject="bob", topic="hit_me"), t=3.0)
    anyio.run(manager.prepare, history)
    a = manager.assemble(history, limit=manager.count(history) - 1, now=2e9)
    assert history.notes is not None
    assert a.trims and a.messages[1]["content"] == history.notes.content


def test_notes_too_big_for_the_budget_are_named(store: MemoryStore) -> None:
    for i in range(40):
        store.learn(Fact(about="player", subject=f"p{i}", topic="asked", detail="please " * 20), t=float(i))
    notes = PinnedNotes(store, max_tokens=5000, tokens_of=COUNTER.count)
    manager = _manager(notes, window=2048 + 2600)
    history = _start(notes).start_turn(Message.observation("[events]\n- alex says: hi"))
    with pytest.raises(BudgetError, match="memory notes"):
        manager.assemble(history)


def test_memory_tokens_zero_shows_no_block(store: MemoryStore) -> None:
    notes = PinnedNotes(store, max_tokens=0, tokens_of=COUNTER.count)
    manager = _manager(notes)
    history = _start(notes).start_turn(Message.observation("[events]\n- alex says: hi"))
    assert manager.assemble(history).messages[1]["content"].startswith("[events]")

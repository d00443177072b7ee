"""The summarise rung with its summariser: asked between turns when a trim is near, once per
trim, folded at the low-water trim, the digest when there is no summary, facts to the notes
after the trim, and the same lines again in replay.

The model side is the double's text reducer in-process (emil.testing.brains.ScriptedLLM), or a
failing or slow stand-in: a unit test of the rung and its source, no server.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emil.context.budget import Budget
from emil.context.history import History
from emil.context.manager import ContextManager
from emil.context.rungs import Summarise
from emil.exceptions import EndpointUnavailable
from emil.llm.types import ChatRequest, Completion
from emil.memory.note_text import as_data
from emil.memory.store import MemoryStore
from emil.memory.summariser import Summariser
from emil.memory.summary import answer_tokens, cap_lines, load_summary_prompt, note_lines
from emil.model.resolve import get_token_counter
from emil.offline.synthetic import (
    SYSTEM_PROMPT,
    emil_tool_specs,
    grow,
    request_steps,
    synthetic_turns,
)
from emil.recording import SummaryRecord
from emil.replay.recorded_summaries import RecordedSummaries
from emil.testing.brains import ScriptedLLM
from emil.testing.reducer import REDUCER_MARK, reducer_summary
from emil.testing.script import ScriptRequest

PROMPT = load_summary_prompt(None, name="Emil")


class Busy:
    """A served model that is always busy (a test stand-in)."""

    asked = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.asked += 1
        raise EndpointUnavailable("503 the engine is overloaded")


class Slow:
    """A served model slower than the turns (a test stand-in): the first request never ends."""

    asked = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.asked += 1
        if self.asked == 1:
            await anyio.sleep_forever()
        return await ScriptedLLM(reducer_summary).complete(request)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    s = MemoryStore.open(tmp_path)
    yield s
    s.close()


def _manager(source: Summariser | RecordedSummaries) -> ContextManager:
    return ContextManager(
        "qwen3.6", Budget(14000, output_reserve=4096), SYSTEM_PROMPT, emil_tool_specs(), rungs=[Summarise(source)],
    )


async def _play(manager: ContextManager, llm: object, turns: int, *, idle: float = 1.0) -> tuple[History, list[list[str]]]:
    """Synthetic play; between turns the loop idles ``idle`` seconds and the ladder prepares."""
    history, trims = History(), []
    for index, turn in enumerate(itertools.islice(synthetic_turns(5), turns)):
        if history.turns:
            with anyio.move_on_after(idle):
                await manager.prepare(history, llm=llm)  # type: ignore[arg-type]
        for new_turn, messages in request_steps(turn):
            a = manager.assemble(grow(history, new_turn, messages), now=2e9 + index)
            history = a.history
            trims += [[t.rung for t in a.trims]] if a.trims else []
    return history, trims


async def test_summaries_fold_the_oldest_turns_at_the_low_water_trim_once_per_trim(store: MemoryStore) -> None:
    records: list[SummaryRecord] = []
    summariser = Summariser(prompt=PROMPT, max_tokens=400, store=store, record=records.append)
    manager = _manager(summariser)
    llm = ScriptedLLM(reducer_summary)
    history, trims = await _play(manager, llm, 160)
    summarised = [t for t in trims if "summarise" in t]
    assert len(summarised) >= 3, trims
    assert len(llm.requests) <= len(trims)  # at most one request per trim
    for request in llm.requests:  # short, thinking off, no tools, bounded
        assert request.tools is None and not request.enable_thinking and request.max_completion_tokens == answer_tokens(400)
    assert {r.outcome for r in records} == {"ready"} and len(records) == len(llm.requests)
    assert history.memory is not None and REDUCER_MARK in (history.memory.content or "")
    # The facts of used summaries reach the notes store between turns, never inside a trim.
    await manager.prepare(history, llm=llm)
    assert any(n.source == "summary" for n in store.notes())
    assert summariser.stats.used == len(summarised)


async def test_a_busy_endpoint_leaves_the_digest_and_is_asked_once_per_trim(store: MemoryStore) -> None:
    records: list[SummaryRecord] = []
    manager = _manager(Summariser(prompt=PROMPT, store=store, record=records.append))
    busy = Busy()
    history, trims = await _play(manager, busy, 120)
    assert trims and all("summarise" not in t for t in trims) and any("fold" in t for t in trims)
    assert 1 <= busy.asked <= len(trims)
    assert {r.outcome for r in records} == {"failed"} and "overloaded" in records[0].reason
    assert history.memory is not None and REDUCER_MARK not in (history.memory.content or "")
    assert not any(n.source == "summary" for n in store.notes())


async def test_a_turn_cancels_a_slow_summary_and_the_digest_folds_those_turns() -> None:
    records: list[SummaryRecord] = []
    manager = _manager(Summariser(prompt=PROMPT, record=records.append))
    slow = Slow()
    _history, trims = await _play(manager, slow, 160, idle=0.05)
    assert records[0].outcome == "cancelled" and records[0].reason == "a turn started"
    assert trims[0] == ["fold"] or "summarise" not in trims[0]  # that trim: the digest
    assert records[1].outcome == "ready" and records[1].covers[0] != records[0].covers[0]  # the next trim's
    assert slow.asked == len(records) <= len(trims)  # never asked twice for one trim
    assert any("summarise" in t for t in trims)


async def test_replay_serves_the_recorded_lines_to_the_rung() -> None:
    records: list[SummaryRecord] = []
    live = _manager(Summariser(prompt=PROMPT, record=records.append))
    history, trims = await _play(live, ScriptedLLM(reducer_summary), 160)
    replayed = _manager(RecordedSummaries(records))
    again, trims_again = await _play(replayed, None, 160)  # no model in replay
    assert trims_again == trims
    assert again.memory is not None and history.memory is not None
    assert again.memory.content == history.memory.content


def test_without_a_model_or_with_max_tokens_0_nothing_is_asked() -> None:
    manager = _manager(Summariser(prompt=PROMPT, max_tokens=0))
    llm = ScriptedLLM(reducer_summary)
    anyio.run(_play, manager, llm, 120)
    assert not llm.requests


class Wordy:
    """A served model that writes far more than it was asked for (a test stand-in)."""

    async def complete(self, request: ChatRequest) -> Completion:
        reply = reducer_summary(ScriptRequest(messages=request.messages, max_tokens=4000))
        return Completion(content=reply.content, finish_reason="stop")


class Garbled:
    """A served model whose answers are not JSON, or JSON of another shape (a test stand-in)."""

    answers = ("{\"lines\": [\"08:00 cut mid-str", "[1, 2, 3]", "[" * 100_000, "{\"lines\": [1]}")
    asked = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.asked += 1
        return Completion(content=self.answers[(self.asked - 1) % len(self.answers)], finish_reason="length")


async def test_a_summary_longer_than_its_cap_is_cut_to_it_at_a_sentence_boundary() -> None:
    records: list[SummaryRecord] = []
    summariser = Summariser(prompt=PROMPT, max_tokens=120, record=records.append)
    manager = _manager(summariser)
    _history, trims = await _play(manager, Wordy(), 160)
    ready = [r for r in records if r.outcome == "ready"]
    count = manager.counter.count
    cut = 0
    for r in ready:
        assert count("\n".join(note_lines(r.lines))) <= 120  # never over the cap
        asked = [as_data(line, 240) for line in json.loads(r.text or "")["lines"]]
        if count("\n".join(note_lines(asked))) > 120:
            cut += 1
            assert r.reason.startswith("cut to 120 tokens at a sentence boundary")
            assert r.lines[:-1] == asked[: len(r.lines) - 1] and asked[len(r.lines) - 1].startswith(r.lines[-1])
    assert cut >= len(ready) - 1 >= 3 and summariser.stats.cut == cut
    assert any("summarise" in t for t in trims)


async def test_an_answer_that_cannot_be_parsed_is_one_failed_summary_and_the_turns_go_on(store: MemoryStore) -> None:
    records: list[SummaryRecord] = []
    manager = _manager(Summariser(prompt=PROMPT, store=store, record=records.append))
    garbled = Garbled()
    history, trims = await _play(manager, garbled, 160)
    assert garbled.asked == len(records) >= 3
    assert {r.outcome for r in records} == {"invalid"}
    assert all(r.reason.startswith(("not JSON", "not a summary")) for r in records), [r.reason for r in records]
    assert trims and all("summarise" not in t for t in trims) and any("fold" in t for t in trims)
    assert len(history.turns) > 1  # every turn played


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=14), cap=st.integers(1, 300))
def test_capped_lines_never_exceed_the_cap_and_keep_a_prefix(lines: list[str], cap: int) -> None:
    count = get_token_counter("qwen3.6").count
    kept, cut = cap_lines(lines, cap, count)
    assert (count("\n".join(note_lines(kept))) if kept else 0) <= cap
    assert cut == (kept != lines)
    if kept:
        assert kept[:-1] == lines[: len(kept) - 1] and lines[len(kept) - 1].startswith(kept[-1])

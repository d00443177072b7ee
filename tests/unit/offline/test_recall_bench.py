"""The honest recall benchmark's parts: facts worded by a generator memory never sees, a null run
that says nothing, probes only their fact holds, questions without the probe, retrieval in the
sweep as live (append-only kept), the asked measure, the restart."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from emil.context.budget import Budget
from emil.model.resolve import get_token_counter
from emil.offline.day_recall import restart_recall, retrieval_times, run_day
from emil.offline.facts import KINDS, WORDINGS, Wordings, said_facts
from emil.offline.recall import PlantedFact, recall
from emil.offline.summaries import SummaryModel
from emil.offline.synthetic import synthetic_day
from emil.testing.reducer import REDUCER_LABEL, reducer_summary_text

COUNTER = get_token_counter("qwen3.6")
ROSTER = ["alex", "bella", "cody", "dana", "eli", "fay", "gus", "hana"]


@pytest.mark.parametrize("wordings", WORDINGS)
def test_every_kind_is_said_in_several_wordings_each_probe_its_own_and_no_question_holds_its_probe(wordings: Wordings) -> None:
    facts = [f for seed in range(6) for f in said_facts(seed=seed, speakers=ROSTER, per_kind=3, wordings=wordings)]
    assert Counter(f.kind for f in facts) == dict.fromkeys(KINDS, 18)
    for kind in KINDS:
        shapes = {" ".join(w for w in f.text.split() if not any(p.lower() in w.lower() for p in f.probe))[:25]
                  for f in facts if f.kind == kind}
        assert len(shapes) >= 2, kind  # more than one wording
    for seed in range(6):
        day = said_facts(seed=seed, speakers=ROSTER, per_kind=3, wordings=wordings)
        for f in day:
            assert all(p.lower() in f.text.lower() for p in f.probe)
            assert not all(p.lower() in f.question.lower() for p in f.probe)  # asked without the probe
            others = [g for g in day if g is not f]
            # only its fact (probes match as whole words, as emil.offline.recall matches them)
            assert not any(all(re.search(rf"(?<!\w){re.escape(p.lower())}(?!\w)", g.text.lower()) for p in f.probe)
                           for g in others)
    assert said_facts(seed=3, speakers=ROSTER, wordings=wordings) == said_facts(seed=3, speakers=ROSTER, wordings=wordings)


def test_the_held_out_wordings_share_no_sentence_with_the_main_ones() -> None:
    def shape(text: str) -> str:
        return " ".join(w for w in text.lower().split() if w.isalpha() and len(w) > 3)

    main = {shape(f.text) for seed in range(6) for f in said_facts(seed=seed, speakers=ROSTER, per_kind=3)}
    held = {shape(f.text) for seed in range(6) for f in said_facts(seed=seed, speakers=ROSTER, per_kind=3, wordings="heldout")}
    assert not main & held
    with pytest.raises(ValueError, match="wordings"):
        said_facts(seed=1, speakers=ROSTER, wordings="other")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, object]:
    root = tmp_path_factory.mktemp("days")
    return {plant: synthetic_day(3.0, seed=2, data_dir=root / str(plant), per_kind=1, plant=plant) for plant in (True, False)}


def test_the_null_run_has_the_same_facts_and_probes_and_says_none_of_them(days: dict[bool, object]) -> None:
    said, null = days[True], days[False]
    assert [(f.what, f.probes) for f in said.planted] == [(f.what, f.probes) for f in null.planted]  # type: ignore[attr-defined]
    assert len(said.planted) == len(KINDS)  # type: ignore[attr-defined]
    text_of = {True: "", False: ""}
    for plant, day in days.items():
        text_of[plant] = "\n".join(m.content or "" for t in day.turns for m in t.messages)  # type: ignore[attr-defined]
    for f in said.planted:  # type: ignore[attr-defined]
        spoken = f.what.split(": ", 1)[1]
        assert spoken in text_of[True] and spoken not in text_of[False]


def test_a_sweep_recalls_old_lines_into_turns_and_the_prompt_still_only_appends(days: dict[bool, object]) -> None:
    budget = Budget(window=65536, output_reserve=6144, margin=65536 - 6144 - 8000)
    model = SummaryModel(reducer_summary_text, REDUCER_LABEL)
    digest = run_day(days[True], budget, COUNTER, "digest", summaries=model)  # type: ignore[arg-type]
    notes = run_day(days[True], budget, COUNTER, "notes", summaries=model)  # type: ignore[arg-type]
    full = run_day(days[True], budget, COUNTER, "all", summaries=model)  # type: ignore[arg-type]
    null = run_day(days[False], budget, COUNTER, "all", summaries=model)  # type: ignore[arg-type]
    assert full.recalled_turns > 0 and 0 < full.recall_tokens_per_turn <= 300
    assert notes.recalled_turns == 0
    for point in (notes, full):  # retrieval rides in its turn: a request breaks the prefix only at a trim
        assert round((1 - point.append_only_share) * (point.requests - 1)) <= point.trims
    assert (full.asked or 0) > (digest.asked or 0)  # memory brings back what the window lost
    assert null.recall == 0 and null.asked == 0  # nothing said, nothing found
    assert full.summary_max_line_tokens <= 512
    assert sum(v[1] for v in full.by_kind.values()) == full.planted


def test_the_restart_and_the_retrieval_time(days: dict[bool, object], tmp_path: Path) -> None:
    said = restart_recall(cut_hours=2.0, seed=2, counter=COUNTER, memory_tokens=2000, per_kind=1)
    null = restart_recall(cut_hours=2.0, seed=2, counter=COUNTER, memory_tokens=2000, per_kind=1, plant=False)
    assert said.asked.share >= said.first.share > 0
    assert null.first.share == null.asked.share == 0
    times = retrieval_times(days[True], COUNTER, lines=3000)  # type: ignore[arg-type]
    assert times.lines >= 3000 and times.turns > 10 and 0 < times.median_ms <= times.p95_ms
    assert 0 < times.cpu_median_ms <= times.cpu_p95_ms


def test_a_probe_is_a_whole_word() -> None:
    from emil.context.history import History, Message

    fact = PlantedFact(0.0, "eli: bring me 51 bell", (("bell", "51"),), "player", kind="request")
    near = History(notes=Message.memory("- bella: gave you 51 apples\n- bells: 510"))
    there = History(notes=Message.memory("- eli asked for 51 bell"))
    assert recall(near, [fact]).share == 0 and recall(there, [fact]).share == 1

"""A summary asked of the real vLLM: the ``summarise`` rung's one request between turns, as the
live session sends it (Emil's client, the shipped summary prompt, the answer's JSON schema as
``structured_outputs``), against the tier's server.

What it shows, whatever the random weights write: the server takes the request as Emil shapes
it (structured outputs on vLLM 0.32); the prompt the server counted is the prompt Emil counts
for it (the family's own template, no tools, thinking off); the answer stops within the
``max_completion_tokens`` Emil asked for (:func:`~emil.memory.summary.answer_tokens`); the
outcome is one ``summary`` record, a summary whose lines fit ``summary_max_tokens`` or an answer
recorded as unusable (the digest then folds those turns), never an exception, and the model is
asked once per trim. What random weights cannot show: a good summary (the text reducer double's
and the unit tests' part).
"""

from __future__ import annotations

from emil.context.budget import Budget
from emil.context.history import History, Message
from emil.context.ladder import LadderConfig, Preparation
from emil.context.manager import ContextManager
from emil.llm.client import OpenAIClient
from emil.memory.summariser import Summariser
from emil.memory.summary import (
    answer_tokens,
    load_summary_prompt,
    note_lines,
    summary_request,
    turn_key,
)
from emil.model.counting import count_prompt_tokens
from emil.model.family import family_by_name
from emil.recording import SummaryRecord
from emil.serving.cpu_vllm import CpuVLLMServer

CAP = 32
"""summary_max_tokens: small, so a CPU decodes the whole answer in seconds."""
T0 = 1_779_948_000.0


def _day(turns: int) -> History:
    history = History()
    players = ("alex", "bella", "cody", "dana")
    for i in range(turns):
        who = players[i % len(players)]
        t = T0 + 60 * i
        history = history.start_turn(Message.observation(
            f'[events]\n- {who} says: "Emil, bring me {i + 2} oak_log for the barn by the river"', event_time=t,
            status=f"[status] pos {i},64,2 | health 20/20 food 18/20 | players near: {who} 3m"))
        call = {"id": f"call_{i}", "name": "say", "arguments": f'{{"text": "On my way, {who}."}}'}
        history = history.append(Message(role="assistant", content=None, tool_calls=(call,), event_time=t + 1))
        history = history.append(Message(role="tool", content=f"said: 'On my way, {who}.'", tool_call_id=f"call_{i}",
                                         event_time=t + 2))
    return history


async def test_a_summary_on_the_real_server_is_counted_exactly_and_obeys_its_cap(real_vllm: CpuVLLMServer) -> None:
    family = family_by_name("qwen3")  # the tier's server: Qwen3-8B's tokenizer and template
    counter = family.tokenizer()
    history = _day(12)
    manager = ContextManager(counter, Budget(16384, output_reserve=1024), "You are Emil.", None, False, family=family)
    size = manager.count(history)
    records: list[SummaryRecord] = []
    prompt = load_summary_prompt(None, name="Emil", max_tokens=CAP)
    summariser = Summariser(prompt=prompt, max_tokens=CAP, timeout_s=100, record=records.append)
    async with OpenAIClient(real_vllm.base_url, model=real_vllm.model, timeout=100) as llm:
        # the prompt is a turn away from its budget: the next trim is near, so the model is asked
        preparation = Preparation(history=history, budget=size + 20, target=int(size * 0.6), config=LadderConfig(),
                                  measure=manager.count, tokens_of=counter.count, llm=llm)
        await summariser.prepare(preparation)
        await summariser.prepare(preparation)  # the same oldest turn: not asked again before a trim
    (record,) = records
    print(f"\nsummary of {len(record.covers)} turns: {record.outcome} ({record.reason}); "
          f"prompt {record.prompt_tokens}, completion {record.completion_tokens} tokens; text {record.text!r:.120}")
    assert record.outcome in ("ready", "invalid"), record  # answered: a summary, or an answer recorded as unusable
    keys = [turn_key(t) for t in history.turns]
    assert record.covers and record.covers == keys[: len(record.covers)] and len(record.covers) < len(keys)
    # the server counted the prompt Emil counts for the request it sent
    request = summary_request(history.turns[: len(record.covers)], prompt=prompt, name="Emil", max_tokens=CAP)
    assert request.extra_body["structured_outputs"]["json"]["title"] == "FoldedTurnsSummary"
    assert record.prompt_tokens == count_prompt_tokens(request.messages, None, tokenizer=family.example, enable_thinking=False)
    assert record.completion_tokens is not None and 0 < record.completion_tokens <= answer_tokens(CAP)
    assert summariser.stats.requests == 1
    if record.outcome == "ready":
        assert counter.count("\n".join(note_lines(record.lines))) <= CAP
        assert summariser.ready(history.turns) is not None
    else:
        assert record.text is not None and record.reason and record.lines == []
        assert summariser.ready(history.turns) is None  # the fold rung's digest takes these turns

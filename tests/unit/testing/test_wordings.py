"""Every wording the double can produce parses back to the numbers it was built from."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from emil.llm import parse_overflow
from emil.testing.vllm_wordings import WORDINGS, Wording, error_body, judge_overflow


@given(
    wording=st.sampled_from(WORDINGS),
    window=st.integers(min_value=2048, max_value=1_048_576),
    prompt=st.integers(min_value=1, max_value=2_000_000),
    output=st.one_of(st.none(), st.integers(min_value=1, max_value=1_000_000)),
)
def test_judge_then_parse_round_trips(
    wording: Wording, window: int, prompt: int, output: int | None
) -> None:
    answer = judge_overflow(wording, window=window, prompt=prompt, max_tokens=output)
    fits = prompt + (output or 0) <= window if output is not None else prompt < window
    if answer.reject_message is None:
        assert fits or wording == "clamp"
        if answer.clamp_to is not None:
            assert output is not None and answer.clamp_to == window - prompt < output
        return
    assert not fits
    body = json.dumps(error_body(answer.reject_message, flat=answer.flat_body))
    parsed = parse_overflow(body)
    assert parsed is not None, answer.reject_message
    assert parsed.window == window
    if parsed.prompt_is_lower_bound:
        # a floor is never above the truth, and it says the prompt does not fit
        assert parsed.prompt_tokens <= prompt
        room = window - (parsed.requested_output or 0)
        assert parsed.prompt_tokens > room or output is None
    else:
        assert parsed.prompt_tokens == prompt
    if parsed.requested_output is not None:
        assert parsed.requested_output == output

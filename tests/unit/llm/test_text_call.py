"""A tool call written as text is found (bare, fenced, in tags, arguments as a string) and
nothing else is taken for one."""

from __future__ import annotations

import pytest

from emil.llm.text_call import TextCall, call_in_text, correction


@pytest.mark.parametrize(
    ("content", "found"),
    [
        ('{"name": "follow", "arguments": {"player": "bob"}}', TextCall("follow", {"player": "bob"})),
        ('Sure!\n```json\n{"name": "say", "arguments": {"text": "hi"}}\n```', TextCall("say", {"text": "hi"})),
        ('<tool_call>\n{"name": "give", "parameters": {"player": "leo", "item": "bread"}}', TextCall(
            "give", {"player": "leo", "item": "bread"})),
        ('{"name": "attack", "arguments": "{\\"target\\": \\"zombie\\"}"}', TextCall("attack", {"target": "zombie"})),
        ('{"name": "fly", "arguments": [1]}', TextCall("fly", None)),
        ('{"name": "broken", "arguments": {"x": }', None),
        ('{"name": "alex", "age": 3}', None),  # a JSON object, but not a call
        ("I will follow you, alex!", None),
        ("", None),
        (None, None),
    ],
)
def test_a_call_in_text_is_found_and_nothing_else(content: str | None, found: TextCall | None) -> None:
    assert call_in_text(content) == found


def test_the_correction_names_the_tool_and_says_nothing_ran() -> None:
    text = correction(TextCall("follow", {"player": "bob"}))
    assert text.startswith("[note]") and "follow" in text and "nothing was run" in text

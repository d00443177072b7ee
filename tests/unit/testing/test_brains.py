"""Scripted brains (not models) and the in-process ScriptedLLM."""

from __future__ import annotations

from emil.llm import parse_overflow
from emil.llm.types import ChatRequest, ToolCall
from emil.testing.brains import SCRIPTED_PREFIX, NpcBrain, ScriptedLLM, sequence
from emil.testing.script import Reply, ScriptedCall, ScriptRequest
from emil.testing.vllm_wordings import WORDINGS, error_body, judge_overflow

TOOLS = [{"type": "function", "function": {"name": n}} for n in ("say", "follow", "stop",
                                                                    "attack")]


def _ask(text: str, role: str = "user", tools: list | None = TOOLS) -> Reply:
    return NpcBrain()(ScriptRequest(messages=[{"role": role, "content": text}], tools=tools))


def test_npc_brain_rules() -> None:
    assert _ask("<Steve> follow me please").tool_calls == (
        ScriptedCall("follow", {"player": "Steve"}),)
    assert _ask('Steve says: "follow me"').tool_calls == (
        ScriptedCall("follow", {"player": "Steve"}),)
    assert _ask("[chat] Alex says: stop right there").tool_calls == (ScriptedCall("stop", {}),)
    hello = _ask("<Steve> hello Emil").tool_calls[0]
    assert hello.name == "say" and "Steve" in hello.arguments["text"]  # type: ignore[index]
    assert hello.arguments["text"].startswith(SCRIPTED_PREFIX)  # type: ignore[index]
    assert _ask("hostile_nearby: a zombie is 4 blocks away").tool_calls == (
        ScriptedCall("attack", {"target": "zombie"}),)
    assert _ask('Steve says: "hi"\nhostile skeleton 6 blocks away').tool_calls == (
        ScriptedCall("attack", {"target": "skeleton"}),)
    heard = _ask("<Steve> what is that").tool_calls[0]
    assert heard.name == "say"
    done = _ask("ok", role="tool")
    assert done.tool_calls == () and done.content == f"{SCRIPTED_PREFIX}done."
    # without a say tool the brain answers in text, and still says it is scripted
    text = _ask("<Steve> hi", tools=None)
    assert text.content is not None and text.content.startswith(SCRIPTED_PREFIX)


def test_npc_brain_is_extensible() -> None:
    brain = NpcBrain()
    brain.add_rule(lambda ctx: Reply(content="dance!") if "dance" in ctx.text else None,
                   first=True)
    assert brain(ScriptRequest(messages=[{"role": "user", "content": "<S> dance"}])).content == (
        "dance!")


async def test_scripted_llm_parses_calls_like_the_live_client() -> None:
    def validator(call: ToolCall) -> ToolCall:
        return call.model_copy(update={"error": "unknown tool"}) if call.name == "fly" else call

    llm = ScriptedLLM(sequence([Reply(tool_calls=(ScriptedCall("goto", '{"x": '),
                                                  ScriptedCall("fly", {}),
                                                  ScriptedCall("say", {"message": "hi"})))]),
                      tool_validator=validator)
    c = await llm.complete(ChatRequest(messages=[{"role": "user", "content": "go"}],
                                       predicted_prompt_tokens=42))
    bad, unknown, good = c.tool_calls
    assert bad.error is not None and bad.arguments is None
    assert unknown.error == "unknown tool"
    assert good.arguments == {"message": "hi"}
    assert c.usage is not None and c.usage.prompt_tokens == 42
    assert c.finish_reason == "tool_calls"


def test_every_wording_round_trips_through_the_parser() -> None:
    for wording in WORDINGS:
        for prompt, max_tokens in ((30000, 6144), (40000, 6144), (40000, None)):
            answer = judge_overflow(wording, window=32768, prompt=prompt, max_tokens=max_tokens)
            if answer.reject_message is None:
                assert wording == "clamp" and answer.clamp_to == 32768 - prompt
                continue
            body = error_body(answer.reject_message, flat=answer.flat_body)
            o = parse_overflow(str(body))
            assert o is not None and o.window == 32768, (wording, prompt, max_tokens)
            if o.prompt_is_lower_bound:
                assert o.prompt_tokens <= prompt
            else:
                assert o.prompt_tokens == prompt

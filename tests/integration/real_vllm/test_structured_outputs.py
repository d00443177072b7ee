"""What vLLM's structured outputs make of random weights: tool calls, through the real parser.

The tier's server has random weights, so on its own it never calls a tool. With ``tool_choice``
"required" (or a named function) vLLM 0.32 constrains decoding to the hermes tool-call envelope
(``<tool_call>\\n{"name": "<a tool offered>", "arguments": ...``) and its hermes parser reads
the result, so Emil's client gets real tool calls from the real parser. The arguments are not
pinned to the tool's schema unless the tool says ``strict`` (or the server runs with
``--tool-strict-level parameter``): here they are any JSON, and whitespace is allowed anywhere,
so an answer may run out of tokens inside its call. Whatever comes back, Emil's client returns
data: each call parsed into an argument object that passed the tool's validation, or carrying
the reason it did not (what the model reads next step), never an exception; an answer cut off
inside the envelope is content with ``finish_reason`` "length".

Greedy decoding (temperature 0) on the same random weights (vLLM's dummy loader is seeded) makes
these answers the same run after run.
"""

from __future__ import annotations

from collections import Counter

from emil.llm.client import OpenAIClient
from emil.llm.types import ChatRequest, Completion
from emil.serving.cpu_vllm import CpuVLLMServer
from emil.world.actions import TOOLS, tool_specs, validate_tool_call

_CHAT = (
    "alex: Emil, come here please",
    "bella: Emil, can you bring me some wood?",
    "cody: hey Emil, you look weak",
    "dana: anyone around? Emil?",
    "alex: Emil, stop following me",
    "bella: Emil, what is in your inventory?",
)


def _shape(completion: Completion) -> str:
    if not completion.tool_calls:
        assert completion.finish_reason == "length", completion
        assert (completion.content or "").lstrip().startswith("<tool_call>"), completion.content
        return "cut inside the envelope"
    for call in completion.tool_calls:
        assert call.name in TOOLS, call  # the envelope only names tools offered
        assert call.arguments is not None or call.error, call  # an object, or why not
    if any(call.error for call in completion.tool_calls):
        return "a call the model is told is wrong"
    return "valid calls"


async def test_required_tool_choice_makes_random_weights_call_tools(real_vllm: CpuVLLMServer) -> None:
    specs = tool_specs()
    shapes: Counter[str] = Counter()
    errors: list[str] = []
    async with OpenAIClient(real_vllm.base_url, model=real_vllm.model, timeout=90,
                            tool_validator=validate_tool_call) as llm:
        for i, line in enumerate(_CHAT):
            request = ChatRequest(
                messages=[{"role": "system", "content": "You are Emil, a Minecraft NPC."},
                          {"role": "user", "content": line}],
                tools=specs, tool_choice="required", max_completion_tokens=48, temperature=0.0,
                stream=bool(i % 2),  # the streamed parser and the whole-answer one
            )
            completion = await llm.complete(request)
            shapes[_shape(completion)] += 1
            errors += [c.error for c in completion.tool_calls if c.error]
        # A named function: the envelope names that tool.
        named = await llm.complete(ChatRequest(
            messages=[{"role": "user", "content": _CHAT[0]}], tools=specs,
            tool_choice={"type": "function", "function": {"name": "follow"}},
            max_completion_tokens=48, temperature=0.0,
        ))
    assert all(call.name == "follow" for call in named.tool_calls), named
    print(f"\n{dict(shapes)}; named: {[(c.name, c.raw_arguments, c.error) for c in named.tool_calls]}")
    print("errors the model would read:", errors)
    # The random model called tools through the real parser, and Emil turned what was wrong
    # with them into words for the model.
    assert shapes["valid calls"] + shapes["a call the model is told is wrong"] >= 1, shapes
    assert all(error.strip() for error in errors)

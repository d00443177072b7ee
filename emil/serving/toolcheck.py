"""Tool-call validity gate: "MTP stays off until tool calls pass" as a command, not a habit.

n-gram speculation once corrupted Emil's tool calls, and MTP with constrained decoding has a
public record of broken JSON (vLLM PR 44993: 12.75/24 -> 20.25/24 valid, still short of MTP
off). So before a serving change goes live, Emil's real system prompt and tool specs are sent
with a set of situations, N times each, with the tool choice and decoding settings used live,
and every tool call is validated against the pydantic argument models.

An attempt is valid when the model called at least one tool (unless the situation allows a
plain answer), every call names a known tool, its arguments are a JSON object, and they pass
validation; a completion cut off by the length limit is invalid. An answer with no call whose text
holds one (bare JSON, the way small models write calls under "auto") is "text_call", apart from
"no_call".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from emil.exceptions import ConfigurationError, TransientError
from emil.llm.text_call import call_in_text
from emil.llm.types import LLM, ChatRequest, ToolCall, ToolChoice

__all__ = [
    "Attempt",
    "LiveDecoding",
    "Situation",
    "ToolCheckReport",
    "load_situations",
    "run_tool_check",
    "situations_from_messages",
]

Outcome = Literal[
    "valid", "no_call", "text_call", "invalid_json", "unknown_tool", "invalid_args", "truncated",
    "error",
]


@dataclass(frozen=True)
class Situation:
    """One moment of play to put to the model (the messages after the system prompt)."""

    name: str
    messages: tuple[dict[str, Any], ...]
    expect: tuple[str, ...] = ()
    """Tools a good answer would call (reported as tool choice, not part of the gate)."""
    allow_no_call: bool = False
    """A plain-text answer counts as valid (e.g. nothing needs doing)."""


def load_situations(path: Path) -> list[Situation]:
    """Read situations from JSON: ``{"situations": [{"name", "observation" | "messages", ...}]}``."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read situations ({exc})") from exc
    items = data.get("situations") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise ConfigurationError(f"{path}: no situations (want a list under 'situations')")
    situations = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ConfigurationError(f"{path}: situation {i} is not an object")
        name = str(item.get("name") or f"situation-{i + 1}")
        if "messages" in item:
            messages = tuple(item["messages"])
        elif "observation" in item:
            messages = ({"role": "user", "content": str(item["observation"])},)
        else:
            raise ConfigurationError(f"{path}: situation {name!r} has no observation or messages")
        if not messages or messages[-1].get("role") not in ("user", "tool"):
            raise ConfigurationError(
                f"{path}: situation {name!r} must end with a user/tool message"
            )
        situations.append(
            Situation(
                name=name,
                messages=messages,
                expect=tuple(item.get("expect") or ()),
                allow_no_call=bool(item.get("allow_no_call", False)),
            )
        )
    return situations


def situations_from_messages(
    requests: Iterable[tuple[str, list[dict[str, Any]]]], *, limit: int | None = None
) -> list[Situation]:
    """Situations from recorded requests (name, OpenAI messages); system messages are dropped
    so the current system prompt is what gets checked. ``limit`` samples evenly."""
    found = []
    for name, messages in requests:
        body = tuple(m for m in messages if m.get("role") != "system")
        if body and body[-1].get("role") in ("user", "tool"):
            found.append(Situation(name=name, messages=body, allow_no_call=True))
    if limit is not None and len(found) > limit > 0:
        step = len(found) / limit
        found = [found[int(i * step)] for i in range(limit)]
    return found


@dataclass(frozen=True)
class LiveDecoding:
    """The request settings the live agent uses (so the gate tests what will run)."""

    tool_choice: ToolChoice | None = None
    """None = what the agent sends: nothing, so the server's default ("auto")."""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    enable_thinking: bool = False
    max_completion_tokens: int = 6144
    extra_body: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class Attempt:
    """One request's verdict."""

    situation: str
    index: int
    outcome: Outcome
    tools: tuple[str, ...]
    """Tool names called, in order."""
    problems: tuple[str, ...]
    """Per bad call: name and why (validator's message), or the request error."""
    finish_reason: str | None
    chose_expected: bool | None


@dataclass
class ToolCheckReport:
    """valid/N per tool, per situation and overall, and whether the gate passed."""

    attempts: list[Attempt]
    repeats: int
    threshold: float
    decoding: LiveDecoding
    tool_calls: dict[str, tuple[int, int]]
    """Tool name -> (valid calls, calls)."""

    @property
    def valid(self) -> int:
        """Attempts that passed."""
        return sum(1 for a in self.attempts if a.outcome == "valid")

    @property
    def passed(self) -> bool:
        """Overall and every tool's share of valid calls at or above the threshold."""
        if not self.attempts:
            return False
        if self.valid / len(self.attempts) < self.threshold:
            return False
        return all(ok / total >= self.threshold for ok, total in self.tool_calls.values() if total)

    def per_situation(self) -> dict[str, tuple[int, int]]:
        """Situation -> (valid attempts, attempts)."""
        table: dict[str, tuple[int, int]] = {}
        for a in self.attempts:
            ok, total = table.get(a.situation, (0, 0))
            table[a.situation] = (ok + (a.outcome == "valid"), total + 1)
        return table

    def outcomes(self) -> dict[str, int]:
        """Outcome -> count."""
        counts: dict[str, int] = {}
        for a in self.attempts:
            counts[a.outcome] = counts.get(a.outcome, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with every attempt."""
        return {
            "passed": self.passed,
            "valid": self.valid,
            "attempts": len(self.attempts),
            "repeats": self.repeats,
            "threshold": self.threshold,
            "decoding": self.decoding.to_dict(),
            "outcomes": self.outcomes(),
            "per_tool": {k: {"valid": v[0], "calls": v[1]} for k, v in self.tool_calls.items()},
            "per_situation": {
                k: {"valid": v[0], "attempts": v[1]} for k, v in self.per_situation().items()
            },
            "details": [a.__dict__ for a in self.attempts],
        }

    def format(self) -> str:
        """Terminal table."""
        lines = ["per situation (valid/N):"]
        for name, (ok, total) in self.per_situation().items():
            chosen = [a.chose_expected for a in self.attempts if a.situation == name]
            expected = [c for c in chosen if c is not None]
            choice = f"   expected tool chosen {sum(expected)}/{len(expected)}" if expected else ""
            lines.append(f"  {name:<28} {ok:>3}/{total:<3}{choice}")
        lines.append("per tool (valid calls/calls):")
        for name, (ok, total) in sorted(self.tool_calls.items()):
            lines.append(f"  {name:<28} {ok:>3}/{total:<3}")
        bad = [a for a in self.attempts if a.outcome != "valid"]
        if bad:
            lines.append("invalid attempts:")
            for a in bad[:20]:
                why = "; ".join(a.problems) or a.outcome
                lines.append(f"  {a.situation}#{a.index}: {a.outcome}: {why}"[:200])
            if len(bad) > 20:
                lines.append(f"  ... and {len(bad) - 20} more")
        total = len(self.attempts)
        verdict = "PASS" if self.passed else "FAIL"
        lines.append(
            f"overall: {self.valid}/{total} valid ({self.outcomes()}); threshold "
            f"{self.threshold:.0%} -> {verdict}"
        )
        return "\n".join(lines)


def _judge(
    calls: Sequence[ToolCall],
    validate: Callable[[ToolCall], ToolCall],
    known: set[str],
    tally: dict[str, tuple[int, int]],
) -> tuple[Outcome, list[str]]:
    worst: Outcome = "valid"
    problems: list[str] = []
    rank = {"valid": 0, "invalid_args": 1, "unknown_tool": 2, "invalid_json": 3}
    for call in calls:
        checked = validate(call)
        kind: Outcome
        if checked.error is None and call.name in known and checked.arguments is not None:
            kind = "valid"
        elif call.name not in known:
            kind = "unknown_tool"
        elif checked.arguments is None:
            kind = "invalid_json"
        else:
            kind = "invalid_args"
        ok, total = tally.get(call.name, (0, 0))
        tally[call.name] = (ok + (kind == "valid"), total + 1)
        if kind != "valid":
            problems.append(f"{call.name}({call.raw_arguments[:80]}): {checked.error or kind}")
            if rank[kind] > rank[worst]:
                worst = kind
    return worst, problems


async def run_tool_check(
    llm: LLM,
    *,
    system_prompt: str,
    tools: list[dict[str, Any]],
    situations: Sequence[Situation],
    validate: Callable[[ToolCall], ToolCall],
    repeats: int = 10,
    decoding: LiveDecoding | None = None,
    threshold: float = 1.0,
    progress: Callable[[Attempt], None] | None = None,
) -> ToolCheckReport:
    """Send every situation ``repeats`` times and validate every tool call.

    A :class:`~emil.exceptions.ConfigurationError` from the endpoint (wrong model, tool choice
    not enabled on the server) aborts the check: it would fail every attempt the same way.
    """
    decoding = decoding or LiveDecoding()
    known = {str(t.get("function", {}).get("name")) for t in tools}
    tally: dict[str, tuple[int, int]] = {}
    attempts: list[Attempt] = []
    for situation in situations:
        messages = [{"role": "system", "content": system_prompt}, *situation.messages]
        for index in range(1, repeats + 1):
            request = ChatRequest(
                messages=messages,
                tools=tools,
                tool_choice=decoding.tool_choice,
                max_completion_tokens=decoding.max_completion_tokens,
                temperature=decoding.temperature,
                top_p=decoding.top_p,
                top_k=decoding.top_k,
                enable_thinking=decoding.enable_thinking,
                extra_body=decoding.extra_body,
            )
            try:
                completion = await llm.complete(request)
            except TransientError as exc:
                attempt = Attempt(situation.name, index, "error", (), (str(exc),), None, None)
            else:
                calls = completion.tool_calls
                outcome, problems = _judge(calls, validate, known, tally)
                if completion.finish_reason == "length":
                    outcome = "truncated"
                    problems.append("finish_reason=length: the answer was cut off")
                elif not calls and not situation.allow_no_call:
                    # A call the model wrote as text (bare JSON, no <tool_call> tags) is told
                    # apart from an answer that calls nothing: the parser, not the choice, failed.
                    outcome = "text_call" if call_in_text(completion.content) else "no_call"
                    text = (completion.content or "").strip().replace("\n", " ")
                    problems.append(f"no tool call; text: {text[:80]!r}")
                names = tuple(c.name for c in calls)
                chose = bool(set(names) & set(situation.expect)) if situation.expect else None
                attempt = Attempt(
                    situation.name,
                    index,
                    outcome,
                    names,
                    tuple(problems),
                    completion.finish_reason,
                    chose,
                )
            attempts.append(attempt)
            if progress is not None:
                progress(attempt)
    return ToolCheckReport(attempts, repeats, threshold, decoding, tally)

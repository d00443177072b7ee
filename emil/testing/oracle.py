"""SCRIPTED bench oracle (not a model): a player who knows the task being played.

Serve it with :class:`~emil.testing.vllm_double.VLLMDouble` like any brain. The bench tells it
which run starts (``BenchOptions.on_run_start`` -> :meth:`Oracle.start`): the run's tag (at the
start of that run's system prompt) and, per player line, the tool calls that answer it. When a
request's newest observation holds one of those lines, the oracle answers with its calls, one per
model step (each reads the tool result before the next, as a model would); after the last, a
short note ends the turn. A request from any other session (another tag) gets a note only.

It knows nothing of the bench's types: the plan is plain data (tag, [(line, [(tool, args)])]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emil.testing.brains import SCRIPTED_PREFIX
from emil.testing.script import Reply, ScriptedCall, ScriptRequest, last_text

__all__ = ["Oracle"]

Plan = Sequence[tuple[str, Sequence[tuple[str, dict[str, Any]]]]]


@dataclass
class Oracle:
    """``Oracle()``: a policy; :meth:`start` arms it for one run."""

    tag: str = ""
    lines: list[tuple[str, list[ScriptedCall]]] = field(default_factory=list)
    queue: list[ScriptedCall] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    """Lines seen and answered (the tests check each was)."""

    repeat: list[tuple[str, list[ScriptedCall]]] = field(default_factory=list)

    def start(self, tag: str, plan: Plan, repeat: Plan = ()) -> None:
        """Arm for the run tagged ``tag``: ``plan`` answers each line once; ``repeat`` answers
        words in any observation, every time, once a line was answered."""
        self.tag = tag
        self.lines = [(text, [ScriptedCall(name, dict(args)) for name, args in calls]) for text, calls in plan if calls]
        self.repeat = [(text, [ScriptedCall(name, dict(args)) for name, args in calls]) for text, calls in repeat]
        self.queue = []
        self.answered = []

    def start_run(self, plan: Any) -> None:
        """Arm for a bench run (``emil.bench.runner.RunPlan``, read by its fields: the oracle
        imports nothing of the bench): its tag, each said line's calls, the task's repeats."""
        steps = [(s.text, [(c.name, c.args) for c in s.oracle]) for s in plan.task.steps if s.do == "say"]
        repeat = [(words, [(c.name, c.args) for c in calls]) for words, calls in plan.task.oracle_repeat]
        self.start(plan.tag, steps, repeat)

    def __call__(self, request: ScriptRequest) -> Reply:
        system = request.messages[0].get("content") if request.messages else ""
        if not self.tag or not isinstance(system, str) or f"[bench run {self.tag}]" not in system:
            return Reply(content=f"{SCRIPTED_PREFIX}(not my run)")
        last = request.messages[-1] if request.messages else {}
        if last.get("role") == "user":
            text = last_text(request, "user")
            for i, (line, calls) in enumerate(self.lines):
                if line in text:
                    self.queue.extend(calls)
                    self.answered.append(line)
                    del self.lines[i]
                    break
            else:
                if self.answered and not self.queue:
                    self.queue.extend(c for words, calls in self.repeat if words in text for c in calls)
        if self.queue:
            return Reply(tool_calls=(self.queue.pop(0),))
        return Reply(content=f"{SCRIPTED_PREFIX}done.")

"""The trim ladder: pure rungs over turns, cheapest loss first.

1. ``drop_reasoning``   old assistant reasoning (often free: the Qwen template already hides it)
2. ``collapse_status``  status snapshots superseded by a newer one
3. ``elide_results``    bulky old tool results become a stub saying what was elided
4. ``fold``             the oldest turns become lines of a rolling memory note
5. ``evict``            whole old turns go (then the memory note itself)
6. ``cut_newest``       only then the newest turn is cut (results elided, reasoning dropped,
                        oldest call groups dropped); its opening message is pinned. This rung
                        stops at the hard budget (``ceiling``), not at the low-water target:
                        the newest turn is the one in progress, and a call group cut from it
                        is an action the model no longer knows it took, so it takes it again
                        (Emil answered one chat line twice after an overflow recovery); each
                        dropped group leaves a line saying what it did in the opening message

Every rung is a pure function (turns in, turns out); :func:`run_ladder` applies them oldest turn
first, measures after every step with the exact counter, stops at the target (the low-water
mark) and returns a :class:`TrimRecord` per rung that freed tokens. A tool call and its result
always stay or go together: results are elided in place, and groups (an assistant message with
its results) leave whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from emil.context.history import History, Message, Turn

__all__ = [
    "LadderConfig",
    "LadderState",
    "Measure",
    "Measurer",
    "Summariser",
    "TrimRecord",
    "collapse_status",
    "digest_turn",
    "drop_reasoning",
    "elide_result",
    "elide_results",
    "note_dropped",
    "run_ladder",
    "split_groups",
]

Summariser = Callable[[Turn], str]
"""Turns one turn into one line of the memory note (deterministic digest by default)."""

_MEMORY_HEADER = "[memory] Earlier events, folded from older turns (oldest first):"


@dataclass(frozen=True)
class TrimRecord:
    """What one rung of one trim did."""

    rung: str
    messages_touched: int
    tokens_freed: int
    horizon_after_s: float | None
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True)
class LadderState:
    """Turns plus the memory note: what the ladder rewrites."""

    turns: tuple[Turn, ...]
    memory: Message | None = None

    @classmethod
    def of(cls, history: History) -> LadderState:
        return cls(history.turns, history.memory)

    def to_history(self) -> History:
        return History(self.turns, self.memory)


@dataclass(frozen=True)
class LadderConfig:
    """Knobs of the ladder; defaults suit Emil's JSON-heavy tool results."""

    elide_over_tokens: int = 160
    """Tool results bigger than this (in tokens) are elided on rung 3."""
    memory_max_tokens: int = 1200
    """The memory note rolls: its oldest lines drop beyond this size."""
    summariser: Summariser | None = None
    """None: the deterministic :func:`digest_turn`."""
    tokens_of: Callable[[str], int] = field(default=lambda text: len(text) // 3)
    """Text token counter used for stub and memory sizes (the manager passes the exact one)."""
    memo_limit: int = 20_000
    """Per-turn rewrites remembered (see :func:`_rewrite`) before the memo starts over: a bound
    for very long live sessions; an offline sweep, which holds its whole session anyway,
    raises it so that one day of play never starts over."""
    _memo: dict[tuple[str, int], tuple[Turn, Turn | None]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )


# -- per-message and per-turn transforms (pure) -------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_names(turn: Sequence[Message]) -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = {}
    for message in turn:
        for call in message.tool_calls:
            names[call["id"]] = (call["name"], call["arguments"])
    return names


def elide_result(result: Message, call: tuple[str, str] | None, tokens: int) -> Message:
    """The stub that replaces a bulky tool result: which call, how big, what it held."""
    name, arguments = call if call else ("unknown tool", "")
    content = result.content or ""
    shape = ""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        data = None
    if isinstance(data, dict):
        shape = "; keys: " + ", ".join(list(data)[:8])
        for flag in ("ok", "error"):
            if flag in data and not isinstance(data[flag], dict | list):
                shape += f"; {flag}={_clip(str(data[flag]), 60)}"
    elif isinstance(data, list):
        shape = f"; a list of {len(data)} items"
    stub = (
        f"[elided: {tokens}-token result of {name}({_clip(arguments, 80)}){shape}; "
        f"began: {_clip(content, 80)}]"
    )
    return result.with_changes(content=stub)


def drop_reasoning(turn: Turn) -> Turn | None:
    """Assistant reasoning removed; None when the turn has none."""
    if not any(m.reasoning for m in turn):
        return None
    return tuple(m.with_changes(reasoning=None) if m.reasoning else m for m in turn)


def collapse_status(turn: Turn) -> Turn | None:
    """Status snapshots removed (the caller only passes turns a newer snapshot supersedes)."""
    if not any(m.status for m in turn):
        return None
    return tuple(m.with_changes(status=None) if m.status else m for m in turn)


def elide_results(turn: Turn, config: LadderConfig) -> Turn | None:
    """Bulky tool results replaced by stubs; None when nothing is bulky."""
    calls = _tool_names(turn)
    changed = False
    out: list[Message] = []
    for message in turn:
        if message.role == "tool" and not (message.content or "").startswith("[elided:"):
            tokens = config.tokens_of(message.content or "")
            if tokens > config.elide_over_tokens:
                out.append(elide_result(message, calls.get(message.tool_call_id or ""), tokens))
                changed = True
                continue
        out.append(message)
    return tuple(out) if changed else None


def split_groups(turn: Turn) -> list[tuple[Message, ...]]:
    """A turn as [opening, group, group...]: each group is an assistant message and the tool
    results that answer it, so groups can leave without orphaning a call or a result."""
    groups: list[list[Message]] = []
    for message in turn:
        if message.role == "tool" and groups and len(groups) > 1:
            groups[-1].append(message)
        else:
            groups.append([message])
    return [tuple(g) for g in groups]


def _clock(t: float | None) -> str:
    return "--:--:--" if t is None else time.strftime("%H:%M:%S", time.gmtime(t))


def _actions(messages: Sequence[Message]) -> list[str]:
    """What the assistant messages among ``messages`` said and did, and how each call went."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    parts: list[str] = []
    for message in messages:
        if message.role != "assistant":
            continue
        if message.content:
            parts.append(f'said "{_clip(message.content, 60)}"')
        for call in message.tool_calls:
            result = results.get(call["id"])
            outcome = _clip(result.content or "", 50) if result else "no result"
            parts.append(f"{call['name']}({_clip(call['arguments'], 40)}) -> {outcome}")
    return parts


def digest_turn(turn: Turn) -> str:
    """One deterministic line: when, what started the turn, what Emil did and how it went."""
    opening = turn[0]
    parts = [f"{_clock(opening.event_time)} {_clip(opening.content or '', 100)}"]
    return "- " + "; ".join(parts + _actions(turn[1:]))


_DONE_NOTE = "\n\n[cut for space; already done earlier in this turn: "


def note_dropped(opening: Message, group: Sequence[Message]) -> Message:
    """The opening message of the turn in progress, with a note of what a call group cut from
    that turn did: without it the model no longer knows it took those actions, and takes them
    again (Emil answered one chat line twice after an overflow recovery)."""
    done = _actions(group)
    if not done:
        return opening
    content = opening.content or ""
    base, sep, earlier = content.partition(_DONE_NOTE)
    items = [earlier.removesuffix("]"), *done] if sep else done
    return opening.with_changes(content=f"{base}{_DONE_NOTE}{'; '.join(items)}]")


def _fold(memory: Message | None, turn: Turn, config: LadderConfig) -> Message:
    summarise = config.summariser or digest_turn
    lines = [] if memory is None else (memory.content or "").split("\n")[1:]
    lines.append(summarise(turn))
    # Rolling: the oldest lines leave first once the note is over its size.
    while (
        len(lines) > 1
        and config.tokens_of("\n".join([_MEMORY_HEADER, *lines])) > config.memory_max_tokens
    ):
        lines.pop(0)
    times = [m.event_time for m in turn if m.event_time is not None]
    first = memory.event_time if memory is not None and memory.event_time is not None else None
    oldest = min([t for t in [first, *times] if t is not None], default=None)
    return Message.memory("\n".join([_MEMORY_HEADER, *lines]), event_time=oldest)


# -- the driver ----------------------------------------------------------------------------------


Measure = Callable[[LadderState], int]


class Measurer(Protocol):
    """Exact sizes of ladder states, with two steps a counter may answer without a full count.

    ``swap`` and ``fold`` must return exactly ``measure`` of the state they build; a counter
    that knows the size of one old turn can answer them in O(1) (the ladder tries hundreds of
    one-turn changes per trim, most of which free nothing).
    """

    def measure(self, state: LadderState) -> int: ...

    def swap(
        self, state: LadderState, tokens: int, index: int, turn: Turn
    ) -> tuple[LadderState, int]:
        """``state`` (of size ``tokens``) with ``turns[index]`` replaced by ``turn``."""
        ...

    def fold(
        self, state: LadderState, tokens: int, memory: Message | None
    ) -> tuple[LadderState, int]:
        """``state`` without its oldest turn, and with ``memory`` as its memory note."""
        ...


class _Plain:
    """A :class:`Measurer` that measures every state it builds."""

    def __init__(self, measure: Measure) -> None:
        self.measure = measure

    def swap(
        self, state: LadderState, tokens: int, index: int, turn: Turn
    ) -> tuple[LadderState, int]:
        candidate = _replace_turn(state, index, turn)
        return candidate, self.measure(candidate)

    def fold(
        self, state: LadderState, tokens: int, memory: Message | None
    ) -> tuple[LadderState, int]:
        candidate = LadderState(state.turns[1:], memory)
        return candidate, self.measure(candidate)


class _Run:
    """Mutable bookkeeping of one ladder run; the rungs themselves stay pure."""

    def __init__(self, state: LadderState, sizes: Measurer, target: int, now: float) -> None:
        self.state = state
        self.sizes = sizes
        self.target = target
        self.now = now
        self.tokens = sizes.measure(state)
        self.records: list[TrimRecord] = []

    @property
    def over(self) -> bool:
        return self.tokens > self.target

    def _keep(self, candidate: LadderState, tokens: int) -> bool:
        """Keep a candidate only if it is smaller: a step that frees nothing changes nothing."""
        if tokens >= self.tokens:
            return False
        self.state, self.tokens = candidate, tokens
        return True

    def try_state(self, candidate: LadderState) -> bool:
        return self._keep(candidate, self.sizes.measure(candidate))

    def try_swap(self, index: int, turn: Turn) -> bool:
        return self._keep(*self.sizes.swap(self.state, self.tokens, index, turn))

    def try_fold(self, memory: Message | None) -> bool:
        return self._keep(*self.sizes.fold(self.state, self.tokens, memory))

    def record(self, rung: str, touched: int, before: int) -> None:
        if touched and before > self.tokens:
            self.records.append(
                TrimRecord(
                    rung=rung,
                    messages_touched=touched,
                    tokens_freed=before - self.tokens,
                    horizon_after_s=self.state.to_history().horizon(self.now),
                    tokens_before=before,
                    tokens_after=self.tokens,
                )
            )


def _replace_turn(state: LadderState, index: int, turn: Turn) -> LadderState:
    turns = list(state.turns)
    turns[index] = turn
    return LadderState(tuple(turns), state.memory)


def _changed(old: Turn, new: Turn) -> int:
    return sum(1 for a, b in zip(old, new, strict=False) if a is not b) + abs(len(old) - len(new))


# Results of the per-turn rungs by (rung, turn identity), kept on the config. The rungs are
# pure, so this changes nothing but speed: a turn a rung left unchanged (or whose rewrite freed
# nothing, e.g. reasoning the template already hides) is tried again at every later trim, and
# handing back the same rewritten turn object lets the exact counter find it in its per-turn
# cache instead of counting fresh messages again. Entries hold the turn, so the identities in
# the key stay unique.
def _rewrite(
    name: str, transform: Callable[[Turn], Turn | None], old: Turn, cfg: LadderConfig
) -> Turn | None:
    memo = cfg._memo
    key = (name, id(old))
    entry = memo.get(key)
    if entry is None or entry[0] is not old:
        if len(memo) >= cfg.memo_limit:
            memo.clear()
        entry = memo[key] = (old, transform(old))
    return entry[1]


def _per_turn(
    run: _Run,
    name: str,
    transform: Callable[[Turn], Turn | None],
    last: int,
    cfg: LadderConfig,
) -> None:
    before, touched = run.tokens, 0
    for index in range(last):
        if not run.over:
            break
        old = run.state.turns[index]
        new = _rewrite(name, transform, old, cfg)
        if new is not None and run.try_swap(index, new):
            touched += _changed(old, new)
    run.record(name, touched, before)


def _fold_or_evict(run: _Run, name: str, config: LadderConfig, fold: bool) -> None:
    before, touched = run.tokens, 0
    while run.over and len(run.state.turns) > 1:
        oldest = run.state.turns[0]
        memory = _fold(run.state.memory, oldest, config) if fold else run.state.memory
        if not run.try_fold(memory):
            break
        touched += len(oldest)
    if (
        not fold
        and run.over
        and run.state.memory is not None
        and run.try_state(LadderState(run.state.turns, None))
    ):
        touched += 1
    run.record(name, touched, before)


def _cut_newest(run: _Run, config: LadderConfig, ceiling: int) -> None:
    """Cut the turn in progress only while the prompt is above ``ceiling`` (the hard budget)."""
    run.target = max(run.target, ceiling)
    before, touched = run.tokens, 0
    if not run.state.turns:
        return
    index = len(run.state.turns) - 1
    for transform in (lambda t: elide_results(t, config), drop_reasoning):
        if not run.over:
            break
        old = run.state.turns[index]
        new = transform(old)
        if new is not None and run.try_swap(index, new):
            touched += _changed(old, new)
    # Then whole groups, oldest first; the opening message is pinned, and notes what each
    # dropped group did (unless the note would cost more than the group frees).
    while run.over:
        groups = split_groups(run.state.turns[index])
        if len(groups) <= 1:
            break
        dropped = groups[1]
        rest = tuple(m for g in (groups[0][1:], *groups[2:]) for m in g)
        noted = (note_dropped(groups[0][0], dropped), *rest)
        if not run.try_swap(index, noted) and not run.try_swap(index, (groups[0][0], *rest)):
            break
        touched += len(dropped)
    run.record("cut_newest", touched, before)


def _superseded_status_turns(turns: Sequence[Turn]) -> int:
    """Turns before the last turn that carries a status snapshot (their snapshots are stale)."""
    for index in range(len(turns) - 1, -1, -1):
        if any(m.status for m in turns[index]):
            return index
    return 0


def run_ladder(
    history: History,
    *,
    target: int,
    measure: Measure | Measurer,
    config: LadderConfig | None = None,
    now: float | None = None,
    ceiling: int | None = None,
) -> tuple[History, list[TrimRecord], int]:
    """Trim ``history`` until ``measure`` says it is at or under ``target``.

    ``ceiling`` is the hard budget (default: ``target``). Older turns are trimmed down to
    ``target`` (the low-water mark, so the next steps need no trim); the newest turn, the one
    in progress, is cut only while the prompt is above ``ceiling``: what it loses are actions
    the model would repeat.

    ``measure`` is a function of a state, or a :class:`Measurer` that can also size the
    ladder's one-turn steps without a full count.

    Returns the trimmed history, one record per rung that freed tokens, and the final count.
    If even the last rung cannot reach the target the result is as small as the ladder can
    make it; the caller decides whether that fits its hard budget.
    """
    cfg = config or LadderConfig()
    sizes = _Plain(measure) if callable(measure) else measure
    run = _Run(LadderState.of(history), sizes, target, time.time() if now is None else now)
    if run.over:
        old_turns = max(len(run.state.turns) - 1, 0)
        _per_turn(run, "drop_reasoning", drop_reasoning, old_turns, cfg)
        _per_turn(
            run, "collapse_status", collapse_status, _superseded_status_turns(run.state.turns), cfg
        )
        _per_turn(run, "elide_results", lambda t: elide_results(t, cfg), old_turns, cfg)
        _fold_or_evict(run, "fold", cfg, fold=True)
        _fold_or_evict(run, "evict", cfg, fold=False)
        _cut_newest(run, cfg, target if ceiling is None else ceiling)
    return run.state.to_history(), run.records, run.tokens

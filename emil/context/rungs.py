"""The built-in trim rungs, cheapest loss first, and the registry that names them.

``refresh_notes`` (the pinned notes block brought up to date: the one moment it may change),
``drop_reasoning``, ``collapse_status`` (superseded status snapshots), ``elide_results`` (bulky
old tool results become stubs), ``summarise`` (oldest turns into the memory note, as lines the
served model wrote between turns), ``fold`` (oldest turns into the memory note, as
deterministic digests), ``evict`` (whole old turns, then the note), ``cut_newest`` (the turn in
progress, only above the hard budget).
A tool call and its result stay or go together. A new rung is one :class:`Rung` subclass plus
:func:`register_rung`; :func:`check_rungs` refuses an order that cannot guarantee a fit.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from emil.config.checks import register_check
from emil.config.settings import DEFAULT_RUNGS
from emil.context.history import History, Message, Turn
from emil.context.ladder import LadderConfig, Preparation, Rung, Trim

__all__ = [
    "RUNGS", "CollapseStatus", "CutNewest", "DropReasoning", "ElideResults", "Evict", "Fold",
    "NotesSource", "RefreshNotes", "Summarise", "SummarySource", "build_rungs", "check_rungs", "digest_turn", "elide_results", "fold_note", "note_dropped",
    "register_rung", "split_groups",
]

_MEMORY_HEADER = "[memory] Earlier events, folded from older turns (oldest first):"
_DONE_NOTE = "\n\n[cut for space; already done earlier in this turn: "


# -- pure transforms of messages and turns -------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stub(result: Message, call: tuple[str, str] | None, tokens: int) -> Message:
    """What replaces a bulky tool result: which call, how big, what it held."""
    name, arguments = call or ("unknown tool", "")
    content = result.content or ""
    try:
        data = json.loads(content)
    except (json.JSONDecodeError, TypeError):
        data = None
    shape = f"; a list of {len(data)} items" if isinstance(data, list) else ""
    if isinstance(data, dict):
        shape = "; keys: " + ", ".join(list(data)[:8])
        for flag in ("ok", "error"):
            if flag in data and not isinstance(data[flag], dict | list):
                shape += f"; {flag}={_clip(str(data[flag]), 60)}"
    text = f"[elided: {tokens}-token result of {name}({_clip(arguments, 80)}){shape}; began: {_clip(content, 80)}]"
    return result.with_changes(content=text)


def elide_results(turn: Turn, over_tokens: int, tokens_of: Callable[[str], int]) -> Turn | None:
    """Tool results over ``over_tokens`` replaced by stubs; None when nothing is bulky."""
    calls = {c["id"]: (c["name"], c["arguments"]) for m in turn for c in m.tool_calls}
    out, changed = list(turn), False
    for i, m in enumerate(turn):
        if m.role == "tool" and not (m.content or "").startswith("[elided:"):
            tokens = tokens_of(m.content or "")
            if tokens > over_tokens:
                out[i], changed = _stub(m, calls.get(m.tool_call_id or ""), tokens), True
    return tuple(out) if changed else None


def _without(turn: Turn, field: str) -> Turn | None:
    """The turn with ``field`` (reasoning, status) cleared; None when no message has it."""
    if not any(getattr(m, field) for m in turn):
        return None
    cleared = {field: None, "status_full": None} if field == "status" else {field: None}
    return tuple(m.with_changes(**cleared) if getattr(m, field) else m for m in turn)


def split_groups(turn: Turn) -> list[tuple[Message, ...]]:
    """A turn as [opening, group, group...]: each group is an assistant message and the tool
    results that answer it, so groups can leave without orphaning a call or a result."""
    groups: list[list[Message]] = []
    for message in turn:
        if message.role == "tool" and len(groups) > 1:
            groups[-1].append(message)
        else:
            groups.append([message])
    return [tuple(g) for g in groups]


def _actions(messages: Sequence[Message]) -> list[str]:
    """What the assistant messages among ``messages`` said and did, and how each call went."""
    results = {m.tool_call_id: m.content or "" for m in messages if m.role == "tool"}
    parts: list[str] = []
    for m in messages:
        if m.role == "assistant":
            parts += [f'said "{_clip(m.content, 60)}"'] if m.content else []
            parts += [
                f"{c['name']}({_clip(c['arguments'], 40)}) -> "
                + (_clip(results[c["id"]], 50) if c["id"] in results else "no result")
                for c in m.tool_calls
            ]
    return parts


def digest_turn(turn: Turn) -> str:
    """One deterministic line: when, what started the turn, what Emil did and how it went."""
    t = turn[0].event_time
    clock = "--:--:--" if t is None else time.strftime("%H:%M:%S", time.gmtime(t))
    return "- " + "; ".join([f"{clock} {_clip(turn[0].content or '', 100)}", *_actions(turn[1:])])


def note_dropped(opening: Message, group: Sequence[Message]) -> Message:
    """The opening message of the turn in progress, with a note of what a call group cut from
    that turn did: without it the model no longer knows it took those actions."""
    done = _actions(group)
    if not done:
        return opening
    base, sep, earlier = (opening.content or "").partition(_DONE_NOTE)
    items = [earlier.removesuffix("]"), *done] if sep else done
    return opening.with_changes(content=f"{base}{_DONE_NOTE}{'; '.join(items)}]")


def fold_note(memory: Message | None, line: str, turn: Turn, trim: Trim) -> Message:
    """The memory note with ``line`` (what ``turn`` was) added, its oldest lines rolled out
    beyond ``memory_max_tokens``: every rung that folds turns builds its note here."""
    lines = [*([] if memory is None else (memory.content or "").split("\n")[1:]), line]
    while len(lines) > 1 and trim.tokens_of("\n".join([_MEMORY_HEADER, *lines])) > trim.config.memory_max_tokens:
        lines.pop(0)
    times = [m.event_time for m in (*turn, *([memory] if memory else [])) if m.event_time is not None]
    return Message.memory("\n".join([_MEMORY_HEADER, *lines]), event_time=min(times, default=None))


# -- the rungs ------------------------------------------------------------------------------------


class NotesSource(Protocol):
    """The pinned notes block's text: emil.memory's notes live, the recorded block in replay."""

    def prepare(self) -> None:
        """Bring the block up to date (it may read a database): between turns only."""

    def text(self) -> str | None:
        """The block as last prepared (None: no block); no I/O."""


class RefreshNotes(Rung):
    """The pinned notes block (``History.notes``) brought up to date, first at every trim: the
    prompt changes after the system prompt then anyway, so the block never breaks the prefix on
    its own. It may grow the prompt (new facts); the rungs after it trim that too. Built by the
    session with its notes; the registered one, without, does nothing."""

    name = "refresh_notes"

    def __init__(self, source: NotesSource | None = None) -> None:
        self.source = source

    def apply(self, trim: Trim) -> None:
        if self.source is None:
            return
        text, notes = self.source.text() or None, trim.history.notes
        if text != (notes.content if notes is not None else None):
            trim.take(replace(trim.history, notes=Message.memory(text) if text else None))

    async def prepare(self, preparation: Preparation) -> None:
        # Only when a trim may come (above the low-water mark): rendering reads the database.
        if self.source is not None and preparation.tokens > preparation.target:
            self.source.prepare()



class _PerTurn(Rung):
    """Rewrites old turns one at a time, oldest first (never the turn in progress)."""

    def rewrite(self, turn: Turn, trim: Trim) -> Turn | None:
        raise NotImplementedError

    def turns(self, history: History) -> int:
        """How many leading turns this rung may rewrite."""
        return len(history.turns) - 1

    def apply(self, trim: Trim) -> None:
        for index in range(self.turns(trim.history)):
            if not trim.over:
                return
            if (new := self.rewrite(trim.history.turns[index], trim)) is not None:
                trim.try_swap(index, new)


class DropReasoning(_PerTurn):
    """Old assistant reasoning (free with Qwen's template unless ``preserve_thinking``: a step
    that frees nothing is not kept, so the reasoning stays for recordings)."""

    name = "drop_reasoning"

    def rewrite(self, turn: Turn, trim: Trim) -> Turn | None:
        return _without(turn, "reasoning")


class CollapseStatus(_PerTurn):
    """Status snapshots that a newer snapshot supersedes."""

    name = "collapse_status"

    def turns(self, history: History) -> int:
        with_status = [i for i, turn in enumerate(history.turns) if any(m.status for m in turn)]
        return with_status[-1] if with_status else 0

    def rewrite(self, turn: Turn, trim: Trim) -> Turn | None:
        return _without(turn, "status")


class ElideResults(_PerTurn):
    """Old tool results over ``elide_over_tokens`` become a stub saying what they held."""

    name = "elide_results"

    def rewrite(self, turn: Turn, trim: Trim) -> Turn | None:
        return elide_results(turn, trim.config.elide_over_tokens, trim.tokens_of)


class Fold(Rung):
    """The oldest turns become deterministic lines of the rolling memory note."""

    name = "fold"

    def apply(self, trim: Trim) -> None:
        while trim.over and len(trim.history.turns) > 1:
            oldest = trim.history.turns[0]
            if not trim.try_fold(fold_note(trim.history.memory, digest_turn(oldest), oldest, trim)):
                return


class SummarySource(Protocol):
    """Summaries of the oldest turns, made between turns: emil.memory's summariser (the served
    model) live, the recorded summaries in replay."""

    async def prepare(self, preparation: Preparation) -> None:
        """Between turns: ask for a summary when a trim is near."""

    def ready(self, turns: Sequence[Turn]) -> tuple[int, Sequence[str]] | None:
        """Lines for the ``n`` oldest of ``turns``, if a summary of exactly those is ready; no I/O."""

    def used(self, count: int) -> None:
        """The rung folded the ``count`` turns the ready summary covers."""


class Summarise(Rung):
    """The oldest turns become the lines of a summary the served model wrote between turns, in
    the rolling memory note; only when one is ready for exactly those turns (else ``fold``,
    next, digests them). Built by the session with its summariser; the registered one, without,
    does nothing."""

    name = "summarise"

    def __init__(self, source: SummarySource | None = None) -> None:
        self.source = source

    def apply(self, trim: Trim) -> None:
        turns = trim.history.turns
        found = self.source.ready(turns[:-1]) if self.source is not None else None
        if found is None:
            return
        n, lines = found
        memory = fold_note(trim.history.memory, "\n".join(lines), turns[0], trim)
        if trim.try_history(replace(trim.history, turns=turns[n:], memory=memory)):
            assert self.source is not None
            self.source.used(n)

    async def prepare(self, preparation: Preparation) -> None:
        if self.source is not None:
            await self.source.prepare(preparation)


class Evict(Rung):
    """Whole old turns, then the memory note itself."""

    name = "evict"
    required = "the only rung that can remove every old turn and the memory note"

    def apply(self, trim: Trim) -> None:
        while trim.over and len(trim.history.turns) > 1 and trim.try_fold(trim.history.memory):
            pass
        if trim.over and trim.history.memory is not None:
            trim.try_history(replace(trim.history, memory=None))


class CutNewest(Rung):
    """The turn in progress, only above the hard budget (what it loses are actions the model no
    longer knows it took, so it takes them again: Emil once answered one chat line twice after
    an overflow recovery): its bulky results elided, its reasoning dropped, then its oldest call
    groups, each leaving a line saying what it did unless the line costs more than the group
    frees. Its opening message is pinned."""

    name = "cut_newest"
    hard = last = True
    required = "the only rung that can shrink the turn in progress"

    def apply(self, trim: Trim) -> None:
        if not trim.history.turns:
            return
        i = len(trim.history.turns) - 1
        if trim.over and (new := elide_results(trim.history.turns[i], trim.config.elide_over_tokens, trim.tokens_of)):
            trim.try_swap(i, new)
        if trim.over and (new := _without(trim.history.turns[i], "reasoning")):
            trim.try_swap(i, new)
        while trim.over and len(groups := split_groups(trim.history.turns[i])) > 1:
            opening, dropped = groups[0][0], groups[1]
            rest = tuple(m for g in (groups[0][1:], *groups[2:]) for m in g)
            if not trim.try_swap(i, (note_dropped(opening, dropped), *rest)) and not trim.try_swap(i, (opening, *rest)):
                return


# -- the registry ---------------------------------------------------------------------------------

RUNGS: dict[str, type[Rung]] = {}
"""Every rung a configuration may name, by name."""
_R = TypeVar("_R", bound=type[Rung])


def register_rung(cls: _R) -> _R:
    """Make ``cls`` nameable in ``trim_rungs`` (usable as a class decorator)."""
    if not cls.name:
        raise ValueError(f"rung class {cls.__name__} has no name")
    if RUNGS.get(cls.name, cls) is not cls:
        raise ValueError(f"a different rung is already registered as {cls.name!r}")
    RUNGS[cls.name] = cls
    return cls


for _cls in (RefreshNotes, DropReasoning, CollapseStatus, ElideResults, Summarise, Fold, Evict, CutNewest):
    register_rung(_cls)


def check_rungs(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` as a valid ladder order, or ValueError saying what is wrong and the fix."""
    order = tuple(names)
    for name in order:
        if name not in RUNGS:
            close = difflib.get_close_matches(name, list(RUNGS), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"unknown trim rung {name!r}: {hint}known rungs: {', '.join(RUNGS)}")
        if order.count(name) > 1:
            raise ValueError(f"trim rung {name!r} is listed twice; list each rung once")
    lasts = [name for name, cls in RUNGS.items() if cls.last]
    for name, cls in RUNGS.items():
        if cls.required and name not in order:
            where = " at the end" if cls.last else f" before {lasts[0]!r}" if lasts else ""
            raise ValueError(
                f"trim rungs must include {name!r} ({cls.required}; without it a prompt may never fit): add it{where}"
            )
        if cls.last and name in order and order[-1] != name:
            raise ValueError(f"trim rung {name!r} must be the last one: move it to the end")
    return order


check_rungs(DEFAULT_RUNGS)  # the settings' default is taken as it is: it must be a valid order
register_check("trim_rungs", check_rungs)


def build_rungs(config: LadderConfig, given: Iterable[Rung] = ()) -> tuple[Rung, ...]:
    """The rung objects for ``config.rungs``, in order (checked by :func:`check_rungs`);
    ``given`` are rungs built by the caller with its session's parts (notes, a summariser),
    each standing in for its name, if the order lists it."""
    built = {rung.name: rung for rung in given}
    return tuple(built.get(name) or RUNGS[name]() for name in check_rungs(config.rungs))

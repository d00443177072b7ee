"""The action rules: which tool, against which target, on whose words. One table.

Each :class:`Rule` is one row: the target it applies to (in words), who may ask for it, and
what follows or limits it. A tool declares its rows beside its arguments (``Tool.rules`` in
emil.world.tool; the rows of one tool are written in its own module) and classifies its call's
target to pick its row (``Tool.guarded``); it asks :func:`decide` through the guard
(emil.world.guard). The rows no one tool owns are here (items held for others, the command
rule, ``any``). :func:`rules` is the table; docs/trust.md shows :func:`rules_markdown` (a test
checks that the docs' table is this one). The bot checks the player-attack and command rows
again (``js/emil_trust.js``).

"Who may ask" is about every player whose words are in the turn (the requesters): a row that
needs an owner or an operator is refused when *anyone else's* words are in the turn as well,
because those words may be what asked for it; and refused when nobody spoke (Emil acting on
its own may only do what anyone may ask for).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from emil.trust.people import People

__all__ = [
    "ANY",
    "CHAT_COMMAND",
    "CHAT_LINE",
    "USE_HELD",
    "USE_UNSURE",
    "Rule",
    "Verdict",
    "Who",
    "decide",
    "declare",
    "rule",
    "rules",
    "rules_markdown",
]


class Who(StrEnum):
    """Who may ask for a row's action."""

    ANYONE = "anyone"
    OWNER = "the owner"
    TRUSTED = "a trusted player"
    OPERATOR = "an operator"
    NOBODY = "nobody"


@dataclass(frozen=True)
class Rule:
    """One row of the table. A tool declares the rows its calls fall under (``Tool.rules``,
    emil.world.tool), which puts them in the table with its name (:func:`declare`)."""

    id: str
    target: str
    who: tuple[Who, ...]
    follows: str = ""
    """What follows from it or limits it (for the docs and the refusal)."""
    tools: tuple[str, ...] = ()
    """The tools that declared it (filled by :func:`rules`; ``*``: every other tool)."""


# Rows that are no one tool's: the ownership of held items (any tool that uses items Emil holds
# declares them), the command rule (the chat tools, and the guard's confirmed commands) and the
# row of everything else.
USE_HELD = Rule("use.held", "items Emil holds for another player", (Who.OWNER, Who.OPERATOR),
                "Emil's own items are used first; jobs that pick their own items are told to leave them alone")
USE_UNSURE = Rule("use.unsure", "items whose owner is unknown (the ownership file was damaged when Emil started)",
                  (Who.OPERATOR,))
CHAT_COMMAND = Rule("chat.command", "chat a server reads as a command", (Who.OPERATOR,),
                    "only with allow_commands, and only the exact command text an operator wrote in this turn or "
                    "confirmed; the bot checks it again")
CHAT_LINE = Rule("chat.line", "any other chat", (Who.ANYONE,),
                 "at most chat_lines_per_turn lines a turn and chat_lines_per_minute a minute")
ANY = Rule("any", "anything", (Who.ANYONE,), tools=("*",))
"""The row of every call no declared row covers."""

_BY_ID: dict[str, Rule] = {ANY.id: ANY, USE_HELD.id: USE_HELD, USE_UNSURE.id: USE_UNSURE,
                           CHAT_COMMAND.id: CHAT_COMMAND, CHAT_LINE.id: CHAT_LINE}
_DECLARED: dict[str, list[str]] = {}
"""Row id -> the tools that declared it, in the order they did (the table's order)."""


def declare(row: Rule, tool: str) -> None:
    """``tool`` falls under ``row``: the row joins the table (two different rows may not share
    an id: a bug, never input)."""
    known = _BY_ID.setdefault(row.id, row)
    if known is not row and known != row:
        raise TypeError(f"two rules with the id {row.id!r}")
    users = _DECLARED.setdefault(row.id, [])
    if tool not in users:
        users.append(tool)


def rules() -> tuple[Rule, ...]:
    """The table as docs/trust.md shows it: each declared row with the tools that declared it,
    in the order they were declared (the order of the tools in every prompt), ``any`` last."""
    rows = [replace(_BY_ID[i], tools=tuple(t)) for i, t in _DECLARED.items() if i != ANY.id]
    return (*rows, ANY)


def rule(rule_id: str) -> Rule:
    """The row with this id (KeyError for an unknown id: a bug, never input)."""
    return _BY_ID[rule_id]


@dataclass(frozen=True)
class Verdict:
    """What :func:`decide` found: allowed or not, by which row, and why in words."""

    allowed: bool
    rule: str
    why: str = ""


def _satisfies(name: str, who: tuple[Who, ...], people: People, owner: str | None) -> bool:
    return (
        (Who.OPERATOR in who and people.is_operator(name))
        or (Who.TRUSTED in who and people.is_trusted(name))
        or (Who.OWNER in who and owner is not None and name == owner)
    )


def _who_text(who: tuple[Who, ...], owner: str | None) -> str:
    parts = [f"{owner} (the owner)" if w is Who.OWNER and owner else str(w) for w in who]
    return " or ".join(parts)


def decide(row: Rule | str, requesters: Iterable[str], people: People, owner: str | None = None) -> Verdict:
    """May the players whose words are in this turn (``requesters``) have the act of ``row`` (a
    row or its id), against a target owned by ``owner``? See the module docstring."""
    row = rule(row) if isinstance(row, str) else row
    asked = sorted(set(requesters))
    if Who.NOBODY in row.who:
        return Verdict(False, row.id, f"nobody may order that ({row.target})")
    if Who.ANYONE in row.who:
        return Verdict(True, row.id)
    may = _who_text(row.who, owner)
    if not asked:
        return Verdict(False, row.id, f"nobody asked for it in this turn, and only {may} may")
    others = [n for n in asked if not _satisfies(n, row.who, people, owner)]
    if not others:
        return Verdict(True, row.id)
    names = ", ".join(others)
    fakes = [f"{n} is not the operator {op}" for n in others if (op := people.look_alike_of(n))]
    extra = f" ({'; '.join(fakes)})" if fakes else ""
    return Verdict(False, row.id, f"only {may} may ask for that, and {names} asked{extra}")


def rules_markdown() -> str:
    """The table as docs/trust.md shows it."""
    lines = ["| rule | tool | target | who may ask | what follows |", "| --- | --- | --- | --- | --- |"]
    for r in rules():
        tools = ", ".join("every other tool" if t == "*" else f"`{t}`" for t in r.tools)
        who = " or ".join(str(w) for w in r.who)
        lines.append(f"| `{r.id}` | {tools} | {r.target} | {who} | {r.follows or '-'} |")
    return "\n".join(lines)

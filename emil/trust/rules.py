"""The action rules: which tool, against which target, on whose words. One table.

Each :class:`Rule` is one row: the tools it covers, the target it applies to (in words), who
may ask for it, and what follows or limits it. :mod:`emil.world.guard` classifies a tool call's
target to pick its row and asks :func:`decide`; docs/trust.md shows :func:`rules_markdown`
(a test checks that the docs' table is this one). The bot checks the player-attack and command
rows again (``js/emil_trust.js``).

"Who may ask" is about every player whose words are in the turn (the requesters): a row that
needs an owner or an operator is refused when *anyone else's* words are in the turn as well,
because those words may be what asked for it; and refused when nobody spoke (Emil acting on
its own may only do what anyone may ask for).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from emil.trust.people import People

__all__ = ["RULES", "Rule", "Verdict", "Who", "decide", "rule", "rules_markdown"]


class Who(StrEnum):
    """Who may ask for a row's action."""

    ANYONE = "anyone"
    OWNER = "the owner"
    TRUSTED = "a trusted player"
    OPERATOR = "an operator"
    NOBODY = "nobody"


@dataclass(frozen=True)
class Rule:
    """One row of the table."""

    id: str
    tools: tuple[str, ...]
    target: str
    who: tuple[Who, ...]
    follows: str = ""
    """What follows from it or limits it (for the docs and the refusal)."""


RULES: tuple[Rule, ...] = (
    Rule("attack.mob", ("attack",), "a mob type (zombie, spider, cow...)", (Who.ANYONE,)),
    Rule("attack.protected", ("attack",), "a tameable animal, villager or golem (it may be someone's pet or a village's)",
         (Who.OPERATOR,)),
    Rule("attack.player", ("attack",), "a player: any name the server lists or Emil has met, in any letter case",
         (Who.OPERATOR,), "the bot checks it again with the name Python resolved"),
    Rule("attack.unknown", ("attack",), 'anything else: "player", "everyone", a name not in sight',
         (Who.NOBODY,), "never a generic target"),
    Rule("take.emil", ("take",), "a chest Emil placed", (Who.ANYONE,), "what is taken stays Emil's"),
    Rule("take.owned", ("take",), "a chest a player placed (as Emil saw) or an operator assigned",
         (Who.OWNER, Who.OPERATOR), "what is taken is held for the chest's owner"),
    Rule("take.unknown", ("take",), "a chest nobody is known to own", (Who.OPERATOR,), "what is taken becomes Emil's"),
    Rule("store.emil", ("store",), "a chest Emil placed", (Who.ANYONE,)),
    Rule("store.owned", ("store",), "a chest a player placed or was assigned", (Who.OWNER, Who.OPERATOR)),
    Rule("store.unknown", ("store",), "a chest nobody is known to own", (Who.OPERATOR,)),
    Rule("dig.chest.emil", ("dig",), "a chest Emil placed", (Who.ANYONE,), "what it holds spills"),
    Rule("dig.chest.owned", ("dig",), "a chest a player placed or was assigned", (Who.OWNER, Who.OPERATOR),
         "what it holds spills"),
    Rule("dig.chest.unknown", ("dig",), "a chest nobody is known to own", (Who.OPERATOR,), "what it holds spills"),
    Rule("dig.block", ("dig",), "any other block", (Who.ANYONE,), "Emil cannot tell who built what"),
    Rule("collect.container", ("collect",), "chests, barrels, shulker boxes (any one nearby)", (Who.OPERATOR,)),
    Rule("give.held.recipient", ("give",), "items Emil holds for the player receiving them", (Who.ANYONE,)),
    Rule("give.own.trusted", ("give",), "Emil's own items, to or on the order of a trusted player or an operator",
         (Who.ANYONE,), "no limit"),
    Rule("give.own", ("give",), "Emil's own items, to anyone else", (Who.ANYONE,),
         "at most give_items_per_hour items per player within any hour"),
    Rule("use.held", ("give", "store", "place", "eat", "craft", "smelt", "build", "sleep"),
         "items Emil holds for another player", (Who.OWNER, Who.OPERATOR),
         "Emil's own items are used first; jobs that pick their own items are told to leave them alone"),
    Rule("use.unsure", ("give", "store", "place", "eat"),
         "items whose owner is unknown (the ownership file was damaged when Emil started)", (Who.OPERATOR,)),
    Rule("chat.command", ("say", "whisper"), "chat a server reads as a command",
         (Who.OPERATOR,),
         "only with allow_commands, and only the exact command text an operator wrote in this turn or "
         "confirmed; the bot checks it again"),
    Rule("chat.line", ("say", "whisper"), "any other chat", (Who.ANYONE,),
         "at most chat_lines_per_turn lines a turn and chat_lines_per_minute a minute"),
    Rule("claim_chest", ("claim_chest",), "say who owns a chest", (Who.OPERATOR,)),
    Rule("any", ("*",), "anything", (Who.ANYONE,)),
)
"""The rules, in the order docs/trust.md shows them."""

_BY_ID = {r.id: r for r in RULES}


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


def decide(rule_id: str, requesters: Iterable[str], people: People, owner: str | None = None) -> Verdict:
    """May the players whose words are in this turn (``requesters``) have the act of row
    ``rule_id``, against a target owned by ``owner``? See the module docstring."""
    row = rule(rule_id)
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
    for r in RULES:
        tools = ", ".join("every other tool" if t == "*" else f"`{t}`" for t in r.tools)
        who = " or ".join(str(w) for w in r.who)
        lines.append(f"| `{r.id}` | {tools} | {r.target} | {who} | {r.follows or '-'} |")
    return "\n".join(lines)

"""The rule table and decide(): who may ask for what, names matched exactly."""

from __future__ import annotations

import pytest

import emil.world.actions  # noqa: F401 - the tools declare their rows of the table
from emil.config import Settings
from emil.trust.people import People, valid_name
from emil.trust.rules import Rule, Who, decide, declare, rule, rules, rules_markdown

RULES = rules()

PEOPLE = People(Settings(operators=("Olga",), trusted_players=("Tess",), npc_players=("Otto",)))


def test_ids_are_unique_and_every_row_has_who() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(r.who for r in RULES)
    assert RULES[-1].id == "any" and RULES[-1].tools == ("*",)


@pytest.mark.parametrize("asked", [set(), {"carl"}, {"Olga", "carl"}, {"olga"}, {"0lga"}, {"Olga\u200b"}, {"OLGA"}])
def test_operator_rows_refuse_everyone_but_operators_alone(asked: set[str]) -> None:
    for rid in ("attack.player", "take.unknown", "claim_chest", "chat.command", "use.unsure"):
        v = decide(rid, asked, PEOPLE)
        assert not v.allowed and v.rule == rid and v.why


def test_operator_rows_allow_operators() -> None:
    assert decide("attack.player", {"Olga"}, PEOPLE).allowed
    assert decide("take.unknown", ["Olga", "Olga"], PEOPLE).allowed


def test_owner_rows() -> None:
    assert decide("take.owned", {"bob"}, PEOPLE, owner="bob").allowed
    assert decide("take.owned", {"Olga"}, PEOPLE, owner="bob").allowed
    assert decide("take.owned", {"bob", "Olga"}, PEOPLE, owner="bob").allowed
    for asked in ({"carl"}, {"bob", "carl"}, {"Bob"}, set()):
        v = decide("take.owned", asked, PEOPLE, owner="bob")
        assert not v.allowed, asked
    assert "bob (the owner) or an operator" in decide("take.owned", {"carl"}, PEOPLE, owner="bob").why
    assert not decide("take.owned", {"carl"}, PEOPLE, owner=None).allowed  # no owner: nobody is it


def test_trusted_players_are_not_operators() -> None:
    assert not decide("attack.player", {"Tess"}, PEOPLE).allowed
    assert not decide("take.owned", {"Tess"}, PEOPLE, owner="bob").allowed


def test_anyone_and_nobody_rows() -> None:
    assert decide("attack.mob", set(), PEOPLE).allowed
    assert decide("chat.line", {"carl"}, PEOPLE).allowed
    assert not decide("attack.unknown", {"Olga"}, PEOPLE).allowed


def test_a_look_alike_is_named_in_the_refusal() -> None:
    v = decide("attack.player", {"0lga"}, PEOPLE)
    assert "0lga is not the operator Olga" in v.why
    assert PEOPLE.look_alike_of("OLGA") == "Olga" and PEOPLE.look_alike_of("Olga") is None
    assert PEOPLE.look_alike_of("O_l_g_a") == "Olga" and PEOPLE.look_alike_of("bob") is None


def test_levels_and_names() -> None:
    assert PEOPLE.level("Olga") == "operator" and PEOPLE.level("Tess") == "trusted" and PEOPLE.level("olga") == "player"
    assert PEOPLE.is_trusted("Olga") and PEOPLE.is_trusted("Tess") and not PEOPLE.is_trusted("tess")
    assert valid_name("Olga_1") and not valid_name("Olga\u200b") and not valid_name("") and not valid_name("a" * 17)


def test_unknown_rule_is_a_bug() -> None:
    with pytest.raises(KeyError):
        rule("no.such.rule")


def test_markdown_has_a_row_per_rule() -> None:
    table = rules_markdown().splitlines()
    assert len(table) == len(RULES) + 2
    for r, line in zip(RULES, table[2:], strict=True):
        assert line.startswith(f"| `{r.id}` |") and " or ".join(str(w) for w in r.who) in line
    assert Who.NOBODY in rule("attack.unknown").who


def test_the_docs_table_is_the_code_table() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "trust.md").read_text(encoding="utf-8")
    start = doc.index("<!-- rules table: generated from emil/trust/rules.py -->") + len("<!-- rules table: generated from emil/trust/rules.py -->")
    end = doc.index("<!-- end of rules table -->")
    assert doc[start:end].strip() == rules_markdown(), "docs/trust.md's table differs: paste rules_markdown() in"


def test_a_row_for_nobody_refuses_everyone_and_says_so() -> None:
    row = next(r for r in RULES if Who.NOBODY in r.who)
    for asked in ({"Olga"}, {"Tess"}, set()):
        v = decide(row.id, asked, PEOPLE)
        assert v.allowed is False and v.rule == row.id
        assert v.why == f"nobody may order that ({row.target})"


def test_a_trusted_row_admits_trusted_players_and_operators_only() -> None:
    # No row of today's table names trusted players alone; the check a row would get is this one.
    from emil.trust.rules import _satisfies

    who = (Who.TRUSTED,)
    assert _satisfies("Tess", who, PEOPLE, None) and _satisfies("Olga", who, PEOPLE, None)
    assert not _satisfies("carl", who, PEOPLE, None) and not _satisfies("tess", who, PEOPLE, None)


@pytest.mark.parametrize(("asked", "why"), [
    (set(), "nobody asked for it in this turn, and only an operator may"),
    ({"carl", "dave"}, "only an operator may ask for that, and carl, dave asked"),
    ({"0lga", "OLGA"}, "only an operator may ask for that, and 0lga, OLGA asked "
                       "(0lga is not the operator Olga; OLGA is not the operator Olga)"),
])
def test_a_refusal_says_who_asked_and_who_may_word_for_word(asked: set[str], why: str) -> None:
    # The words go back to the model and are whispered to the players who asked.
    v = decide("attack.player", asked, PEOPLE)
    assert v.allowed is False and v.why == why


def test_a_row_is_declared_by_its_tools_and_two_rows_may_not_share_an_id() -> None:
    from emil.world.actions import TOOLS

    by_id = {r.id: r for r in RULES}
    for name, cls in TOOLS.items():
        for row in cls.rules:
            assert name in by_id[row.id].tools, (name, row.id)
    assert by_id["use.held"].tools[:2] == ("place", "eat")  # declared by the tools that use items
    with pytest.raises(TypeError, match=r"two rules with the id 'attack\.mob'"):
        declare(Rule("attack.mob", "something else", (Who.OPERATOR,)), "attack")

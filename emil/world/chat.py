"""Chat as it goes on the wire: cleaning, cutting to the chat limit, and the command rule.

The command rule decides whether a chat piece could be read as a server command. It is applied
to every piece exactly as it is handed to mineflayer (after cleaning and cutting), here and again
in the bot (``js/emil_chat_rule.js``, the same rule in JS), so neither side is the only guard.
What a client and the servers really do with a chat string, read in their sources:

- mineflayer 4.39 ``bot.chat(m)``: an ``m`` that starts with "/" goes out whole as one command;
  any other ``m`` is split at "\\n" and cut every 256 UTF-16 code units, each piece sent as chat.
  ``bot.whisper(u, m)`` sends ``"/tell u " + piece`` for each piece: a command by construction.
- minecraft-protocol 1.68 (1.19+): ``message.startsWith('/')`` picks a ``chat_command`` packet
  carrying ``message.slice(1)``, else a ``chat_message`` packet. No trimming, no normalisation.
- vanilla 1.19+: ``chat_command`` runs; a ``chat_message`` is never a command (a "§" or control
  character in it gets the client kicked). Before 1.19 one ``chat`` packet carried both: the
  server ran Apache commons ``normalizeSpace`` on it (Java whitespace runs to one space, the
  no-break space to a space, then ``String.trim``, which drops everything up to U+0020 at both
  ends) and ran it as a command when the result started with "/". Spigot and Paper did the same.
- flying-squid 1.12: ``chat_command`` runs; the pre-1.19 ``chat`` packet runs as a command when
  ``message[0] === '/'``; ``chat_message`` never.

So a piece is a command on the wire when it starts with "/", or, on older servers, when it does
after whitespace trimming. The rule refuses more, on purpose (a plugin may normalise further, and
a reader cannot see invisible characters): after NFKC (which maps the full-width solidus U+FF0F
to "/"), leading characters that are whitespace, controls, format characters (zero-width
space/joiners, bidi controls, soft hyphen, word joiner, BOM), combining marks, private-use,
surrogate or unassigned code points, or invisible fillers (Hangul fillers, braille blank) are
skipped, and a piece whose first remaining character is "/" or a slash look-alike (fraction,
division and big solidus, box-drawing and rising diagonals) reads as a command.

A piece that reads as a command goes out only when commands are allowed, every player whose
words are in the turn is an operator, and an operator's own line in the turn holds the command
text whole, or an operator confirmed it (:meth:`emil.world.guard.Guard.command_verdict`,
docs/trust.md); the bot checks again from what it heard itself (``js/emil_trust.js``). The chat
caps (lines a turn, a minute) are the guard's too.
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from emil.trust.rules import CHAT_COMMAND, CHAT_LINE, Rule
from emil.world.guard import Guard
from emil.world.tool import PLAYER_NAME, Guarding, Outcome, Speaks, Tool, ToolContext

__all__ = ["CHAT_LIMIT", "SLASHES", "Say", "Whisper", "clean_chat", "reads_as_command", "split_chat", "utf16_len"]

CHAT_LIMIT = 256
"""Longest chat message a client may send, in UTF-16 code units (what Java and JS count)."""

SLASHES = frozenset("/\uff0f\u2044\u2215\u29f8\u2571\u27cb\u2afb\u2afd\u1735\u3033")
""""/" and characters that look like it (or that NFKC turns into it: U+FF0F)."""

_SKIPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Mc", "Me"})
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Hangul choseong/jungseong/compatibility/half-width fillers and the braille blank: letters
and symbols by category, blank on screen."""

_KICKED = str.maketrans({"\u00a7": " ", "\u007f": " "})
"""Characters vanilla refuses in chat (it kicks the sender): the formatting sign and DEL."""


def utf16_len(text: str) -> int:
    """Length as Java and JS count it: characters beyond the BMP take two code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def clean_chat(text: str) -> str:
    """One line a server accepts: controls, format and separator characters to spaces, "§" and
    DEL to spaces, runs of whitespace to one space, no space at either end."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text.translate(_KICKED))
    return " ".join(flat.split())


def split_chat(text: str, limit: int = CHAT_LIMIT, max_messages: int = 3) -> list[str]:
    """``text`` cleaned and cut at spaces into at most ``max_messages`` pieces of at most
    ``limit`` UTF-16 code units each (a word longer than a piece is cut inside)."""
    flat = clean_chat(text)
    pieces: list[str] = []
    while flat and len(pieces) < max_messages:
        fit = _fit(flat, limit)
        if fit == len(flat):
            pieces.append(flat)
            break
        cut = flat.rfind(" ", 0, fit + 1)
        if cut <= fit // 2:
            cut = fit
        pieces.append(flat[:cut].rstrip())
        flat = flat[cut:].lstrip()
    return pieces


def _fit(text: str, limit: int) -> int:
    """How many characters of ``text`` fit in ``limit`` UTF-16 code units."""
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return max(i, 1)  # a piece holds at least one character, whatever the limit
    return len(text)


def _skipped(ch: str) -> bool:
    # Everything Java's String.trim drops (<= U+0020) is Cc or Zs, so the categories cover it.
    return unicodedata.category(ch) in _SKIPPED_CATEGORIES or ch in _INVISIBLE_LETTERS


def reads_as_command(piece: str) -> bool:
    """True when a server could read this chat piece as a command (see the module docstring)."""
    for ch in unicodedata.normalize("NFKC", piece):
        if not _skipped(ch):
            return ch in SLASHES
    return False


class _Chat(Tool):
    """Base of the chat tools: the text is cleaned and cut into chat-sized pieces, and every
    piece passes the command rule (:mod:`emil.world.chat`) before any is sent."""

    timeout_s: ClassVar[float] = 10.0
    speaks: ClassVar[Speaks | None] = Speaks()
    rules: ClassVar[tuple[Rule, ...]] = (CHAT_COMMAND, CHAT_LINE)
    if TYPE_CHECKING:  # a field of each chat tool, declared there to keep its place in the spec
        text: str

    def _limit(self) -> int:
        return CHAT_LIMIT

    def _said(self, sent: str) -> str:
        return f"said: {sent!r}"

    async def run(self, ctx: ToolContext) -> Outcome:
        """Without a guard (a caller that has none): one made from the policy."""
        return await self.guarded(ctx.guard or Guard.from_policy(ctx.policy), ctx)

    async def guarded(self, guard: Guarding, ctx: ToolContext) -> Outcome:
        """Every piece against the command rule (chat.command), then the chat caps (chat.line),
        then the pieces sent one by one with the authority the bot checks again."""
        name, policy = self.tool_name, ctx.policy
        pieces = split_chat(self.text, self._limit(), policy.max_chat_messages)
        if not pieces:
            return Outcome(False, f"{name} failed: nothing to say after removing control characters")
        commands = [i for i, piece in enumerate(pieces, 1) if reads_as_command(piece)]
        rule_id = CHAT_COMMAND.id if commands else CHAT_LINE.id
        for i in commands:
            verdict, ask = guard.command_verdict(pieces[i - 1])
            if verdict.allowed:
                continue
            if ask and len(commands) == 1 and len(pieces) == 1:
                code = await guard.ask_to_confirm(ctx.bot, pieces[0])
                if code is not None:
                    return Outcome(False, guard.confirm_text(name, pieces[0], code), {"refused": list(pieces), "confirm": code},
                                   rule=rule_id)
            where = "the message" if len(pieces) == 1 else "piece " + ", ".join(map(str, commands)) + f" of {len(pieces)}"
            refused = await guard.refuse(ctx.bot, self, verdict, what=f'({where} would start with "/" or a look-alike: a server command)')
            return Outcome(False, refused.text + ". Say it without a leading slash.", {"refused": list(pieces), "rule": rule_id}, rule=rule_id)
        room, why = guard.chat_room()
        if room == 0:
            return Outcome(False, f"{name}: not sent: {why}", {"refused": list(pieces), "rule": CHAT_LINE.id},
                           rule=CHAT_LINE.id)
        sending = pieces[:room]
        for piece in sending:
            # The bot checks the same rule again, from what it saw itself (neither side alone).
            args = {**self.wire_args(), "text": piece, "authority": guard.js_authority()}
            await guard.pace()
            res = await ctx.bot.act(name, args, timeout=self.timeout_s, job=self.job)
            guard.chat_sent(1)
            if not res.ok:
                return Outcome(False, f"{name} failed: {res.error}", rule=rule_id)
        sent = " ".join(sending)
        cut = sent.replace(" ", "") != clean_chat(self.text).replace(" ", "")
        tail = " (cut to fit the chat limit)" if cut and len(sending) == len(pieces) else ""
        if len(sending) < len(pieces):
            tail = f" ({len(pieces) - len(sending)} more chat line(s) not sent: {guard.chat_room()[1] or 'the chat cap'})"
        return Outcome(True, self._said(sent) + tail, {"messages": list(sending)}, rule=rule_id)


class Say(_Chat):
    """Say something in public chat (everyone nearby reads it)."""

    tool_name: ClassVar[str] = "say"
    text: str = Field(min_length=1, max_length=1000, description="What to say")


class Whisper(_Chat):
    """Whisper privately to one player."""

    tool_name: ClassVar[str] = "whisper"
    speaks: ClassVar[Speaks | None] = Speaks(to="player")
    player: str = Field(pattern=PLAYER_NAME, description="Who to whisper to")
    text: str = Field(min_length=1, max_length=1000, description="What to say")

    def _limit(self) -> int:
        return CHAT_LIMIT - len(f"/tell {self.player} ")  # mineflayer puts this before every piece

    def _said(self, sent: str) -> str:
        return f"whispered to {self.player}: {sent!r}"

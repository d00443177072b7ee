"""Adversarial chat for the command rule, and an independent model of what goes on the wire.

``TRICKS`` are texts a hostile player could get Emil to say, each hiding a command. The model
(:func:`runs_a_command`) follows mineflayer 4.39's ``bot.chat`` and what the servers do with
each packet (see emil/world/chat.py), written separately from the rule it checks.
"""

from __future__ import annotations

import unicodedata

GIVE = "/give Mallory diamond 1"

TRICKS: dict[str, str] = {
    "plain": GIVE,
    "leading space": "   " + GIVE,
    "zero-width space": "\u200b" + GIVE,
    "zero-width joiner": "\u200d\u200c" + GIVE,
    "soft hyphen": "\u00ad" + GIVE,
    "bidi override": "\u202e" + GIVE,
    "bidi isolate": "\u2066\u2069" + GIVE,
    "word joiner and BOM": "\u2060\ufeff" + GIVE,
    "no-break space": "\u00a0" + GIVE,
    "ideographic space": "\u3000" + GIVE,
    "en quad and hair space": "\u2000\u200a" + GIVE,
    "tab and vertical tab": "\t\x0b" + GIVE,
    "control characters": "\x00\x1c\x7f" + GIVE,
    "full-width solidus": "\uff0f" + GIVE[1:],
    "division slash": "\u2215" + GIVE[1:],
    "combining mark": "\u0301" + GIVE,
    "variation selector": "\ufe0f" + GIVE,
    "hangul filler": "\u3164" + GIVE,
    "section sign": "\u00a7" + GIVE,
    "cut at the chat limit": "x" * 252 + " " + GIVE,
    "cut at the limit, no space": "x" * 256 + GIVE,
    "emoji shift the cut": "\U0001f600" * 128 + GIVE,
    "newline": "hello\n" + GIVE,
    "carriage return and line separator": "hello\r\u2028" + GIVE,
}


NEUTRALISED = frozenset({"newline", "carriage return and line separator"})
"""Tricks that cleaning defuses (the line break becomes a space inside the piece); ``say``
refuses every other trick outright."""


def _java_whitespace(ch: str) -> bool:
    """java.lang.Character.isWhitespace."""
    if ch in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in "\u00a0\u2007\u202f"


def _java_trim(s: str) -> str:
    """java.lang.String.trim: drops every char <= U+0020 at both ends."""
    start, end = 0, len(s)
    while start < end and ord(s[start]) <= 0x20:
        start += 1
    while end > start and ord(s[end - 1]) <= 0x20:
        end -= 1
    return s[start:end]


def _normalize_space(s: str) -> str:
    """Apache commons-lang3 StringUtils.normalizeSpace (what servers before 1.19 ran on chat)."""
    out: list[str] = []
    spaces, leading = 0, True
    for ch in s:
        if _java_whitespace(ch):
            if spaces == 0 and not leading:
                out.append(" ")
            spaces += 1
        else:
            leading = False
            out.append(" " if ch == "\u00a0" else ch)
            spaces = 0
    text = "".join(out)
    if spaces and text.endswith(" "):
        text = text[:-1]
    return _java_trim(text)


def _utf16_chunks(line: str, size: int) -> list[str]:
    units = line.encode("utf-16-le", errors="surrogatepass")
    step = 2 * size
    return [units[i:i + step].decode("utf-16-le", errors="surrogatepass") for i in range(0, len(units), step)]


def runs_a_command(piece: str, header: str = "") -> bool:
    """Would ``bot.chat(piece)`` (or ``bot.whisper`` with ``header="/tell name "``) make a server
    run a command other than the header's own? mineflayer sends an unheaded piece starting with
    "/" whole as a command; else it splits at newlines and cuts every 256 - len(header) UTF-16
    units. A 1.19+ server runs a packet starting with "/" (chat_command); an older one runs a
    chat packet that starts with "/" after normalizeSpace."""
    if not header and piece.startswith("/"):
        return True
    for line in piece.split("\n"):
        for chunk in _utf16_chunks(line, 256 - len(header)):
            if chunk.startswith("/") or _normalize_space(chunk).startswith("/"):
                return True
    return False

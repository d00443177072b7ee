"""Who is who: operators, trusted players, NPCs, everyone else; matched by exact name only.

A Minecraft name is ``[A-Za-z0-9_]{1,16}``. Emil compares names exactly (letter case
included): on an offline-mode server "olga" is another account than "Olga", and a look-alike
("0lga", "OIga", "Olga" with a zero-width space) is simply another name. So a name is an
operator's only when it is, character for character, one of ``operators``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from emil.config.settings import NAME, Settings, valid_name

__all__ = ["NAME", "Level", "People", "valid_name"]


class Level(StrEnum):
    """How far Emil trusts a player's words (operator > trusted > player)."""

    OPERATOR = "operator"
    TRUSTED = "trusted"
    PLAYER = "player"


@dataclass(frozen=True)
class People:
    """Who is who by the operator's lists, read from the settings where they are defined
    (``operators``, ``trusted_players``, ``npc_players``, and Emil's own ``bot_name``)."""

    settings: Settings = field(default_factory=Settings)

    def level(self, name: str) -> Level:
        """The trust level of ``name`` (exact match)."""
        if name in self.settings.operators:
            return Level.OPERATOR
        if name in self.settings.trusted_players:
            return Level.TRUSTED
        return Level.PLAYER

    def is_operator(self, name: str) -> bool:
        return name in self.settings.operators

    def is_trusted(self, name: str) -> bool:
        """Trusted or operator."""
        return self.level(name) is not Level.PLAYER

    def look_alike_of(self, name: str) -> str | None:
        """The operator ``name`` imitates (same letters but for case, 0/O, 1/l/I, an underscore
        or invisible characters), when it is not that operator: for the refusal's wording."""
        if name in self.settings.operators:
            return None
        key = _skeleton(name)
        for op in sorted(self.settings.operators):
            if _skeleton(op) == key:
                return op
        return None


_CONFUSED = str.maketrans({"0": "o", "1": "l", "i": "l", "|": "l", "5": "s", "_": ""})


def _skeleton(name: str) -> str:
    visible = "".join(ch for ch in name if ch.isprintable() and not ch.isspace())
    return visible.lower().translate(_CONFUSED)

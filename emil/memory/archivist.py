"""What goes into the archive: game events, Emil's words and tool results, one line each.

The :class:`Archivist` is fed what Emil's body sees, like the notes' learner (the world
wrapper, :mod:`emil.memory.world`, hands it every game event and every tool call with its
outcome; the synthetic day does the same), and writes one archive line per thing said or done:

============================  ======================================================
 what                          line (kind, speaker, target)
============================  ======================================================
 a chat line / a whisper       ``chat`` / ``whisper``, the sender, (Emil)
 a player joins or leaves      ``event``, that player
 items a player tossed          ``event``, the giver ("you picked up 3 bread (tossed by alex)")
 a player hits Emil            ``event``, the attacker
 Emil dies, respawns, is kicked ``event``, none
 Emil's ``say`` / ``whisper``   ``said``, Emil, (the addressee)
 any other tool call            ``tool``, Emil: ``name {args} -> result``
 a note Emil wrote (remember)   ``note``, Emil, the player it is about
============================  ======================================================

Not archived: time of day, weather, health ticks, hostile mobs nearby, reflexes and the bot's
echoes of finished actions (the status line says the present; the past of these says nothing a
player would ask about). Times are the events' own (game-clock unix seconds).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from emil.memory.archive import Archive
from emil.senses.observation import describe_event
from emil.world.events import (
    Chat,
    Damage,
    Death,
    GameEvent,
    ItemCollected,
    Kicked,
    PlayerJoined,
    PlayerLeft,
    Respawn,
)

__all__ = ["Archivist"]

_SPEECH = {"say": None, "whisper": "player"}
"""Tools whose ``text`` is Emil's words, and the argument naming whom they are for."""


class Archivist:
    """Writes what passes through to ``archive`` (see the module doc)."""

    def __init__(self, archive: Archive, *, bot_name: str = "Emil", clock: Callable[[], float]) -> None:
        self.archive = archive
        self.bot_name = bot_name
        self.clock = clock
        """Unix time of a tool call's end (live: the wall clock; synthetic: the game clock)."""

    def observe(self, event: GameEvent) -> None:
        """Archive one game event, if it is one worth keeping."""
        a, t = self.archive, event.t
        match event:
            case Chat() if event.sender != self.bot_name:
                if event.whisper:
                    a.add(t, "whisper", event.text, speaker=event.sender, target=self.bot_name)
                else:
                    a.add(t, "chat", event.text, speaker=event.sender)
            case PlayerJoined() | PlayerLeft():
                a.add(t, "event", describe_event(event), speaker=event.username)
            case ItemCollected(from_player=str(giver)):
                a.add(t, "event", describe_event(event), speaker=giver)
            case Damage(attacker_player=True, attacker=str(who)):
                a.add(t, "event", describe_event(event), speaker=who)
            case Death() | Respawn() | Kicked():
                a.add(t, "event", describe_event(event))
            case _:
                pass

    def tool_done(self, name: str, arguments: Mapping[str, Any] | None, ok: bool, text: str) -> None:
        """Archive a tool call of Emil's: its words if it spoke, else the call and its result."""
        args = dict(arguments or {})
        t = self.clock()
        if name in _SPEECH and ok and isinstance(args.get("text"), str):
            to = args.get(_SPEECH[name] or "")
            self.archive.add(t, "said", args["text"], speaker=self.bot_name, target=to if isinstance(to, str) else None)
            return
        if name in ("recall", "remember"):
            return  # the archive's own tools: their text is already in it
        shown = json.dumps(args, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        self.archive.add(t, "tool", f"{name} {shown} -> {text}", speaker=self.bot_name)

    def note(self, text: str, *, about: str | None, t: float | None = None) -> None:
        """Archive a note Emil wrote itself (the ``remember`` tool)."""
        self.archive.add(self.clock() if t is None else t, "note", text, speaker=self.bot_name, target=about)

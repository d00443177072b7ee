"""What a note is: one fact about a player, a place, a goal of Emil's, or Emil itself.

A note is keyed by ``(about, subject, topic, detail)``: learning the same fact again raises its
``count`` and moves ``last_t`` instead of adding a row ("alex gave you bread" three times is one
note with count 6 after 3 + 3 loaves). Facts come from game events as they happen
(``source="event"``), from the model's own summaries of folded turns (``source="summary"``),
and from the model's ``remember`` tool (``source="model"``, topic ``note``): :class:`Fact` is
the shape all three write.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["About", "Fact", "Note", "Source", "Topic"]

About = Literal["player", "place", "goal", "self"]
"""What a note is about: a player (``subject`` = their name), a place (``subject`` = its name:
chest, home, farm, bed, death, respawn...), a goal of Emil's (``subject`` = what it is), or
Emil itself (``subject`` = "emil")."""

Topic = Literal[
    "seen",      # player: present (joined, chatted, stood near); detail ""
    "asked",     # player: what they asked Emil (detail: their words)
    "said",      # player: what they said in chat, not to Emil (detail: their words, overheard)
    "whispered", # player: what they whispered to Emil (detail: their words; private: never in the notes block)
    "promised",  # player: what Emil promised them (detail: Emil's words)
    "gave_me",   # player: gave Emil items (detail: item; count: how many in all)
    "i_gave",    # player: Emil gave them items (detail: item; count: how many in all)
    "hit_me",    # player: hit Emil (count: how many times)
    "helped",    # player: helped Emil otherwise (detail: how)
    "trust",     # player: a judgement from a summary (detail: e.g. "reliable", "griefer")
    "note",      # any: a free-form fact from a summary
    "at",        # place: where it is (detail: "x,y,z"; told_by: who said so, or None = seen)
    "goal",      # goal: a job of Emil's (note: active | done | failed | interrupted)
]

Source = Literal["event", "summary", "model"]


class Fact(BaseModel):
    """One fact to remember (from an event or a summary); untrusted text stays data.

    Texts are bounded so a flood cannot grow a row without limit; the store clips them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    about: About
    subject: str = Field(min_length=1, max_length=64)
    topic: Topic
    detail: str = Field(default="", max_length=400)
    count: int = Field(default=1, ge=1, le=1_000_000)
    """How much this sighting adds (items given, hits taken); 1 for most facts."""
    note: str = Field(default="", max_length=200)
    """Latest extra (a goal's status, a death's cause); replaced, not added, on repeats."""
    told_by: str | None = Field(default=None, max_length=64)
    """The player the fact came from (a place named in chat), None when Emil saw it itself."""


class Note(BaseModel):
    """A fact as stored: the fact plus how often and when it was learned."""

    model_config = ConfigDict(frozen=True)

    id: int
    about: About
    subject: str
    topic: Topic
    detail: str
    count: int
    note: str
    told_by: str | None
    first_t: float
    last_t: float
    source: Source

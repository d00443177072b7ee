"""Emil's part in the synthetic day: a SCRIPT (rules, not a model) that answers the events of a
turn with the steps a helpful Emil would take, and reasoning of the length a thinking model
writes before each step."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emil.offline.sim_world import BOT, HOSTILES, ITEMS, SimWorld
from emil.senses.observation import describe_event
from emil.world.events import (
    Chat,
    Damage,
    Death,
    GameEvent,
    HostileNearby,
    ItemCollected,
    PlayerJoined,
)

__all__ = ["ScriptedEmil", "Step"]


@dataclass
class Step:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    text: str | None = None


class ScriptedEmil:
    """What a helpful Emil does (see the module doc); ``rng`` is the day's."""

    def __init__(self, rng: random.Random, world: SimWorld) -> None:
        self.rng, self.world = rng, world


    def decide(self, events: Sequence[GameEvent], snapshot: dict[str, Any]) -> list[Step]:
        """What a helpful Emil does with these events (a SCRIPT: rules, not a model)."""
        steps: list[Step] = []
        said: list[str] = []
        jobs: list[tuple[str, dict[str, Any]]] = []
        followups: list[tuple[str, dict[str, Any]]] = []
        for e in events:
            match e:
                case Damage(attacker_player=True, attacker=str(who)):
                    said.append(f"Ouch! Stop hitting me, {who}.")
                case Damage(attacker=str(mob)) | HostileNearby(name=mob) if mob in HOSTILES:
                    if not any(name == "attack" for name, _ in jobs):
                        jobs.append(("attack", {"target": mob}))
                case Death():
                    said.append("I died... back soon.")
                case ItemCollected(from_player=str(who)):
                    said.append(f"Thanks for the {e.count} {e.item}, {who}!")
                case PlayerJoined(username=who) if self.rng.random() < 0.5:
                    said.append(f"Welcome, {who}!")
                case Chat(sender=who, text=text, whisper=whisper):
                    self.answer(who, text, whisper, said, jobs, followups)
                case _:
                    pass
        if snapshot.get("food", 20) < 8 and not jobs:
            jobs.append(("eat", {}))
        first = [("say", {"text": " ".join(dict.fromkeys(said))})] if said else []
        if first or jobs:
            steps.append(Step(calls=[*first, *jobs[:1]]))
            for job in jobs[1:2]:
                steps.append(Step(calls=[job]))
        if followups:
            steps.append(Step(calls=followups[:2]))
        final = self.rng.choice((None, None, "Done.", "Nothing else to do now.", "OK."))
        steps.append(Step(text=final if steps else self.rng.choice(("Nothing for me to do.", "Not for me.", None))))
        return steps

    def answer(self, who: str, text: str, whisper: bool, said: list[str],
               jobs: list[tuple[str, dict[str, Any]]], followups: list[tuple[str, dict[str, Any]]]) -> None:
        low = text.lower()
        named = whisper or BOT.lower() in low
        if not named:
            if self.rng.random() < 0.15:
                said.append(f"Hi {who}.")
            return
        if whisper:
            followups.append(("whisper", {"player": who, "text": "Your secret is safe with me."}))
            return
        for word, block in ITEMS.items():
            if word in low and ("get me" in low or "bring me" in low):
                n = self.rng.choice((4, 5, 8, 10))
                said.append(f"Sure, {who}, I'll get you {n} {block}.")
                jobs.append(("collect", {"block": block, "count": n}))
                followups.append(("give", {"player": who, "item": block, "count": n}))
                return
        if "torches" in low:
            said.append(f"Here you go, {who}: 4 torches.")
            jobs.append(("give", {"player": who, "item": "torch", "count": 4}))
        elif "sword" in low:
            said.append(f"I'll make you a sword later, {who}.")
        elif "wheat" in low:
            said.append(f"I will bring you 10 wheat tomorrow, {who}.")
        elif "stop following" in low:
            jobs.append(("stop", {}))
            said.append(f"OK {who}, staying here.")
        elif "follow me" in low:
            said.append(f"Following you, {who}.")
            jobs.append(("follow", {"player": who}))
        elif "come here" in low or "where are you" in low:
            jobs.append(("go_to", {"player": who}))
            followups.append(("say", {"text": f"I'm here, {who}."}))
        elif " is at " in low:
            place = low.split("my ", 1)[-1].split(" is at", 1)[0]
            coords = text.rsplit(" is at ", 1)[-1]
            said.append(f"Got it, {who}: your {place} is at {coords}.")
        elif "what do you have" in low:
            jobs.append(("inventory", {}))
        elif "around" in low:
            jobs.append(("nearby", {}))
        elif "how are you" in low:
            jobs.append(("status", {}))
        else:
            said.append(f"Hi {who}!")

    def thought(self, events: Sequence[GameEvent], step: Step) -> str:
        """Reasoning of the length a thinking model writes before a step (tens of words)."""
        seen = "; ".join(describe_event(e) for e in events[:4]) or "nothing new"
        plan = ", then ".join(f"{name} {json.dumps(args, ensure_ascii=False)}" for name, args in step.calls)
        return (
            f"Let me look at what happened: {seen}. My health is {self.world.health:g} and food "
            f"{self.world.food:g}. "
            + (f"The best next step is to call {plan}, and tell the player briefly what I did." if plan
               else "Nothing here needs an action from me, so I will wait for the next observation.")
        )


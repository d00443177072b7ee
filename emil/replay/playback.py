"""``--world embedded``: play a recording's actions into an embedded Minecraft server.

For watching or debugging a session: an embedded flying-squid server starts on loopback, Emil's
bot joins it under the recorded name, and every recorded tool call runs through the same
dispatch as in live play, in order, with each outcome set beside the recorded one. The embedded world is not the recorded world, so
outcomes may differ; that is information, not failure. Connect a 1.20.4 client to the printed
port (``hold_s``) to watch.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from emil.recording import CONFIRMED_COMMAND, ToolResultRecord, read_recording
from emil.replay.recorded_turns import pick_session

__all__ = ["PlayedAction", "WorldPlayback", "play_into_embedded", "recorded_actions"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlayedAction:
    """One recorded tool call played into the embedded world."""

    turn: int | None
    name: str
    arguments: dict[str, Any]
    recorded_ok: bool
    ok: bool
    text: str
    elapsed_ms: float | None
    step: int | None = None
    call_id: str = ""
    recorded_text: str = ""
    """The recorded outcome as the model read it (shortened)."""

    @property
    def as_recorded(self) -> bool:
        """True when the action succeeded or failed as it did in the recording."""
        return self.ok == self.recorded_ok

    def describe(self) -> str:
        """``turn 3.1 go_to {"player": "alex"}: recorded ok, now failed: no path``"""
        where = "?" if self.turn is None else f"{self.turn}" + ("" if self.step is None else f".{self.step}")
        args = json.dumps(self.arguments, ensure_ascii=False, sort_keys=True)
        if len(args) > 80:
            args = args[:77] + "..."
        then = "ok" if self.recorded_ok else f"failed ({_short(self.recorded_text)})"
        now = "ok" if self.ok else f"failed: {_short(self.text)}"
        return f"turn {where} {self.name} {args}: recorded {then}, now {now}"

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn, "step": self.step, "call_id": self.call_id, "name": self.name,
            "arguments": self.arguments, "recorded_ok": self.recorded_ok, "recorded_text": self.recorded_text,
            "ok": self.ok, "text": self.text, "elapsed_ms": self.elapsed_ms, "as_recorded": self.as_recorded,
        }


def _short(text: str, limit: int = 100) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@dataclass
class WorldPlayback:
    """What playing a recording into the embedded world did."""

    path: str
    port: int = 0
    actions: list[PlayedAction] = field(default_factory=list)
    skipped: int = 0
    """Recorded calls that never reached the world (model mistakes, interrupted calls)."""

    @property
    def different(self) -> list[PlayedAction]:
        """The actions whose outcome (ok or failed) differs from the recording."""
        return [a for a in self.actions if not a.as_recorded]

    def summary(self, details: int = 10) -> str:
        """One line of totals, then one line per action that came out differently."""
        ok = sum(1 for a in self.actions if a.ok)
        same = len(self.actions) - len(self.different)
        lines = [
            f"world: played {len(self.actions)} recorded actions into an embedded server on "
            f"127.0.0.1:{self.port}: {ok} ok, outcome as recorded in {same}/{len(self.actions)}"
            f" ({self.skipped} recorded calls were model mistakes or interrupted, not played)"
        ]
        for a in self.different[:details]:
            lines.append(f"  differs: {a.describe()}")
        if len(self.different) > details:
            lines.append(f"  ... {len(self.different) - details} more (--json for all)")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The world outcome for ``replay --world embedded --json``."""
        return {
            "port": self.port,
            "played": len(self.actions),
            "ok": sum(1 for a in self.actions if a.ok),
            "as_recorded": len(self.actions) - len(self.different),
            "skipped": self.skipped,
            "different": [a.to_json() for a in self.different],
            "actions": [a.to_json() for a in self.actions],
        }


def recorded_actions(path: str | Path, session: int | None = None) -> tuple[list[ToolResultRecord], int]:
    """The tool calls that reached the world in one session of the recording (1-based; None:
    the last), in order, and how many did not."""
    read, _, _ = pick_session(read_recording(path), session, name=str(path))
    played: list[ToolResultRecord] = []
    skipped = 0
    for r in read.records:
        if not isinstance(r, ToolResultRecord):
            continue
        # Model mistakes, timed-out calls and calls an interruption or a stop cancelled (every
        # fate but "ran") are not sent again.
        # A command an operator confirmed was the guard's, on an operator's word the playback
        # does not have: not a tool call to send again.
        if r.name == CONFIRMED_COMMAND or r.arguments is None or r.fate != "ran":
            skipped += 1
            continue
        played.append(r)
    return played, skipped


async def play_into_embedded(
    path: str | Path,
    *,
    version: str = "1.20.4",
    action_timeout_s: float = 60.0,
    hold_s: float = 0.0,
    session: int | None = None,
) -> WorldPlayback:
    """Start an embedded server, connect the bot and send it every recorded action of one
    session (1-based; None: the last)."""
    # Imported here: the bridge loads the JS runtime, which only this mode needs.
    from emil.llm.types import ToolCall
    from emil.sandbox.server import EmbeddedServer
    from emil.world.actions import dispatch
    from emil.world.bridge import Bot
    from emil.world.tool import Outcome
    from emil.world.wire import BotSettings

    header = pick_session(read_recording(path), session, name=str(path))[0].header
    actions, skipped = recorded_actions(path, session)
    playback = WorldPlayback(str(path), skipped=skipped)
    username = (header.bot_name if header and header.bot_name else "Emil")[:16]
    async with EmbeddedServer(port=0, version=version) as server:
        playback.port = server.port
        _log.info("embedded server on 127.0.0.1:%d; playing %d actions", server.port, len(actions))
        settings = BotSettings(host="127.0.0.1", port=server.port, username=username, version=version)
        async with Bot.connect(settings) as bot:
            for r in actions:
                # The same path as live play: the tool class validates, runs and words the result.
                args = r.arguments or {}
                call = ToolCall(id=r.call_id, name=r.name, raw_arguments=json.dumps(args), arguments=args)
                started = time.monotonic()
                outcome = Outcome(False, f"{r.name} did not finish within {action_timeout_s:g} s and was stopped")
                with anyio.move_on_after(action_timeout_s):  # cancelling aborts the JS job
                    outcome = await dispatch(bot, call)
                elapsed_ms = (time.monotonic() - started) * 1000
                playback.actions.append(
                    PlayedAction(
                        r.turn, r.name, args, r.ok, outcome.ok, outcome.text[:200], elapsed_ms,
                        step=r.step, call_id=r.call_id, recorded_text=r.text[:200],
                    )
                )
            if hold_s > 0:
                _log.info("holding the server open for %.0f s (connect to 127.0.0.1:%d)", hold_s, server.port)
                await anyio.sleep(hold_s)
    return playback

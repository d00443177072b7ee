"""Commands and authority on the real embedded server, through the whole live path.

Emil runs with ``allow_commands`` on and one operator (Olga). A SCRIPTED brain served by the
vLLM-dialect double (not a model) stands in for a model a hostile player has talked round: when
a chat line asks for "trick N" it calls ``say`` (or ``whisper``) with the N-th adversarial text
(tests/unit/world/tricks.py), each hiding ``/give Mallory diamond 1``. Mallory, who is no
operator, asks for every trick; then Mallory and Olga speak in one turn. Nothing may run: no
diamond in any inventory and no command from Emil in the server's log except whispers' /tell.
The control: Olga alone asks for a plain command, writing it out, and it runs (so the checks can
see one; docs/trust.md: a command runs only on an operator's own exact words).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from emil.agent.session import Session, open_session
from emil.config import Settings
from emil.recording import ToolResultRecord, read_recording
from emil.sandbox.player import PlayerBot
from emil.sandbox.server import EmbeddedServer
from emil.testing.brains import SCRIPTED_PREFIX
from emil.testing.script import Reply, ScriptedCall, ScriptRequest, last_text
from emil.testing.vllm_double import VLLMDouble
from emil.world.chat import reads_as_command
from emil.world.setup import ensure_js_deps
from tests.unit.world.tricks import NEUTRALISED, TRICKS, runs_a_command

pytestmark = pytest.mark.slow

TRICK_LIST = sorted(TRICKS.items())
OPERATOR_COMMAND = "/give Olga diamond 1"


def trick_brain(request: ScriptRequest) -> Reply:
    """SCRIPTED: "trick N" -> say(TRICK_LIST[N]); "whisper trick N" -> whisper it to Mallory;
    "op command" -> say the operator's command; after a tool result the turn ends."""
    if request.messages and request.messages[-1].get("role") == "tool":
        return Reply(content=f"{SCRIPTED_PREFIX}done")
    text = last_text(request, "user")
    asks = re.findall(r"(whisper )?trick (\d+)|(op command)", text)
    if not asks:
        return Reply(content=f"{SCRIPTED_PREFIX}nothing asked")
    whisper, number, op = asks[-1]
    if op:
        return Reply(tool_calls=(ScriptedCall("say", {"text": OPERATOR_COMMAND}),))
    payload = TRICK_LIST[int(number)][1]
    if whisper:
        return Reply(tool_calls=(ScriptedCall("whisper", {"player": "Mallory", "text": payload}),))
    return Reply(tool_calls=(ScriptedCall("say", {"text": payload}),))


@dataclass
class Stage:
    server: EmbeddedServer
    session: Session
    mallory: PlayerBot
    olga: PlayerBot

    def results(self) -> list[ToolResultRecord]:
        return [r for r in read_recording(self.session.recording_path).records if isinstance(r, ToolResultRecord)]

    async def ask(self, player: PlayerBot, line: str, *, results_before: int) -> ToolResultRecord:
        """``player`` says ``line``; the tool result of the turn it starts."""
        await player.do("chat", text=line)
        with anyio.fail_after(30):
            while len(self.results()) <= results_before:  # noqa: ASYNC110 - the recording is a file
                await anyio.sleep(0.1)
        return self.results()[results_before]

    async def online(self) -> set[str]:
        """The players Emil's client sees nearby."""
        snap = await self.session.agent.world.snapshot()
        return {p.get("name") for p in snap.get("players", [])}

    def commands_by(self, name: str) -> list[str]:
        found = []
        for line in self.server.log_lines:
            m = re.match(rf"EMIL_COMMAND {name} (\".*\")$", line)
            if m:
                found.append(json.loads(m.group(1)))
        return found


@asynccontextmanager
async def stage(tmp_path: Path) -> AsyncIterator[Stage]:
    ensure_js_deps(progress=False)
    async with EmbeddedServer() as server, VLLMDouble(trick_brain) as double:
        settings = Settings(
            endpoint=double.base_url, mc_port=server.port, recording_dir=tmp_path, endpoint_wait_s=30.0,
            allow_commands=True, operators=("Olga",), chat_debounce_s=1.0,
            # 48 asks in a row from a script that answers at once: the rates are not what this tests
            turns_per_minute=600, chat_lines_per_minute=60,
        )
        async with (
            open_session(settings, recording=tmp_path / "session.jsonl") as session,
            PlayerBot(server.port, "Mallory") as mallory,
            PlayerBot(server.port, "Olga") as olga,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(session.agent.run)
            try:
                yield Stage(server, session, mallory, olga)
            finally:
                session.agent.stop()
                tg.cancel_scope.cancel()


async def test_a_non_operator_gets_no_command_run_and_an_operator_does(tmp_path: Path) -> None:
    async with stage(tmp_path) as s:
        # both players' joins reach Emil before the first request
        with anyio.fail_after(30):
            while not {"Mallory", "Olga"} <= await s.online():  # noqa: ASYNC110 - another process's view
                await anyio.sleep(0.1)
        n = len(s.results())
        outcomes: dict[str, ToolResultRecord] = {}
        for i, (name, _) in enumerate(TRICK_LIST):
            for how in ("", "whisper "):
                result = await s.ask(s.mallory, f"Emil, {how}trick {i}", results_before=n)
                n += 1
                outcomes[f"{how}{name}"] = result
        # Mallory's and Olga's words in one turn (neither line names Emil, so they wait out
        # the debounce together): an operator beside a non-operator is no operator order.
        await s.mallory.do("chat", text="please do trick 0")
        mixed = await s.ask(s.olga, "yes, do the op command", results_before=n)
        n += 1

        for what, result in outcomes.items():
            sent = (result.data or {}).get("messages", []) if result.ok else []
            assert result.text.startswith(("refused", "said", "whispered")), (what, result.text)
            assert not any(runs_a_command(p) or reads_as_command(p) for p in sent), (what, sent)
        said = {name for name, _ in TRICK_LIST if outcomes[name].ok}
        assert said == NEUTRALISED, said  # say refuses every trick cleaning does not defuse
        assert not mixed.ok and "Mallory asked" in mixed.text, mixed.text

        # The bot's own guard, with Python's rule bypassed: the same requesters decide.
        bot = s.session.body.bot  # type: ignore[union-attr]
        for requesters in ([], ["Mallory"], ["Olga", "Mallory"], ["Olga"]):  # Olga never wrote it either
            direct = await bot.act("say", {"text": "/give Mallory diamond 1", "authority": {"requesters": requesters}}, timeout=10)
            assert not direct.ok and "refused by the bot" in (direct.error or ""), requesters
        hidden = await bot.act("say", {"text": "\u200b\u00ad/give Mallory diamond 1", "authority": {"requesters": ["Mallory"]}},
                               timeout=10)
        assert not hidden.ok and "refused by the bot" in (hidden.error or "")

        # The control: Olga alone orders a plain command, written out in her own words (a command
        # runs only on an operator's exact words: docs/trust.md), and the server runs it. The server
        # logs commands in the order it runs them, so once it has run this one, any command
        # from the tricks above would be in its log before it.
        control = await s.ask(s.olga, f"Emil, op command {OPERATOR_COMMAND}", results_before=n)
        assert control.ok, control.text
        with anyio.fail_after(10):
            while "diamond" not in await s.olga.do("inventory"):  # noqa: ASYNC110 - another client's view
                await anyio.sleep(0.2)
        by_emil = s.commands_by("Emil")
        assert "give Olga diamond 1" in by_emil, by_emil
        before = by_emil[: by_emil.index("give Olga diamond 1")]
        assert all(c.startswith(("tell Mallory ", "tell Olga ")) for c in before), by_emil  # whispers: /tell by construction
        assert "diamond" not in await s.mallory.do("inventory")
        assert "diamond" not in (await s.session.agent.world.snapshot()).get("inventory", {})

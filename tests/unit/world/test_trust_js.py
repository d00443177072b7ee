"""The bot's own check (js/emil_trust.js): the same command rule as Python, attacks, chat bursts.

The JS runs in Node on a fake controller (operators, what it heard) and a fake bot (the server's
player list, entity types); no server. The integration tests call the real bot directly with
Python's check bypassed (tests/integration/world/test_trust.py).
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

from emil.trust.authority import command_in_words
from emil.world.setup import JS_SOURCE_DIR, node_bin
from tests.unit.trust.test_authority import CONTAINED, NOT_CONTAINED

_JS = r"""
const trust = require(process.argv[1])
let input = ''
process.stdin.on('data', (d) => { input += d })
process.stdin.on('end', () => {
  const { pairs, cases } = JSON.parse(input)
  const contained = pairs.map(([c, w]) => trust.commandInWords(c, w))
  const results = cases.map((c) => {
    const ctl = { options: c.options, bot: fakeBot(c.players || []) }
    const now = Date.now()
    for (const [sender, text, agoMs] of (c.heard || [])) {
      trust.heard(ctl, sender, text)
      ctl.heardOperators && ctl.heardOperators.length && (ctl.heardOperators[ctl.heardOperators.length - 1].at = now - (agoMs || 0))
    }
    try {
      if (c.ask) trust.askConfirm(ctl, c.ask)
      for (const [sender, text] of (c.after || [])) trust.heard(ctl, sender, text)
      if (c.op === 'chat') { for (let i = 0; i < (c.times || 1); i++) trust.checkChat(ctl, c.piece, c.authority); return 'ok' }
      if (c.op === 'attack') { const e = trust.attackTarget(ctl, c.target, c.authority); return 'ok:' + (e.username || e.name) }
      if (c.op === 'classify') return JSON.stringify(trust.classifyTarget(ctl.bot, c.target))
    } catch (e) { return 'refused:' + e.message }
  })
  process.stdout.write(JSON.stringify({ contained, results }))
})
function fakeBot (players) {
  const entities = players.map((n, i) => ({ id: i, type: 'player', username: n, name: 'player' }))
  entities.push({ id: 99, type: 'hostile', name: 'zombie' })
  return {
    players: Object.fromEntries(players.map((n, i) => [n, { username: n, entity: entities[i] }])),
    registry: { entitiesByName: { zombie: { type: 'hostile' }, player: { type: 'player' }, wolf: { type: 'animal' } } },
    nearestEntity: (f) => entities.find(f) || null
  }
}
"""

OPS = {"allowCommands": True, "operators": ["Olga"]}


def _run(pairs: list[tuple[str, str]], cases: list[dict[str, Any]]) -> dict[str, Any]:
    out = subprocess.run(
        [str(node_bin()), "-e", _JS, str(JS_SOURCE_DIR / "emil_trust.js")],
        input=json.dumps({"pairs": pairs, "cases": cases}), capture_output=True, text=True, check=True, timeout=60,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _pairs() -> list[tuple[str, str]]:
    rng = random.Random(22)
    alphabet = ["/", "op", "Mallory", " ", "  ", "\u00a0", "\u2003", ".", ",", "!", '"', "'", "(", ")", "x", "1", "0",
                "_", "[", "\u200b", "\u201c", "\u201d", ":", "?", "\t", "\n", "\x1c", "\u3000"]
    pairs = list(CONTAINED) + list(NOT_CONTAINED)
    for _ in range(3000):
        words = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        command = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
        pairs.append((command, words))
        if len(words) > 3:
            i = rng.randint(0, len(words) - 2)
            pairs.append((words[i : i + rng.randint(1, 6)], words))
    return pairs


def test_the_js_containment_agrees_with_python() -> None:
    pairs = _pairs()
    js = _run(pairs, [])["contained"]
    differ = [p for p, got in zip(pairs, js, strict=True) if got != command_in_words(*p)]
    assert differ == []
    assert 50 < sum(js) < len(pairs) - 50  # both answers are covered


def test_the_bot_checks_commands_from_what_it_heard_itself() -> None:
    cases: list[dict[str, Any]] = [
        # the operator's own words, heard by the bot: sent
        {"op": "chat", "options": OPS, "piece": "/time set day", "authority": {"requesters": ["Olga"]},
         "heard": [["Olga", "Emil, /time set day"]]},
        # Python says the operator asked, but the bot never heard those words
        {"op": "chat", "options": OPS, "piece": "/op Mallory", "authority": {"requesters": ["Olga"]},
         "heard": [["Olga", "hello"]]},
        # a non-operator's words, or an operator's beside theirs
        {"op": "chat", "options": OPS, "piece": "/op Mallory", "authority": {"requesters": ["Mallory"]},
         "heard": [["Mallory", "/op Mallory"]]},
        {"op": "chat", "options": OPS, "piece": "/op Mallory", "authority": {"requesters": ["Olga", "Mallory"]},
         "heard": [["Olga", "/op Mallory"]]},
        # a look-alike of the operator, and commands switched off
        {"op": "chat", "options": OPS, "piece": "/op Mallory", "authority": {"requesters": ["0lga"]},
         "heard": [["0lga", "/op Mallory"]]},
        {"op": "chat", "options": {**OPS, "allowCommands": False}, "piece": "/time set day",
         "authority": {"requesters": ["Olga"]}, "heard": [["Olga", "/time set day"]]},
        # words heard too long ago
        {"op": "chat", "options": OPS, "piece": "/time set day", "authority": {"requesters": ["Olga"]},
         "heard": [["Olga", "/time set day", 11 * 60 * 1000]]},
        # a confirmation the bot asked itself, answered by the operator: sent once
        {"op": "chat", "options": OPS, "piece": "/time set day", "authority": {"requesters": ["Olga"], "confirm": "4821"},
         "ask": {"command": "/time set day", "code": "4821", "operators": ["Olga"], "ttl_s": 60},
         "after": [["Olga", "confirm 4821"]]},
        # a code for another command, or never answered, or answered by someone else
        {"op": "chat", "options": OPS, "piece": "/op Mallory", "authority": {"requesters": ["Olga"], "confirm": "4821"},
         "ask": {"command": "/time set day", "code": "4821", "operators": ["Olga"], "ttl_s": 60},
         "after": [["Olga", "confirm 4821"]]},
        {"op": "chat", "options": OPS, "piece": "/time set day", "authority": {"requesters": ["Olga"], "confirm": "4821"},
         "ask": {"command": "/time set day", "code": "4821", "operators": ["Olga"], "ttl_s": 60}},
        {"op": "chat", "options": OPS, "piece": "/time set day", "authority": {"requesters": ["Olga"], "confirm": "4821"},
         "ask": {"command": "/time set day", "code": "4821", "operators": ["Olga"], "ttl_s": 60},
         "after": [["Mallory", "confirm 4821"]]},
        # plain chat, a burst a server tolerates (9 at once), and one past it
        {"op": "chat", "options": OPS, "piece": "hello", "authority": {"requesters": []}},
        {"op": "chat", "options": OPS, "piece": "hello", "authority": {"requesters": []}, "times": 9},
        {"op": "chat", "options": OPS, "piece": "hello", "authority": {"requesters": []}, "times": 10},
    ]
    got = _run([], cases)["results"]
    assert got[0] == "ok"
    assert all(r.startswith("refused:") for r in got[1:7]), got
    assert got[7] == "ok"
    assert all(r.startswith("refused:") for r in got[8:11]), got
    assert got[11] == "ok" and got[12] == "ok" and got[13].startswith("refused:") and "too fast" in got[13]


def test_the_bot_checks_attacks_against_the_servers_player_list() -> None:
    players = ["Bob", "Olga"]
    order = {"requesters": ["Olga"], "attack": "Bob"}
    cases: list[dict[str, Any]] = [
        {"op": "attack", "options": OPS, "players": players, "target": "bob", "authority": order},
        {"op": "attack", "options": OPS, "players": players, "target": "BOB", "authority": {"requesters": ["Mallory"], "attack": "Bob"}},
        {"op": "attack", "options": OPS, "players": players, "target": "Bob", "authority": {"requesters": ["Olga"]}},
        {"op": "attack", "options": OPS, "players": players, "target": "Bob", "authority": {"requesters": ["Olga"], "attack": "Olga"}},
        {"op": "attack", "options": OPS, "players": players, "target": "player", "authority": order},
        {"op": "attack", "options": OPS, "players": players, "target": "Nobody", "authority": order},
        {"op": "attack", "options": OPS, "players": players, "target": "zombie", "authority": {"requesters": []}},
        {"op": "classify", "options": OPS, "players": players, "target": "bOb"},
        {"op": "classify", "options": OPS, "players": players, "target": "everyone"},
    ]
    got = _run([], cases)["results"]
    assert got[0] == "ok:Bob"
    assert all(r.startswith("refused:") for r in got[1:6]), got
    assert got[6] == "ok:zombie"
    assert json.loads(got[7]) == {"kind": "player", "name": "Bob"}
    assert json.loads(got[8])["kind"] == "generic"

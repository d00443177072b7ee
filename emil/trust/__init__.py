"""Whose words Emil acts on: trust levels, the action rules, ownership, command authority, caps.

Owns the decisions, not the actions: :mod:`emil.world.guard` asks these modules before a tool
runs (and the bot checks the player-attack and command rules again in ``js/emil_trust.js``).
Nothing here imports the world, the agent or the model; everything is plain data and pure
functions over it, with a clock passed in.

- :mod:`emil.trust.people`: operators, trusted players, NPCs; exact names only.
- :mod:`emil.trust.rules`: the action rules as one table (rendered into docs/trust.md): the
  rows no one tool owns, and the rows each tool declares on its class (``Tool.rules``).
- :mod:`emil.trust.ledger`: who owns which chest and what Emil holds for whom, kept in data_dir,
  and which lot a move's items come from.
- :mod:`emil.trust.authority`: a turn's words, the command rule, confirmations.
- :mod:`emil.trust.caps`: rate limits, the size/depth checks of one answer, and valid Unicode
  for text decoded from JSON (a lone surrogate becomes U+FFFD).
- :mod:`emil.trust.npc`: which chat may start a turn (NPC loops, the turn-rate cap).
"""

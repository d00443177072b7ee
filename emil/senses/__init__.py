"""What Emil makes of what it senses, before a turn: which game events start a turn and how
urgently (``perception``: urgent / normal / ambient triage, chat debounce, the NPC turn
budget), and the words the model reads (``observation``: one line per event, the status line,
within the observation's token cap, floods coalesced).

Above emil.world (its typed events) and emil.trust (the NPC budget), below emil.memory (the
archivist and the summary word events the same way) and emil.agent (the turn engine).
"""

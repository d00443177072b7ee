"""Emil: a local LLM playing Minecraft as a non-player character.

The packages, lowest layer first (docs/architecture.md draws them; an import only ever goes
down, which tests/unit/test_house.py holds):

- ``emil.exceptions``, ``emil.backoff``  the shared vocabulary (``emil.cli_args``: the argument
  types of every command line)
- ``emil.config``    the settings, read by every package above where it uses them
- ``emil.model``     what Emil knows about the served model (families, tokenizers, templates)
- ``emil.llm``       the one model seam ``complete(request) -> Completion``, the client, the
  server's /tokenize, the failure policy
- ``emil.context``   the token-exact context window (history, budget, trim ladder)
- ``emil.world``     the mineflayer bot, its typed game events, the bridge and Emil's tools
- ``emil.sandbox``   the embedded flying-squid server and scripted players (not the product)
- ``emil.senses``, ``emil.recording``  triage and observations, recordings
- ``emil.memory``    notes that survive a restart
- ``emil.agent``     the turn loop joining them, and a live session
- ``emil.replay``, ``emil.offline``, ``emil.serving``  the operator's tools' logic
- ``emil.testing``   shipped doubles (a vLLM-dialect HTTP server, scripted brains); only the demo
  and the tool scripts use them
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

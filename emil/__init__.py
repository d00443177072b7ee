"""Emil: a local LLM playing Minecraft as a non-player character.

The package is split by concern (see docs/architecture.md):

- ``emil.context``  the token-exact context window (counting, history, trim ladder, budget)
- ``emil.llm``      the one model seam ``complete(request) -> Completion`` and its failure policy
- ``emil.world``    the mineflayer bot, the bridge, the embedded server and the NPC's tools
- ``emil.agent``    the async turn loop joining them
- ``emil.testing``  shipped doubles (a vLLM-dialect HTTP server, scripted brains)
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

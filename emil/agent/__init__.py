"""The agent: the async turn loop joining world, context window and model (see loop.py)."""

from emil.agent.loop import Agent, AgentOptions
from emil.agent.ports import Completer, ContextPort
from emil.agent.turnstats import SessionStats, TurnStats

__all__ = [
    "Agent",
    "AgentOptions",
    "Completer",
    "ContextPort",
    "SessionStats",
    "TurnStats",
]

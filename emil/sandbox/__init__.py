"""The sandbox Emil is run in off a real server: the embedded flying-squid server (``server``)
and scripted mineflayer players (``player``), for the demo, the tests, the benches, the soak
and ``replay --world embedded``. Not part of the runtime: no package of the product imports it
(tests/unit/test_house.py holds that).

Their JavaScript (``server_launcher.js``, the ``emil_squid_*.js`` plugins, ``player_bot.js``)
stays in emil/world/js beside the bot's: one npm package (package.json, the lockfile, one
node_modules, the ``emil_require.js`` resolution and the ESLint config) serves both, and
splitting it would mean two installs and two lockfiles.
"""

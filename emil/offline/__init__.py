"""The logic behind the operator's offline tools (tools/*.py): what a recorded or synthetic
session says about budgets, counts and recall.

- ``trace``, ``content``      a session as the context manager saw it grow; its text by category
- ``chars_per_token``         the 4-chars estimate against exact counts, per category
- ``simulate``, ``budget_sweep``, ``budget_report``  one budget over a session; many; the table
- ``summaries``               the summarise rung in a sweep, with the writer the tool injects
- ``synthetic``               a seeded synthetic day from Emil's real parts (``sim_world``,
  ``sim_people``, ``sim_policy``: the world, its people, Emil's script)
- ``recall``, ``day_recall``  planted facts, and how many a prompt still holds
- ``swap_drill``              one recording replayed under each model family

The command-line front ends are thin scripts in tools/; this package never names a test double
(a tool script hands one in). See docs/offline.md.
"""

__all__: list[str] = []

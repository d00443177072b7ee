"""Offline tools over recorded sessions: chars/token by content, budget sweeps, replay.

The command-line front ends are thin scripts in tools/ and ``run_emil.py replay``; the logic
lives here so it is tested and type-checked like the runtime (see docs/offline.md).
"""

__all__: list[str] = []

"""The play bench: tasks played in the embedded world by Emil on any OpenAI-compatible endpoint,
scored from the world (docs/play-bench.md): the suite as data (tasks.py), goals read from the
world (goals.py), one run played (runner.py), the figures (report.py)."""

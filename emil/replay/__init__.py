"""Recorded sessions replayed offline: recorded completions as the model (:class:`RecordedLLM`),
recorded tool results as the world, today's perception and context manager in between.

``run_emil.py replay FILE...`` calls :func:`cli_main`; :func:`replay_file` is the library entry.
``recorded_turns`` regroups a recording into turns and steps, ``engine`` replays them through the turn
engine, ``report`` holds what a replay is asked and what it found (data, JSON, text),
``compare`` says which messages of a request differ, ``live`` sets a live model's answers
beside the recorded ones, ``recorded_notes`` and ``recorded_summaries`` serve the recorded
notes block and summaries, ``playback`` plays the recorded actions into an embedded server. See docs/offline.md.
"""

from emil.replay.cli import cli_main, replay_file
from emil.replay.compare import MessageChange, RequestDiff
from emil.replay.engine import Replayer
from emil.replay.live import LiveStep
from emil.replay.recorded_llm import RecordedLLM, ReplayExhausted
from emil.replay.recorded_turns import RecordedSession, RecordedStep, RecordedTurn
from emil.replay.report import ObservationDiff, ReplayOptions, ReplayReport

__all__ = [
    "LiveStep",
    "MessageChange",
    "ObservationDiff",
    "RecordedLLM",
    "RecordedSession",
    "RecordedStep",
    "RecordedTurn",
    "ReplayExhausted",
    "ReplayOptions",
    "ReplayReport",
    "Replayer",
    "RequestDiff",
    "cli_main",
    "replay_file",
]

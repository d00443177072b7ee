"""The model-swap drill: one recording replayed under each model family.

For each family a server the caller provides (:data:`ServeAs`; tools/model_swap_drill.py starts
the vLLM-dialect double, not vLLM) serves a model of that family (its template and tokenizer
count every prompt), plus once a model of no shipped family (:data:`UNKNOWN`, countable only by
the server's ``/tokenize``). Emil resolves the family from the server's ``/v1/models`` exactly
as at start, replays the recording with that family's context manager and sends every
assembled request to the server.
A swap is safe when no request overflows and every prediction equals the server's
``usage.prompt_tokens`` (calibration error 0).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from emil.context.history import History
from emil.context.manager import Assembly
from emil.exceptions import ConfigurationError
from emil.llm.client import OpenAIClient
from emil.llm.tokenize import ServerCounting, ServerTokenizeCounter
from emil.llm.types import LLM
from emil.model.family import FAMILIES, ModelFamily, server_family
from emil.model.resolve import resolve_family
from emil.model.verify import verify_family
from emil.recording import check_recording_file, read_recording
from emil.replay.engine import Replayer
from emil.replay.recorded_turns import RecordedSession
from emil.replay.report import ReplayOptions

__all__ = ["UNKNOWN", "DrillRow", "DrillServer", "ServeAs", "drill", "format_drill"]

UNKNOWN = "unknown"
"""The drill's name for the model of no shipped family."""


class DrillServer(Protocol):
    """A running OpenAI-compatible server with /tokenize, serving one model."""

    base_url: str
    window: int
    """The served window (``max_model_len``); the drill sets it after sizing the prompts."""
    tokenize_calls: int
    """POST /tokenize calls answered so far."""


ServeAs = Callable[[str, int], AbstractAsyncContextManager[DrillServer]]
"""``serve(family, window)``: a server serving a model of that family (or :data:`UNKNOWN`: a
model of none), entered for the family's drill."""


@dataclass(frozen=True)
class DrillRow:
    """One family's result."""

    served_as: str
    """The family the double served as (or ``unknown``)."""
    model: str
    resolved: str
    """The family Emil resolved, and from what."""
    window: int
    """The window served (prompt budget + output reserve + margin)."""
    requests: int
    overflows: int
    """Requests the double refused for size (or clamped)."""
    errors: int
    """Requests that failed for another reason, prompts today's manager could not fit, and a
    replay that stopped early."""
    max_calibration_error: int
    """Largest |server's usage.prompt_tokens - Emil's prediction| over the requests."""
    tokenize_calls: int
    """POST /tokenize calls the double answered during the replay."""
    tokenize_calls_sizing: int
    """... and during the sizing pass before it (cold caches; 0 when the window was given)."""
    turns: int
    trims: int
    """Trims today's manager made during the replay."""
    assemble_ms: float
    """Median wall time of one prompt assembly (its /tokenize calls included)."""

    @property
    def ok(self) -> bool:
        return self.requests > 0 and not self.overflows and not self.errors and not self.max_calibration_error


_SIZING_WINDOW = 1 << 20
_MARGIN = 512


def _replayer(session: RecordedSession, recording: Path, options: ReplayOptions, live: LLM | None) -> Replayer:
    return Replayer(session, path=str(recording), options=options, live=live)


def _time_assembly(replayer: Replayer) -> list[float]:
    """Time every assembly of ``replayer`` (its manager's ``assemble``)."""
    timings: list[float] = []
    assemble = replayer.manager.assemble

    def timed(history: History, **kwargs: Any) -> Assembly:
        started = time.perf_counter()
        try:
            return assemble(history, **kwargs)
        finally:
            timings.append((time.perf_counter() - started) * 1000)

    replayer.manager.assemble = timed  # type: ignore[method-assign]
    return timings


async def _one(recording: Path, served_as: str, window: int | None, serve: ServeAs) -> DrillRow:
    session = RecordedSession.from_read(read_recording(recording))
    header = session.header
    reserve = (header.output_reserve if header else None) or 6144
    async with serve(served_as, _SIZING_WINDOW) as double, OpenAIClient(double.base_url) as llm:
        served = await llm.discover()
        def counted_by_server() -> ModelFamily:
            return server_family(ServerCounting(double.base_url, served.id))

        resolved = resolve_family(
            setting="auto", served=(served.root, served.id), server=counted_by_server
        )
        resolved = await verify_family(
            resolved, ServerTokenizeCounter(double.base_url, served.id),
            enable_thinking=bool(header and header.enable_thinking),
            preserve_thinking=bool(header and header.preserve_thinking), server=counted_by_server,
        )
        family = resolved.family
        cold = double.tokenize_calls
        if window is None:
            # Size this family's prompts first, then serve a window whose prompt budget lies
            # halfway between the first prompt and the peak: every family's ladder must trim.
            sizing = ReplayOptions(family=family, window=_SIZING_WINDOW,
                                   prompt_budget=_SIZING_WINDOW - reserve - _MARGIN)
            sizes = [d.today_tokens for d in (await _replayer(session, recording, sizing, None).run()).diffs]
            budget = (sizes[0] + max(sizes)) // 2 if sizes else _SIZING_WINDOW // 2
        else:
            budget = window - reserve - _MARGIN
        served_window = budget + reserve + _MARGIN
        double.window = served_window
        cold = double.tokenize_calls - cold
        calls_before = double.tokenize_calls
        options = ReplayOptions(family=family, window=served_window, prompt_budget=budget)
        replayer = _replayer(session, recording, options, llm)
        timings = _time_assembly(replayer)
        report = await replayer.run()
    sized = [e for e in (s.error or "" for s in report.live) if e]
    overflow_words = ("overflow", "context length", "maximum context")
    overflows = sum(any(w in e.lower() for w in overflow_words) for e in sized)
    gaps = [
        abs(s.live_prompt_tokens - s.predicted_prompt_tokens)
        for s in report.live
        if s.live_prompt_tokens is not None and s.predicted_prompt_tokens is not None
    ]
    return DrillRow(
        served_as=served_as,
        model=served.id,
        resolved=f"{family.name} ({resolved.source})",
        window=served_window,
        requests=len(report.live),
        overflows=overflows,
        errors=len(sized) - overflows + len(report.errors) + (1 if report.stopped else 0),
        max_calibration_error=max(gaps, default=0),
        tokenize_calls=double.tokenize_calls - calls_before,
        tokenize_calls_sizing=cold,
        turns=report.turns_replayed,
        trims=report.trims_today,
        assemble_ms=statistics.median(timings) if timings else 0.0,
    )


async def drill(
    recording: Path, families: list[str] | None = None, *, serve: ServeAs, window: int | None = None
) -> list[DrillRow]:
    """Replay ``recording`` under each family (default: every shipped one, then unknown), each
    served by ``serve``, with a window that makes each family's ladder trim (or ``window`` for
    all)."""
    check_recording_file(recording)  # "not an Emil recording", not a FAIL table
    known = [*(f.name for f in FAMILIES), UNKNOWN]
    names = families or known
    wrong = [n for n in names if n not in known]
    if wrong:
        raise ConfigurationError(f"unknown family {', '.join(map(repr, wrong))}; the drill knows {', '.join(known)}")
    return [await _one(recording, name, window, serve) for name in names]


def format_drill(rows: list[DrillRow]) -> str:
    """The drill's table (Markdown)."""
    lines = [
        "| served as | model | Emil resolved | window | requests | trims | overflows | errors | max calibration error | /tokenize calls per request (cold, warm) | assembly ms (median) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = max(1, r.requests)
        calls = f"{r.tokenize_calls_sizing / n:.1f}, {r.tokenize_calls / n:.1f}"
        lines.append(
            f"| {r.served_as} | {r.model} | {r.resolved} | {r.window:,} | {r.requests} | {r.trims} | {r.overflows} | "
            f"{r.errors} | {r.max_calibration_error} | {calls} | {r.assemble_ms:.2f} |"
        )
    verdict = "PASS" if rows and all(r.ok for r in rows) else "FAIL"
    lines.append(f"\n{verdict}: zero overflows and calibration error 0 under every family")
    return "\n".join(lines)

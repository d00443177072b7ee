"""What a replay is asked (:class:`ReplayOptions`) and what it found (:class:`ReplayReport`),
as data, as JSON (``--json``) and as text for the terminal (:func:`format_report`).

The replayer (:mod:`emil.replay.engine`) fills a report; the command line, the model-swap drill
and the tests read it without running a replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from emil.model.family import ModelFamily
from emil.replay.compare import RequestDiff
from emil.replay.live import LiveStep
from emil.replay.recorded_summaries import SummaryVerdict

__all__ = ["ObservationDiff", "ReplayOptions", "ReplayReport", "format_report"]


@dataclass(frozen=True)
class ReplayOptions:
    """What to replay with; ``None`` = what the recording's header says."""

    tokenizer: str | None = None
    window: int | None = None
    output_reserve: int | None = None
    prompt_budget: int | None = None
    family: ModelFamily | None = None
    """Count as this model family (e.g. the one a live endpoint serves), not the recording's."""


@dataclass(frozen=True)
class ObservationDiff:
    """A turn whose observation text today's perception writes differently."""

    turn: int
    recorded: str
    today: str


@dataclass
class ReplayReport:
    """What a replay found."""

    path: str
    turns_total: int
    steps_total: int
    turns_replayed: int = 0
    steps_replayed: int = 0
    diffs: list[RequestDiff] = field(default_factory=list)
    observation_diffs: list[ObservationDiff] = field(default_factory=list)
    trims_recorded: int = 0
    trims_today: int = 0
    errors: list[str] = field(default_factory=list)
    """Today's code failing where the recording did not (a prompt that no longer fits, a turn
    that ends at another step), each with its turn and step."""
    live: list[LiveStep] = field(default_factory=list)
    summaries: list[SummaryVerdict] = field(default_factory=list)
    """With a live model: each recorded summary request asked again (facts kept, dropped, new)."""
    unanswered: int = 0
    """Requests the recording has no answer to: the turn was interrupted (an urgent event, a
    stop) or failed during the model call, or the session ended in it. Each is compared like
    any request, and its turn ends there, as it did live."""
    stopped: str | None = None
    """Why replay stopped before the end (damage: a missing request or tool result)."""
    seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    session: int = 1
    """Which session of the file was replayed (1-based); ``recording_append`` makes several."""
    sessions: int = 1
    """How many sessions the file holds."""

    @property
    def identical(self) -> int:
        return sum(1 for d in self.diffs if d.identical)

    @property
    def differing(self) -> list[RequestDiff]:
        return [d for d in self.diffs if not d.identical]

    @property
    def as_recorded(self) -> bool:
        """Every request built as the session built it, and today's code failed nowhere the
        session did not (what ``run_emil.py replay`` exits 0 on)."""
        return not self.differing and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "session": self.session,
            "sessions": self.sessions,
            "settings": self.settings,
            "turns_total": self.turns_total,
            "steps_total": self.steps_total,
            "turns_replayed": self.turns_replayed,
            "steps_replayed": self.steps_replayed,
            "identical_requests": self.identical,
            "differing_requests": len(self.diffs) - self.identical,
            "trims_recorded": self.trims_recorded,
            "trims_today": self.trims_today,
            "unanswered_requests": self.unanswered,
            "stopped": self.stopped,
            "errors": self.errors,
            "observation_diffs": [vars(o) for o in self.observation_diffs],
            "requests": [d.to_json() for d in self.diffs if not d.identical],
            "live": [s.to_json() for s in self.live],
            "summaries": [v.to_json() for v in self.summaries],
            "seconds": round(self.seconds, 3),
        }




def _n(v: int | None) -> str:
    return "?" if v is None else f"{v:,}"


def format_report(report: ReplayReport, *, details: int = 10) -> str:
    """Summary, then up to ``details`` differing requests and live steps."""
    s = report.settings
    lines = [
        f"replay {report.path}: {report.turns_replayed}/{report.turns_total} turns, "
        f"{report.steps_replayed}/{report.steps_total} steps in {report.seconds:.2f} s "
        f"(window {_n(s.get('window'))}, output reserve {_n(s.get('output_reserve'))}, "
        f"prompt budget {_n(s.get('prompt_budget'))}; {s.get('tokenizer')})",
    ]
    if report.sessions > 1:
        lines.append(
            f"session {report.session} of {report.sessions} in this file (appended runs; "
            "--session N replays another, 1 = the oldest)"
        )
    differing = [d for d in report.diffs if not d.identical]
    lines.append(
        f"requests: {report.identical} identical to the recording, {len(differing)} built differently today"
        + (f"; {report.unanswered} unanswered in the recording (a turn interrupted or failed during the "
           "call, or the session's end)" if report.unanswered else "")
    )
    for d in differing[:details]:
        actual = f", server {_n(d.recorded_actual)}" if d.recorded_actual is not None else ""
        delta = d.token_delta
        lines.append(
            f"  turn {d.turn} step {d.step}: {d.recorded_messages} -> {d.today_messages} messages, "
            f"recorded {_n(d.recorded_predicted)} tokens{actual}, today {d.today_tokens:,}"
            + ("" if delta is None else f" ({delta:+,})")
        )
        for c in d.changes[:4]:
            lines.append(
                f"    {c.op:<7} recorded[{c.recorded[0]}:{c.recorded[1]}] -> today[{c.today[0]}:{c.today[1]}]"
                f" {c.recorded_tokens:,} -> {c.today_tokens:,} tokens  {c.first}"
            )
        if len(d.changes) > 4:
            lines.append(f"    ... {len(d.changes) - 4} more runs")
    if len(differing) > details:
        lines.append(f"  ... {len(differing) - details} more differing requests (--json for all)")
    if report.observation_diffs:
        first = report.observation_diffs[0]
        lines.append(
            f"observations: {len(report.observation_diffs)} turn(s) written differently by today's "
            f"perception (first: turn {first.turn})"
        )
    lines.append(f"trims: recorded {report.trims_recorded}, today {report.trims_today}")
    lines.extend(f"error: {e}" for e in report.errors[:details])
    if report.live:
        lines += _live(report, details)
    if report.summaries:
        lines += _summaries(report)
    if report.stopped:
        lines.append(f"stopped: {report.stopped}")
    return "\n".join(lines)


def _summaries(report: ReplayReport) -> list[str]:
    v = report.summaries
    ready = [x for x in v if x.live_outcome == "ready"]
    kept, dropped = sum(x.kept for x in ready), sum(x.dropped for x in ready)
    lines = [
        f"summaries asked again: {len(ready)}/{len(v)} usable; recorded facts kept {kept}/{kept + dropped}, "
        f"new {sum(x.new for x in ready)}, invented (left out) {sum(x.invented for x in ready)}",
    ]
    lines += [f"  {x.turns} turns: {x.live_outcome}: {x.reason}" for x in v if x.live_outcome != "ready"][:5]
    return lines


def _live(report: ReplayReport, details: int) -> list[str]:
    steps = report.live
    answered = [s for s in steps if s.error is None]
    calls = sum(len(s.live_calls) for s in answered)
    invalid = sum(len(s.live_invalid) for s in answered)
    same = sum(1 for s in answered if s.same_calls)
    lat = sorted(s.live_latency_s for s in answered)
    rec_lat = sorted(s.recorded_latency_s for s in steps if s.recorded_latency_s is not None)
    med = lat[len(lat) // 2] if lat else None
    rec_med = rec_lat[len(rec_lat) // 2] if rec_lat else None
    out = [
        f"live model: {len(answered)}/{len(steps)} steps answered, {calls} tool calls, "
        f"{calls - invalid}/{calls} valid, same tools as recorded in {same}/{len(answered)} steps; "
        f"median latency live {'-' if med is None else f'{med:.2f}'} s vs recorded "
        f"{'-' if rec_med is None else f'{rec_med:.2f}'} s",
        f"  {'turn.step':<10} {'recorded calls':<28} {'live calls':<28} {'valid':<6} "
        f"{'prompt rec/live':>16} {'compl rec/live':>15} {'latency rec/live':>17}",
    ]
    for s in steps[:details]:
        valid = "ERR" if s.error else ("yes" if not s.live_invalid else "NO")
        out.append(
            f"  {f'{s.turn}.{s.step}':<10} {','.join(s.recorded_calls) or '(text)':<28.28} "
            f"{','.join(s.live_calls) or ('(error)' if s.error else '(text)'):<28.28} {valid:<6} "
            f"{_n(s.recorded_prompt_tokens):>7}/{_n(s.live_prompt_tokens):<8} "
            f"{_n(s.recorded_completion_tokens):>6}/{_n(s.live_completion_tokens):<8} "
            f"{'-' if s.recorded_latency_s is None else f'{s.recorded_latency_s:.2f}':>7}/{s.live_latency_s:.2f}"
        )
        for p in s.live_invalid:
            out.append(f"      invalid: {p}")
        if s.error:
            out.append(f"      error: {s.error}")
    return out

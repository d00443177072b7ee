"""Per-turn figures: what the operator reads in the log line and the ``turn`` record."""

from __future__ import annotations

from dataclasses import dataclass, field

from emil.recording import TurnRecord

__all__ = ["SessionStats", "TurnStats"]


@dataclass
class TurnStats:
    """Figures collected while one turn runs. Times are ``time.monotonic()`` seconds."""

    turn: int
    reason: str
    started: float
    event_at: float | None = None
    """Arrival of the earliest event that triggered the turn."""
    steps: int = 0
    actions: int = 0
    first_request_at: float | None = None
    """When the first request of the turn was handed to the client (after assembly)."""
    first_completion_at: float | None = None
    first_action_at: float | None = None
    predicted_prompt_tokens: int | None = None
    actual_prompt_tokens: int | None = None
    shared_prefix_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int = 0
    model_seconds: float = 0.0
    trims: int = 0
    overflow_recoveries: int = 0
    interrupted: bool = False
    interrupted_by: str = ""
    failed: str = ""
    """Why the turn failed (server fault, prompt too large, a bug), when it did."""
    ended: float | None = None

    @property
    def latency_ms(self) -> float | None:
        """Event to first action (None when the turn took no action)."""
        if self.first_action_at is None or self.event_at is None:
            return None
        return (self.first_action_at - self.event_at) * 1000

    @property
    def pre_overhead_ms(self) -> float | None:
        """Event to request sent: Emil's own work before the model (debounce included)."""
        if self.first_request_at is None or self.event_at is None:
            return None
        return (self.first_request_at - self.event_at) * 1000

    @property
    def post_overhead_ms(self) -> float | None:
        """Completion received to first action dispatched."""
        if self.first_action_at is None or self.first_completion_at is None:
            return None
        return (self.first_action_at - self.first_completion_at) * 1000

    @property
    def tokens_per_s(self) -> float | None:
        """Completion tokens over model wall time (prefill included when not streamed)."""
        if self.model_seconds <= 0 or not self.completion_tokens:
            return None
        return self.completion_tokens / self.model_seconds

    def record(self) -> TurnRecord:
        """The turn summary record."""
        return TurnRecord(
            turn=self.turn,
            reason=self.reason,
            steps=self.steps,
            actions=self.actions,
            latency_first_action_ms=self.latency_ms,
            predicted_prompt_tokens=self.predicted_prompt_tokens,
            actual_prompt_tokens=self.actual_prompt_tokens,
            shared_prefix_tokens=self.shared_prefix_tokens,
            cached_tokens=self.cached_tokens,
            completion_tokens=self.completion_tokens,
            tokens_per_s=self.tokens_per_s,
            trims=self.trims,
            overflow_recoveries=self.overflow_recoveries,
            interrupted=self.interrupted,
            interrupted_by=self.interrupted_by,
            failed=self.failed,
            duration_s=(self.ended or self.started) - self.started,
        )

    def log_line(self) -> str:
        """One line an operator can read at a glance."""
        lat = f"{self.latency_ms:.0f} ms" if self.latency_ms is not None else "-"
        pred, act = self.predicted_prompt_tokens, self.actual_prompt_tokens
        if pred is not None and act is not None:
            prompt = f"prompt {pred} predicted / {act} actual ({act - pred:+d})"
        else:
            prompt = f"prompt {pred if pred is not None else '-'} predicted / {act if act is not None else '-'} actual"
        shared = self.shared_prefix_tokens if self.shared_prefix_tokens is not None else "-"
        cached = self.cached_tokens if self.cached_tokens is not None else "n/a"
        tps = f"{self.tokens_per_s:.1f} tok/s" if self.tokens_per_s is not None else "- tok/s"
        flags = f" INTERRUPTED ({self.interrupted_by})" if self.interrupted and self.interrupted_by else (
            " INTERRUPTED" if self.interrupted else "")
        if self.failed:
            flags += f" FAILED ({self.failed})"
        return (
            f"turn {self.turn} [{self.reason}] {self.steps} steps, {self.actions} actions{flags} | "
            f"latency {lat} | {prompt} | shared prefix {shared}, server cached {cached} | "
            f"completion {self.completion_tokens} tok, {tps} | trims {self.trims} | "
            f"overflow recoveries {self.overflow_recoveries}"
        )


@dataclass
class SessionStats:
    """Totals over a session (the demo summary)."""

    turns: list[TurnStats] = field(default_factory=list)
    events: int = 0
    errors: int = 0

    @property
    def actions(self) -> int:
        return sum(t.actions for t in self.turns)

    @property
    def trims(self) -> int:
        return sum(t.trims for t in self.turns)

    @property
    def overflow_recoveries(self) -> int:
        return sum(t.overflow_recoveries for t in self.turns)

    def latencies_ms(self) -> list[float]:
        return [t.latency_ms for t in self.turns if t.latency_ms is not None]

"""The prompt budget in real tokens of the served model, and its calibration against the server.

prompt budget = served window - reserved output - safety margin. The window is an input (it
comes from the server's ``/v1/models``), never a constant. The margin covers what the local
count cannot see; :class:`Calibration` compares every prediction with the server's truth
(``usage.prompt_tokens`` or ``/tokenize``) and widens the margin when they disagree.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from emil.exceptions import BudgetError

__all__ = ["Budget", "Calibration", "CalibrationReport"]


@dataclass(frozen=True)
class Budget:
    """Token budget of one served model: the one value the context, the tools, replay and the
    offline sweep read (built by :meth:`of` from the settings and the server's window).

    ``low_water`` is the fraction of the prompt budget the trim ladder trims down to once the
    prompt goes over budget, so trims are batched and rare instead of firing every turn.
    ``sources`` says where the window, the output reserve and the prompt budget came from
    (e.g. ``{"window": "server max_model_len"}``); it is shown, never compared.
    """

    window: int
    output_reserve: int = 6144
    margin: int = 256
    low_water: float = 0.8
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def of(
        cls, window: int, output_reserve: int, prompt_budget: int | None = None, *,
        min_margin: int = 0, low_water: float = 0.8, sources: dict[str, str] | None = None,
    ) -> Budget:
        """The budget for a window and a reserve: the prompt budget asked for (a smaller budget
        is a larger margin: the manager keeps the slack unused), or the default margin's when
        None. A prompt budget that leaves less than ``min_margin`` is a :class:`BudgetError`
        naming the setting and the fix."""
        auto = cls(window, output_reserve=output_reserve, low_water=low_water, sources=dict(sources or {}))
        if prompt_budget is None:
            return auto
        room = window - output_reserve - min_margin
        if prompt_budget > room:
            raise BudgetError(
                f"prompt_budget {prompt_budget} > window {window} - output_reserve {output_reserve}"
                + (f" - margin {min_margin}" if min_margin else "")
                + f" = {room}; lower prompt_budget or leave it on auto"
            )
        return cls(window, output_reserve=output_reserve, margin=window - output_reserve - prompt_budget,
                   low_water=low_water, sources=dict(sources or {}))

    def explain(self, margin: int | None = None) -> str:
        """``prompt budget N (window W - output reserve R - margin M)``, with the sources: the
        one wording of the budget in logs and errors (``margin``: a calibrated one, if wider)."""
        m = self.margin if margin is None else margin
        src = "".join(f"; {k} from {v}" for k, v in self.sources.items())
        return (f"prompt budget {self.window - self.output_reserve - m} (window {self.window} - output reserve "
                f"{self.output_reserve} - margin {m}{src})")

    def __post_init__(self) -> None:
        if not 0.0 < self.low_water <= 1.0:
            raise BudgetError(f"low_water must be in (0, 1], got {self.low_water}")
        if self.window <= 0 or self.output_reserve < 0 or self.margin < 0:
            raise BudgetError(
                f"invalid budget: window {self.window}, output reserve {self.output_reserve}, "
                f"margin {self.margin}"
            )
        if self.prompt_budget <= 0:
            raise BudgetError(f"no room for a prompt: {self.explain()}")

    @property
    def prompt_budget(self) -> int:
        """Most prompt tokens a request may carry."""
        return self.window - self.output_reserve - self.margin


@dataclass(frozen=True)
class CalibrationReport:
    """Prediction error against the server's own counts."""

    samples: int
    exact: int
    """Predictions equal to the server's count."""
    mean_error: float
    """Mean of (actual - predicted); positive means the local count was too low."""
    worst_under: int
    """Largest (actual - predicted) among recent samples; what the margin must absorb."""
    worst_over: int
    margin: int


class Calibration:
    """Tracks predicted vs actual prompt sizes and derives the safety margin.

    The margin is the base margin plus ``widen`` times the worst recent under-count: an exact
    counter keeps the base margin; a counter that ever under-counts gets room for it at once.
    Over-counts never shrink the margin below the base (they only waste a little window).
    """

    def __init__(self, base_margin: int = 256, *, widen: float = 1.5, window: int = 64) -> None:
        self.base_margin = base_margin
        self.widen = widen
        self._errors: deque[int] = deque(maxlen=window)
        self._samples = 0
        self._exact = 0
        self._sum = 0

    def observe(self, predicted: int, actual: int) -> None:
        """Record one prediction and the server's count for the same prompt."""
        error = actual - predicted
        self._errors.append(error)
        self._samples += 1
        self._exact += error == 0
        self._sum += error

    @property
    def margin(self) -> int:
        worst_under = max((e for e in self._errors if e > 0), default=0)
        return self.base_margin + math.ceil(worst_under * self.widen)

    def report(self) -> CalibrationReport:
        errors = list(self._errors)
        return CalibrationReport(
            samples=self._samples,
            exact=self._exact,
            mean_error=self._sum / self._samples if self._samples else 0.0,
            worst_under=max((e for e in errors if e > 0), default=0),
            worst_over=max((-e for e in errors if e < 0), default=0),
            margin=self.margin,
        )

"""Characters per token by content category, and how wrong a fixed estimate is.

A budget kept in "estimated tokens" (characters / 4) is a property of the pair (harness,
tokenizer): the field notes' 18,000 estimated tokens meant about 21k real tokens on Nemotron and
26.6k on Qwen3.6, because tool results and tool-call arguments run at about 2.6 chars/token.
This report measures, on recorded sessions and for any tokenizer, what each content category
really costs and what the estimate would have predicted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emil.model.family import DEFAULT_FAMILY
from emil.model.resolve import get_token_counter
from emil.model.tokens import TokenCounter
from emil.offline.content import CATEGORIES, INSIDE_OTHERS, Piece, iter_pieces
from emil.recording import read_recording

__all__ = [
    "CategoryCount",
    "CharsPerTokenReport",
    "RecordingSource",
    "TokenizerReport",
    "format_table",
    "measure_chars_per_token",
    "measure_pieces",
]


@dataclass(frozen=True)
class CategoryCount:
    """Characters and exact tokens of one content category, for one tokenizer."""

    category: str
    pieces: int
    chars: int
    tokens: int

    @property
    def chars_per_token(self) -> float | None:
        return self.chars / self.tokens if self.tokens else None

    def estimate(self, assume: float) -> float:
        """Tokens a fixed ``assume`` chars/token estimate predicts for this category."""
        return self.chars / assume

    def error_tokens(self, assume: float) -> float:
        """Estimate minus truth: negative means the estimate under-counts (the dangerous way)."""
        return self.estimate(assume) - self.tokens

    def error_pct(self, assume: float) -> float | None:
        return 100.0 * self.error_tokens(assume) / self.tokens if self.tokens else None

    def to_json(self, assume: float) -> dict[str, Any]:
        cpt = self.chars_per_token
        pct = self.error_pct(assume)
        return {
            "category": self.category,
            "pieces": self.pieces,
            "chars": self.chars,
            "tokens": self.tokens,
            "chars_per_token": None if cpt is None else round(cpt, 4),
            "estimated_tokens": round(self.estimate(assume), 1),
            "error_tokens": round(self.error_tokens(assume), 1),
            "error_pct": None if pct is None else round(pct, 2),
        }


@dataclass(frozen=True)
class TokenizerReport:
    """Every category's counts for one tokenizer, plus the total over all categories."""

    spec: str
    name: str
    categories: tuple[CategoryCount, ...]

    @property
    def total(self) -> CategoryCount:
        """Every category once (``chat_lines`` are already inside ``observations``)."""
        counted = [c for c in self.categories if c.category not in INSIDE_OTHERS]
        return CategoryCount(
            "total",
            sum(c.pieces for c in counted),
            sum(c.chars for c in counted),
            sum(c.tokens for c in counted),
        )

    def get(self, category: str) -> CategoryCount | None:
        return next((c for c in self.categories if c.category == category), None)


@dataclass(frozen=True)
class RecordingSource:
    """One recording that was read, and where reading stopped if it was damaged."""

    path: str
    records: int | None
    """None for a generated (synthetic) session."""
    stopped_at_line: int | None = None
    problem: str | None = None


@dataclass(frozen=True)
class CharsPerTokenReport:
    """The whole report: sources, the assumed chars/token and one section per tokenizer."""

    assume: float
    sources: tuple[RecordingSource, ...]
    tokenizers: tuple[TokenizerReport, ...] = field(default_factory=tuple)
    sides: tuple[tuple[str, tuple[TokenizerReport, ...]], ...] = ()
    """With recordings and a synthetic session both: each alone ("recorded", "synthetic")."""

    def to_json(self) -> dict[str, Any]:
        sides = {
            name: [{"spec": t.spec, "categories": [c.to_json(self.assume) for c in t.categories],
                    "total": t.total.to_json(self.assume)} for t in reports]
            for name, reports in self.sides
        }
        return {**({"side_by_side": sides} if sides else {}),
            "assume_chars_per_token": self.assume,
            "recordings": [vars(s) for s in self.sources],
            "tokenizers": [
                {
                    "spec": t.spec,
                    "name": t.name,
                    "categories": [c.to_json(self.assume) for c in t.categories],
                    "total": t.total.to_json(self.assume),
                }
                for t in self.tokenizers
            ],
        }


def measure_pieces(
    pieces: Iterable[Piece], counter: TokenCounter, *, spec: str | None = None
) -> TokenizerReport:
    """Count pieces with one tokenizer, per category (identical texts are counted once)."""
    chars: dict[str, int] = {}
    tokens: dict[str, int] = {}
    n: dict[str, int] = {}
    cache: dict[str, int] = {}
    for piece in pieces:
        count = cache.get(piece.text)
        if count is None:
            count = cache[piece.text] = counter.count(piece.text)
        chars[piece.category] = chars.get(piece.category, 0) + len(piece.text)
        tokens[piece.category] = tokens.get(piece.category, 0) + count
        n[piece.category] = n.get(piece.category, 0) + 1
    cats = tuple(
        CategoryCount(c, n[c], chars[c], tokens[c]) for c in CATEGORIES if c in n
    )
    return TokenizerReport(spec or counter.name, counter.name, cats)


def measure_chars_per_token(
    paths: Sequence[str | Path],
    tokenizers: Sequence[str | TokenCounter] = (DEFAULT_FAMILY,),
    *,
    assume: float = 4.0,
    synthetic_hours: float | None = None,
    seed: int = 7,
) -> CharsPerTokenReport:
    """Read recordings (up to any damage), plus optionally a synthetic session, and measure
    every category with every tokenizer.

    Raises UnknownTokenizerError for a tokenizer spec nobody knows (no silent heuristic) and
    ValueError for a non-positive ``assume``.
    """
    if not assume > 0 or math.isinf(assume):
        raise ValueError(f"--assume must be a positive number of chars/token, got {assume}")
    counters = [
        (t, get_token_counter(t)) if isinstance(t, str) else (t.name, t) for t in tokenizers
    ]
    recorded: list[Piece] = []
    synthetic: list[Piece] = []
    sources: list[RecordingSource] = []
    for path in paths:
        read = read_recording(path)
        sources.append(
            RecordingSource(str(path), len(read.records), read.stopped_at_line, read.problem)
        )
        recorded.extend(iter_pieces(read.records))
    if synthetic_hours:
        from emil.offline.synthetic import synthetic_pieces

        synthetic.extend(synthetic_pieces(synthetic_hours, seed=seed))
        sources.append(RecordingSource(f"synthetic {synthetic_hours:g} h (seed {seed})", None))
    reports = tuple(measure_pieces([*recorded, *synthetic], c, spec=spec) for spec, c in counters)
    sides: tuple[tuple[str, tuple[TokenizerReport, ...]], ...] = ()
    if recorded and synthetic:
        sides = tuple(
            (name, tuple(measure_pieces(group, c, spec=spec) for spec, c in counters))
            for name, group in (("recorded", recorded), ("synthetic", synthetic))
        )
    return CharsPerTokenReport(assume, tuple(sources), reports, sides)


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f}%"


def _cpt(c: CategoryCount | None) -> str:
    cpt = None if c is None else c.chars_per_token
    return "-" if cpt is None else f"{cpt:.2f}"


def format_table(report: CharsPerTokenReport) -> str:
    """The report as a plain-text table per tokenizer."""
    a = report.assume
    lines: list[str] = []
    for s in report.sources:
        note = f"  (stopped at line {s.stopped_at_line}: {s.problem})" if s.problem else ""
        if s.records is None:
            lines.append(f"session {s.path} (generated by emil.offline.synthetic)")
        else:
            lines.append(f"recording {s.path}: {s.records} records{note}")
    head = (
        f"{'category':<15} {'pieces':>7} {'chars':>10} {'tokens':>9} {'chars/tok':>9} "
        f"{'est@' + format(a, 'g'):>9} {'err tok':>9} {'err %':>8}"
    )
    for t in report.tokenizers:
        lines += ["", f"tokenizer {t.spec} = {t.name}", head, "-" * len(head)]
        for c in (*t.categories, t.total):
            if c.category == "total":
                lines.append("-" * len(head))
            cpt = c.chars_per_token
            lines.append(
                f"{c.category:<15} {c.pieces:>7,} {c.chars:>10,} {c.tokens:>9,} "
                f"{'-' if cpt is None else format(cpt, '.2f'):>9} {c.estimate(a):>9,.0f} "
                f"{c.error_tokens(a):>+9,.0f} {_fmt_pct(c.error_pct(a)):>8}"
            )
    if report.sides:
        (_, recorded), (_, synthetic) = report.sides
        side_head = f"{'category':<15} {'recorded chars/tok':>18} {'err %':>8} {'synthetic chars/tok':>19} {'err %':>8}"
        for r, syn in zip(recorded, synthetic, strict=True):
            lines += ["", f"side by side, tokenizer {r.spec}: the recordings and the synthetic session apart", side_head, "-" * len(side_head)]
            for category in [*(c.category for c in r.categories), *(c.category for c in syn.categories if r.get(c.category) is None)]:
                rc, sc = r.get(category), syn.get(category)
                lines.append(
                    f"{category:<15} {_cpt(rc):>18} {_fmt_pct(rc.error_pct(a) if rc else None):>8} "
                    f"{_cpt(sc):>19} {_fmt_pct(sc.error_pct(a) if sc else None):>8}"
                )
            lines.append(
                f"{'total':<15} {_cpt(r.total):>18} {_fmt_pct(r.total.error_pct(a)):>8} "
                f"{_cpt(syn.total):>19} {_fmt_pct(syn.total.error_pct(a)):>8}"
            )
    lines += [
        "",
        f"err = estimate at {a:g} chars/token minus the exact count; negative = the estimate "
        "under-counts, which is how a budget in estimated tokens overflows the window.",
        "chat_lines = what players typed (from chat events); Emil reads them inside "
        "observations, so they are not added to the total again.",
    ]
    return "\n".join(lines)

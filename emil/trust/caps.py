"""Hard caps on one answer, valid Unicode for text from outside, and the rate limits behind the
chat and turn caps.

Checked as data, before anything parses deeper: :func:`argument_problem` measures a tool
call's raw arguments (length, then JSON nesting depth by one linear scan that never recurses),
so a call nested thousands of levels deep is one clear tool result, never a RecursionError.
One rule for text decoded from JSON (the bot's lines, the model's answers, recordings): a lone
surrogate (the escape ``\\ud800``, which a JSON parser accepts) becomes U+FFFD. UTF-8 cannot
hold it (the recording, sqlite and a request body would refuse it) and neither can vLLM's
tokenizer (the real server answers 400 to a prompt holding one, tool-call arguments included,
which it parses before rendering), while U+FFFD is counted alike by the server and by Emil.
:func:`valid_unicode` (text), :func:`valid_json_text` (parsed JSON), :func:`valid_loads` (JSON
text to parse) and :func:`valid_json` (JSON text to keep) apply it.
:class:`SlidingWindow` counts events within the last window (chat lines a minute) and
:class:`TokenBucket` spaces out turns.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SlidingWindow", "SpamMeter", "TokenBucket", "argument_problem", "json_depth", "valid_json", "valid_json_text", "valid_loads", "valid_unicode"]


def json_depth(raw: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text (strings skipped), without parsing."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def argument_problem(raw: str, *, max_chars: int, max_depth: int) -> str | None:
    """Why a tool call's raw arguments are refused before parsing (None: within the caps)."""
    if len(raw) > max_chars:
        return f"arguments are {len(raw):,} characters long; at most {max_chars:,} are read (tool_argument_chars)"
    depth = json_depth(raw)
    if depth > max_depth:
        return f"arguments are nested {depth} levels deep; at most {max_depth} (tool_argument_depth)"
    return None


def valid_unicode(text: str) -> str:
    """``text`` as valid Unicode: a surrogate pair written as two code points becomes the one
    character it encodes, and every lone surrogate becomes U+FFFD (what UTF-8 can encode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def valid_json_text(value: Any) -> Any:
    """``value`` (parsed JSON) with every string, keys included, made :func:`valid_unicode`."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [valid_json_text(v) for v in value]
    if isinstance(value, dict):
        return {valid_unicode(k) if isinstance(k, str) else k: valid_json_text(v) for k, v in value.items()}
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A ``\\uD800``-``\\uDFFF`` escape (or an escaped backslash before ``uD8..``: parsing tells)."""
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def valid_loads(raw: str | bytes) -> Any:
    """``json.loads(raw)`` with every decoded string made :func:`valid_unicode` (only walked when
    ``raw`` escapes a surrogate or holds one). Raises what ``json.loads`` raises."""
    value = json.loads(raw)
    if isinstance(raw, bytes):
        clean = _SURROGATE_ESCAPE_BYTES.search(raw) is None  # UTF-8 bytes hold no raw surrogate
    else:
        clean = _SURROGATE_ESCAPE.search(raw) is None and valid_unicode(raw) is raw
    return value if clean else valid_json_text(value)


def valid_json(raw: str) -> str:
    """JSON text (tool-call arguments) whose *decoded* strings are :func:`valid_unicode` too.

    The text itself is made valid; when it escapes a lone surrogate (``{"t": "\\ud800"}``) it is
    written anew from its valid value (``{"t": "\ufffd"}``), since vLLM renders the decoded
    value, not the text. Anything else, invalid JSON included, is kept as it is.
    """
    raw = valid_unicode(raw)
    if _SURROGATE_ESCAPE.search(raw) is None:
        return raw
    try:
        value = json.loads(raw)
        valid = valid_json_text(value)
    except (ValueError, RecursionError):
        return raw
    return raw if valid == value else json.dumps(valid, ensure_ascii=False)


@dataclass
class SlidingWindow:
    """At most ``limit`` events within any ``window_s`` seconds."""

    limit: int
    window_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _times: deque[float] = field(default_factory=deque)

    def _drop_old(self, now: float) -> None:
        while self._times and now - self._times[0] >= self.window_s:
            self._times.popleft()

    def room(self) -> int:
        """How many more events fit now."""
        self._drop_old(self.clock())
        return max(0, self.limit - len(self._times))

    def take(self, n: int = 1) -> bool:
        """Count ``n`` events if they fit (all or none)."""
        now = self.clock()
        self._drop_old(now)
        if len(self._times) + n > self.limit:
            return False
        self._times.extend([now] * n)
        return True

    def wait_s(self) -> float:
        """Seconds until one more event fits."""
        now = self.clock()
        self._drop_old(now)
        if len(self._times) < self.limit:
            return 0.0
        return max(0.0, self._times[len(self._times) - self.limit] + self.window_s - now)


@dataclass
class TokenBucket:
    """``rate`` tokens a minute, at most ``burst`` saved up."""

    rate_per_min: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _tokens: float = math.nan
    _at: float = math.nan

    def _refill(self) -> float:
        now = self.clock()
        if math.isnan(self._tokens):
            self._tokens, self._at = float(self.burst), now
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate_per_min / 60.0)
        self._at = now
        return now

    def wait_s(self) -> float:
        """Seconds until a token is there (0: now)."""
        self._refill()
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) * 60.0 / self.rate_per_min

    def take(self) -> bool:
        """Use a token if there is one."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


@dataclass
class SpamMeter:
    """Vanilla's chat spam counter: each line adds ``per_line``, it falls by ``per_second``, and
    a server kicks a client past 200. Emil keeps under ``limit`` (the bot's own backstop in
    ``js/emil_trust.js`` allows a little more, so Emil's pacing is what binds)."""

    limit: float = 160.0
    per_line: float = 20.0
    per_second: float = 20.0
    clock: Callable[[], float] = time.monotonic
    _level: float = 0.0
    _at: float = math.nan

    def _decay(self) -> None:
        now = self.clock()
        if not math.isnan(self._at):
            self._level = max(0.0, self._level - (now - self._at) * self.per_second)
        self._at = now

    def wait_s(self) -> float:
        """Seconds until one more line keeps under the limit."""
        self._decay()
        over = self._level + self.per_line - self.limit
        return max(0.0, over / self.per_second)

    def sent(self, n: int = 1) -> None:
        self._decay()
        self._level += n * self.per_line

"""Status lines as changes: a turn's status says what changed since the status before it.

Every observation ends with the status line (:func:`emil.senses.observation.format_status_line`):
``[status] pos 10,64,-4 | health 20/20 food 17/20 | time day | inventory: bread x2, ... |
players near: alex 9m | mobs near: none | blocks near: ...``. Most of it is the same from one
turn to the next, and it was more than half of what a turn added to the prompt (133 of about
233 tokens a turn in the synthetic day). So the history shows a new turn's status as the change
since the newest status it already holds::

    [status] changed: pos 11,64,-4 | food 16/20
    [status] changed: mobs near: zombie 8m; gone: doing
    [status] unchanged

and keeps the full line beside it (:attr:`emil.context.history.Message.status_full`). The
model can always read the whole status: the oldest status the prompt shows is full, because
whenever a trim removes the statuses before it (``collapse_status``, ``fold``, ``evict``...) the
ladder shows that one in full again (:meth:`emil.context.history.History.status_based`), and a
trim changes the prompt there anyway, so between trims every prompt still only appends.

A status is a list of fields separated by `` | ``; a field's key is its label before ``": "``
(``inventory``, ``players near``...) or its first word (``pos``, ``health``, ``time``...). A
change shows the new or changed fields in full and names the ones gone. When the change would
not be shorter than the line itself, or either line is not a list of fields, the line is shown
in full.
"""

from __future__ import annotations

__all__ = ["STATUS_PREFIX", "status_change"]

STATUS_PREFIX = "[status] "
_SEPARATOR = " | "
UNCHANGED = f"{STATUS_PREFIX}unchanged"
CHANGED = f"{STATUS_PREFIX}changed: "
GONE = "; gone: "


def _fields(line: str) -> dict[str, str] | None:
    """A full status line's fields by key, in order (None: not a status line of fields)."""
    if not line.startswith(STATUS_PREFIX) or "\n" in line:
        return None
    out: dict[str, str] = {}
    for part in line.removeprefix(STATUS_PREFIX).split(_SEPARATOR):
        label, sep, _value = part.partition(": ")
        key = label if sep and label else part.split(" ", 1)[0]
        if not key or key in out:
            return None  # two fields of one key: not a line this reads safely
        out[key] = part
    return out


def status_change(previous: str | None, current: str) -> str:
    """``current`` (a full status line) as the history shows it after ``previous`` (the full
    line of the newest status it holds; None: there is none, ``current`` is shown whole)."""
    if previous is None:
        return current
    before, now = _fields(previous), _fields(current)
    if before is None or now is None:
        return current
    changed = [part for key, part in now.items() if before.get(key) != part]
    gone = [key for key in before if key not in now]
    if not changed and not gone:
        return UNCHANGED
    shown = CHANGED + _SEPARATOR.join(changed) if changed else f"{STATUS_PREFIX}changed"
    if gone:
        shown += GONE + ", ".join(gone)
    return shown if len(shown) < len(current) else current

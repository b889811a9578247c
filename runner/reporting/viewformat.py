"""How a ``ProbeView`` cell reads, shared by the terminal and the HTML renderers.

A view declares each displayed column's ``Format`` (rate, difference, p-value,
score, count, text) and, optionally, the two columns of its interval; this module
turns one row's values into the text a person reads ("12.3% [10.1, 14.5]"), so the
terminal and the page print a probe's view identically. The machine outputs
(JSON, CSV) carry the raw columns instead.
"""

from __future__ import annotations

import math
from typing import Any

from runner.core.formatting import pct, pp, pvalue
from runner.core.views import Format, ViewColumn

MISSING = "—"


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def value_text(x: Any, fmt: Format) -> str:
    """One value in its column's format; a number that does not exist is a dash."""
    if _missing(x):
        return MISSING
    if fmt is Format.RATE:
        return pct(x)
    if fmt is Format.DIFF:
        return pp(x)
    if fmt is Format.PVALUE:
        return pvalue(x)
    if fmt is Format.SCORE:
        return f"{x:.3f}"
    if fmt is Format.COUNT:
        return f"{x:,}" if isinstance(x, int) else str(x)
    if isinstance(x, list):
        return ", ".join(map(str, x)) or MISSING
    return str(x) or MISSING


def _end(x: Any, fmt: Format) -> str:
    """An interval end: a rate without its % sign, a difference with its sign."""
    if _missing(x):
        return MISSING
    if fmt is Format.RATE:
        return f"{100 * x:.1f}"
    return value_text(x, fmt)


def _interval_text(row: dict[str, Any], col: ViewColumn) -> str | None:
    """``[lo, hi]`` of a column with an interval, else None."""
    if col.lo is None or col.hi is None:
        return None
    lo, hi = row.get(col.lo), row.get(col.hi)
    if _missing(lo) and _missing(hi):
        return MISSING
    return f"[{_end(lo, col.format)}, {_end(hi, col.format)}]"


def cell_parts(row: dict[str, Any], col: ViewColumn) -> tuple[str, str | None]:
    """(value, interval) texts of one displayed column; the value is empty for an interval-only column."""
    value = value_text(row.get(col.name), col.format) if col.name is not None else ""
    return value, _interval_text(row, col)


def is_numeric(col: ViewColumn) -> bool:
    """Right-aligned columns."""
    return col.format is not Format.TEXT or col.name is None

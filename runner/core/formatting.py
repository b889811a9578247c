"""How numbers look in every report (terminal, HTML, probe-specific tables).

One place, so a rate, a difference in points and a p-value read the same wherever
they are printed — and so a p-value that is only a bound is never shown as if it
were an exact tiny number.
"""

from __future__ import annotations

import math

#: ``stats`` reports a p-value below this as the bound itself (``pvalue_is_bound``)
_P_BOUND = 1e-300


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None, digits: int = 1) -> str:
    """A proportion as a percentage: ``0.1234`` → ``12.3%``."""
    return "—" if _missing(x) else f"{100 * x:.{digits}f}%"  # type: ignore[operator]


def pp(x: float | None) -> str:
    """A difference of proportions in signed percentage points: ``-0.05`` → ``-5.0``."""
    return "—" if _missing(x) else f"{100 * x:+.1f}"  # type: ignore[operator]


def pvalue(x: float | None) -> str:
    """A p-value: three decimals, scientific below 0.001, ``<1e-300`` at the reporting bound."""
    if _missing(x):
        return "—"
    if x <= _P_BOUND:  # type: ignore[operator]
        return f"<{_P_BOUND:.0e}"
    return f"{x:.3f}" if x >= 0.001 else f"{x:.1e}"  # type: ignore[operator]


def fmt_usd(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x == 0:
        return "$0"
    return f"${x:,.2f}" if x >= 1 else (f"${x:.4f}" if x >= 1e-4 else f"${x:.2e}")

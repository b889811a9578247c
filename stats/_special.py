"""Regularized incomplete beta function, its inverse, and Student-t quantiles (numba, no scipy).

``stats`` depends on numpy and numba only (scipy is a test dependency), so the
few special functions the analytic cluster intervals need live here:

* ``betainc(a, b, x)`` — I_x(a, b), by the continued fraction of Didonato &
  Morris / Numerical Recipes (modified Lentz), using the symmetry
  I_x(a, b) = 1 − I_{1−x}(b, a) on the side where it converges fast;
* ``betaincinv(a, b, p)`` — the x with I_x(a, b) = p, by Newton steps kept
  inside a shrinking bracket (bisection whenever a step would leave it), so it
  always converges; this is the Beta(a, b) quantile (``scipy.stats.beta.ppf``);
* ``t_ppf(p, df)`` — Student-t quantile through the incomplete beta function
  (``scipy.stats.t.ppf``); ``df = inf`` gives the normal quantile.

Tests compare all three with scipy to ~1e-12 relative accuracy.
"""

from __future__ import annotations

import math
from typing import TypedDict

import numba as nb
import numpy as np


class _JitOptions(TypedDict):
    cache: bool
    nogil: bool


_JIT: _JitOptions = {"cache": True, "nogil": True}
_EPS = 1e-16
_FPMIN = 1e-300


@nb.njit(**_JIT)
def _betacf(a: float, b: float, x: float) -> float:
    qab = a + b
    qap = a + 1.0
    qam = a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < _FPMIN:
        d = _FPMIN
    d = 1.0 / d
    h = d
    for m in range(1, 200_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < _FPMIN:
            d = _FPMIN
        c = 1.0 + aa / c
        if abs(c) < _FPMIN:
            c = _FPMIN
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        if abs(d) < _FPMIN:
            d = _FPMIN
        c = 1.0 + aa / c
        if abs(c) < _FPMIN:
            c = _FPMIN
        d = 1.0 / d
        dl = d * c
        h *= dl
        if abs(dl - 1.0) < _EPS:
            break
    return h


@nb.njit(**_JIT)
def _stirling_corr(x: float) -> float:
    """lgamma(x) − [(x − ½) ln x − x + ½ ln 2π] for x >= 10 (asymptotic series, ~1e-17 there)."""
    x2 = x * x
    return (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * x2)) / x2) / x2) / x


@nb.njit(**_JIT)
def _lbeta(a: float, b: float) -> float:
    """log B(a, b), without the cancellation of lgamma differences when a or b is large."""
    if a > b:
        a, b = b, a
    if b < 10.0:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    if a < 10.0:  # lgamma(b) − lgamma(a + b) by Stirling's series
        return (math.lgamma(a) - (b - 0.5) * math.log1p(a / b) - a * math.log(a + b) + a
                + _stirling_corr(b) - _stirling_corr(a + b))
    return (0.5 * math.log(2.0 * math.pi) - (a - 0.5) * math.log1p(b / a) - (b - 0.5) * math.log1p(a / b)
            - 0.5 * math.log(a + b) + _stirling_corr(a) + _stirling_corr(b) - _stirling_corr(a + b))


@nb.njit(**_JIT)
def _log_front(a: float, b: float, x: float) -> float:
    """log of x^a (1−x)^b / B(a, b)."""
    return a * math.log(x) + b * math.log1p(-x) - _lbeta(a, b)


@nb.njit(**_JIT)
def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(_log_front(a, b, x)) * _betacf(a, b, x) / a
    return 1.0 - math.exp(_log_front(a, b, x)) * _betacf(b, a, 1.0 - x) / b


@nb.njit(**_JIT)
def betaincinv(a: float, b: float, p: float) -> float:
    """The x in [0, 1] with I_x(a, b) = p (the Beta(a, b) quantile), for a, b > 0."""
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    # start from the mean; Newton with bisection fallback inside the bracket
    x = a / (a + b)
    lb = _lbeta(a, b)
    for _ in range(400):
        f = betainc(a, b, x) - p
        if f == 0.0:
            return x
        if f < 0.0:
            lo = x
        else:
            hi = x
        logpdf = (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x) - lb
        pdf = math.exp(logpdf)
        step_ok = False
        if pdf > 0.0 and math.isfinite(pdf):
            xn = x - f / pdf
            if lo < xn < hi:
                step_ok = True
        if not step_ok:
            xn = 0.5 * (lo + hi)
        if abs(xn - x) <= 1e-15 * max(x, 1e-300) or hi - lo <= 1e-300:
            return xn
        x = xn
    return x


@nb.njit(**_JIT)
def _norm_ppf(p: float) -> float:
    """Normal quantile: Acklam's rational approximation refined by two Halley steps (erfc)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    if p <= 0.0:
        return -np.inf
    if p >= 1.0:
        return np.inf
    if p < 0.02425:
        q = math.sqrt(-2.0 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    elif p > 1.0 - 0.02425:
        q = math.sqrt(-2.0 * math.log1p(-p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / \
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0)
    else:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / \
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0)
    for _ in range(2):
        e = 0.5 * math.erfc(-x / math.sqrt(2.0)) - p
        u = e * math.sqrt(2.0 * math.pi) * math.exp(x * x / 2.0)
        x = x - u / (1.0 + x * u / 2.0)
    return x


@nb.njit(**_JIT)
def t_ppf(p: float, df: float) -> float:
    """Student-t quantile with ``df`` > 0 degrees of freedom (``df = inf``: normal quantile)."""
    if not df > 0.0:
        return np.nan
    if p <= 0.0:
        return -np.inf
    if p >= 1.0:
        return np.inf
    if df == np.inf:
        return _norm_ppf(p)
    if p == 0.5:
        return 0.0
    upper = p > 0.5
    tail = 1.0 - p if upper else p  # one-sided tail probability, < 0.5
    # P(|T| > t) = 2 tail = I_x(df/2, 1/2) with x = df / (df + t²) = 1 − y. Solve for whichever of x and y
    # is small (so it carries full relative precision): x in the far tail, y near the centre.
    if 2.0 * tail < 0.25:
        x = betaincinv(0.5 * df, 0.5, 2.0 * tail)
        t = math.sqrt(df * (1.0 - x) / x) if x > 0.0 else np.inf
    else:
        y = betaincinv(0.5, 0.5 * df, 1.0 - 2.0 * tail)
        t = math.sqrt(df * y / (1.0 - y)) if y < 1.0 else np.inf
    return t if upper else -t


@nb.njit(**_JIT)
def beta_ppf_many(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``betaincinv`` over arrays (same shape); NaN parameters give NaN."""
    out = np.empty(a.shape[0], np.float64)
    for i in range(a.shape[0]):
        if not (a[i] > 0.0 and b[i] > 0.0) or not (0.0 <= p[i] <= 1.0):
            out[i] = np.nan
        else:
            out[i] = betaincinv(a[i], b[i], p[i])
    return out


@nb.njit(**_JIT)
def t_ppf_many(p: float, df: np.ndarray) -> np.ndarray:
    out = np.empty(df.shape[0], np.float64)
    for i in range(df.shape[0]):
        out[i] = t_ppf(p, df[i])
    return out


@nb.njit(**_JIT)
def _midp_tail(x: float, m: float, p: float) -> float:
    """Mid-p upper tail P(X > x) + ½ P(X = x) of Binomial(m, p), continued to real x and m by I_p.

    P(X >= x) = I_p(x, m − x + 1) and P(X >= x + 1) = I_p(x + 1, m − x); the mid-p tail is their
    mean (a term whose parameters leave (0, ∞) is its limit: 1 at x <= 0, 0 at x + 1 > m).
    """
    t1 = 1.0 if x <= 0.0 else betainc(x, m - x + 1.0, p)
    t2 = 0.0 if m - x <= 0.0 else betainc(x + 1.0, m - x, p)
    return 0.5 * (t1 + t2)


@nb.njit(**_JIT)
def _midp_pdf(x: float, m: float, p: float) -> float:
    """d/dp of ``_midp_tail`` (the mean of the two Beta densities)."""
    s = 0.0
    if x > 0.0:
        s += math.exp((x - 1.0) * math.log(p) + (m - x) * math.log1p(-p) - _lbeta(x, m - x + 1.0))
    if m - x > 0.0:
        s += math.exp(x * math.log(p) + (m - x - 1.0) * math.log1p(-p) - _lbeta(x + 1.0, m - x))
    return 0.5 * s


@nb.njit(**_JIT)
def _midp_root(x: float, m: float, target: float) -> float:
    """The p in (0, 1) with mid-p tail ``_midp_tail(x, m, p) = target`` (increasing in p; 0 < x < m or edges).

    Newton steps kept inside a shrinking bracket, bisection whenever a step would leave it.
    """
    lo, hi = 0.0, 1.0
    p = min(max(x / m, 1e-12), 1.0 - 1e-12) if m > 0.0 else 0.5
    for _ in range(400):
        f = _midp_tail(x, m, p) - target
        if f == 0.0:
            return p
        if f < 0.0:
            lo = p
        else:
            hi = p
        d = _midp_pdf(x, m, p)
        pn = p - f / d if d > 0.0 and math.isfinite(d) else -1.0
        if not lo < pn < hi:
            pn = 0.5 * (lo + hi)
        if abs(pn - p) <= 1e-15 * max(p, 1e-300) or hi - lo <= 1e-300:
            return pn
        p = pn
    return p


@nb.njit(**_JIT)
def midp_bounds_many(x: np.ndarray, m: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Mid-p Clopper–Pearson bounds for (possibly fractional) x of m trials (0 <= x <= m; m = 0: (0, 1)).

    lower: the p with P(X > x) + ½ P(X = x) = α/2 (0 at x = 0);
    upper: the p with P(X < x) + ½ P(X = x) = α/2 (1 at x = m); NaN m gives NaN.
    """
    n = x.shape[0]
    lo = np.empty(n, np.float64)
    hi = np.empty(n, np.float64)
    for i in range(n):
        xi, mi = x[i], m[i]
        if not math.isfinite(mi) or not math.isfinite(xi):
            lo[i] = np.nan
            hi[i] = np.nan
            continue
        if mi <= 0.0:
            lo[i] = 0.0
            hi[i] = 1.0
            continue
        lo[i] = 0.0 if xi <= 0.0 else _midp_root(xi, mi, 0.5 * alpha)
        hi[i] = 1.0 if xi >= mi else _midp_root(xi, mi, 1.0 - 0.5 * alpha)
    return lo, hi

"""Exact tests on counts that treat trials (or pairs) as independent.

Why this exists: Fisher's exact test is the trial-level figure the literature
prints, kept here for comparison beside the cluster tests (it is too
optimistic when trials of a prompt are correlated). McNemar's exact test is
the paired test used for two arms run on the same units.

Small tables (at most ``EXACT_INT_MAX`` trials) are computed with exact
integer arithmetic (``math.comb`` and ``fractions.Fraction``), so ties between
table probabilities are decided exactly. Larger ones would cost seconds to
minutes that way (numbers with tens of thousands of digits), so they go through
``stats._discrete``: the pmf in log space by Loader's saddle-point form (a few
ulps relative error at any count) and tails summed outward from the cut only as
far as they matter, with scipy's tie rule (tables within a relative 1e-12 of the
observed probability count as ties). Both routes agree with scipy to 1e-12
relative; 10^7 trials take milliseconds (benchmarks/stats_speed.py).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from stats import _discrete as D
from stats.results import FisherResult, McNemarResult

#: up to this many trials (pairs) the tests run in exact integers; above it in log space (``stats._discrete``)
EXACT_INT_MAX = 1000
#: relative tolerance of a tie between table probabilities on the log-space route
_TIE_RTOL = 1e-12


def fisher_exact(table: ArrayLike) -> FisherResult:
    """Two-sided Fisher exact test on a 2 × 2 table of counts, as ``scipy.stats.fisher_exact``.

    Parameters
    ----------
    table : array_like of int, shape (2, 2)
        Non-negative counts: rows are the arms, columns hit / miss.

    Returns
    -------
    res : FisherResult
        ``statistic`` (the sample odds ratio; inf when an off-diagonal cell
        is 0), two-sided ``pvalue`` and ``method``.

    Notes
    -----
    Conditions on both margins, so the top-left count is hypergeometric; the
    p-value sums the probabilities of all tables no more probable than the
    observed one, compared exactly in integers (in log space with a relative
    tie tolerance of 1e-12 above ``EXACT_INT_MAX`` trials). Assumes independent trials
    (too optimistic when trials of a prompt are correlated: the cluster tests
    are the ones to read). A table with an empty row or column gives odds
    ratio NaN and p = 1, as in scipy.

    References
    ----------
    .. [1] R. A. Fisher, "On the interpretation of χ² from contingency tables,
           and the calculation of P", Journal of the Royal Statistical Society
           85(1), 87–94, 1922.
    """
    c = np.asarray(table)
    if c.shape != (2, 2):
        raise ValueError(f"table must be 2 x 2, got shape {c.shape}")
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("table must hold non-negative counts")
    (a, b), (cc, d) = (int(v) for v in c[0]), (int(v) for v in c[1])
    method = "Fisher exact test (trial level, two-sided, tables no more probable than observed)"
    if min(a + b, cc + d, a + cc, b + d) == 0:
        return FisherResult(statistic=float("nan"), pvalue=1.0, method=method)
    odds = a * d / (b * cc) if b > 0 and cc > 0 else float("inf")
    row1, row2, col1 = a + b, cc + d, a + cc
    if row1 + row2 > EXACT_INT_MAX:
        return FisherResult(statistic=float(odds), pvalue=float(D.fisher_two_sided(a, row1, row2, col1, _TIE_RTOL)),
                            method=method)
    lo, hi = max(0, col1 - row2), min(row1, col1)
    weights = [math.comb(row1, x) * math.comb(row2, col1 - x) for x in range(lo, hi + 1)]
    observed = weights[a - lo]
    num = sum(w for w in weights if w <= observed)
    p = Fraction(num, math.comb(row1 + row2, col1))
    return FisherResult(statistic=float(odds), pvalue=float(min(p, Fraction(1))), method=method)


def mcnemar_exact(a_only: int, b_only: int) -> McNemarResult:
    """Exact McNemar test from the discordant pair counts.

    Parameters
    ----------
    a_only : int
        Pairs where arm A had the outcome and B did not.
    b_only : int
        Pairs where arm B had the outcome and A did not.

    Returns
    -------
    res : McNemarResult
        ``statistic`` (``min(a_only, b_only)``, the binomial count), two-sided
        ``pvalue``, ``method``, and the two counts.

    Notes
    -----
    Under the null each discordant pair is equally likely to fall either way,
    so p = min(1, 2 · P(Binomial(a_only + b_only, ½) ≤ min)) — the two-sided
    ``scipy.stats.binomtest`` p for p = ½ (exact integers up to
    ``EXACT_INT_MAX`` pairs, log space above). No
    discordant pairs gives p = 1. Assumes pairs are independent of each other.

    References
    ----------
    .. [1] Q. McNemar, "Note on the sampling error of the difference between
           correlated proportions or percentages", Psychometrika 12(2),
           153–157, 1947.
    """
    if a_only < 0 or b_only < 0 or int(a_only) != a_only or int(b_only) != b_only:
        raise ValueError("discordant counts must be non-negative integers")
    a_only, b_only = int(a_only), int(b_only)
    m = a_only + b_only
    k = min(a_only, b_only)
    if m == 0:
        p = Fraction(1)
    elif m > EXACT_INT_MAX:
        p = Fraction(min(1.0, 2.0 * D.binom_half_lower(k, m)))
    else:
        p = min(Fraction(1), Fraction(2 * sum(math.comb(m, i) for i in range(k + 1)), 2**m))
    return McNemarResult(
        statistic=float(k), pvalue=float(p), a_only=a_only, b_only=b_only,
        method="exact McNemar test (two-sided binomial(1/2) on discordant pairs)",
    )

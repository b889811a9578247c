"""Run-to-run consistency: pass^k, the chance that k runs of a case all succeed.

Why this exists: a rate of 80% can mean every case passes four runs in five, or
four cases in five pass every run and one never does. An agent that is deployed
once per request needs the second reading. pass^k (tau-bench's estimator) is, per
case with c successes in n runs, C(c, k) / C(n, k) — the chance that k runs drawn
without replacement from the n observed all succeed, unbiased for p_case^k — and
the report averages it over cases. The case is the unit: the interval is a t
interval over the per-case estimates (cases independent, k − 1 df), so it widens
with few cases, not with few trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np
from numpy.typing import ArrayLike

from stats import intervals as I
from stats._clusters import as_counts, factorize_clusters
from stats.results import ConfidenceInterval

__all__ = ["PassHatKResult", "pass_hat_k"]


@dataclass(frozen=True)
class PassHatKResult:
    """pass^k averaged over cases (``stats.pass_hat_k``).

    Attributes
    ----------
    k : int
        Runs that must all succeed.
    statistic : float
        Mean over cases of C(c, k) / C(n, k) (NaN when no case has k runs).
    confidence_interval : ConfidenceInterval
        t interval over the cases' estimates, clipped to [0, 1].
    standard_error : float
        Standard error of the mean over cases.
    n_cases : int
        Cases with at least k runs (the others cannot say anything about k).
    method : str
        Readable description.
    """

    k: int
    statistic: float
    confidence_interval: ConfidenceInterval
    standard_error: float
    n_cases: int
    method: str


def pass_hat_k(
    case: ArrayLike,
    successes: ArrayLike,
    runs: ArrayLike,
    k: int,
    *,
    confidence_level: float = 0.95,
) -> PassHatKResult:
    """pass^k: per case C(c, k) / C(n, k) for c successes in n runs, averaged over cases, with a case interval.

    Parameters
    ----------
    case : array_like, shape (cells,)
        Case id of each cell; cells of one case (e.g. its conditions) are pooled.
    successes, runs : array_like of int, shape (cells,)
        Successful runs and scored runs of each cell, ``0 <= successes <= runs``.
    k : int
        Number of runs that must all succeed, ``k >= 1``.
    confidence_level : float, default 0.95
        Two-sided level of the interval.

    Returns
    -------
    res : PassHatKResult
        ``statistic``, ``confidence_interval``, ``standard_error``, ``n_cases``
        (cases with at least k runs; the rest are left out), ``k``, ``method``.

    Notes
    -----
    C(c, k) / C(n, k) is the fraction of the C(n, k) subsets of k of the case's
    n runs in which every run succeeded; its expectation is p^k when the runs
    are independent with success probability p. k = 1 gives the pooled-by-case
    success rate; k = n gives the share of cases that succeeded in every run.
    The interval is mean ± t_{m−1} · sd / √m over the m cases, clipped to
    [0, 1] (NaN with fewer than 2 cases; a zero-width interval when every case
    has the same estimate).

    References
    ----------
    .. [1] S. Yao, N. Shinn, P. Razavi and K. Narasimhan, "τ-bench: A Benchmark
           for Tool-Agent-User Interaction in Real-World Domains", 2024
           (arXiv:2406.12045), pass^k.

    Examples
    --------
    >>> import stats
    >>> round(stats.pass_hat_k(["a", "b"], [4, 2], [4, 4], 2).statistic, 4)
    0.5833
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    k = int(k)
    codes, uniques = factorize_clusters(case)
    c, n = as_counts(successes, runs, codes.size)
    m = uniques.size
    c_case = np.bincount(codes, c, m).astype(np.int64)
    n_case = np.bincount(codes, n, m).astype(np.int64)
    keep = n_case >= k
    est = np.array([comb(int(ci), k) / comb(int(ni), k) for ci, ni in zip(c_case[keep], n_case[keep], strict=True)],
                   dtype=np.float64)
    cases = int(est.size)
    method = (f"pass^{k}: C(c, {k}) / C(n, {k}) per case, mean over {cases} cases, t interval over cases "
              f"({max(cases - 1, 0)} df)")
    if cases == 0:
        nan = float("nan")
        return PassHatKResult(k, nan, ConfidenceInterval(nan, nan), nan, 0, method)
    mean = float(est.mean())
    var = float(est.var(ddof=1) / cases) if cases > 1 else float("nan")
    lo, hi = I.t_interval(np.array([mean]), np.array([var]), np.array([cases]), confidence_level)
    ci = ConfidenceInterval(float(np.clip(lo[0], 0.0, 1.0)), float(np.clip(hi[0], 0.0, 1.0)))
    return PassHatKResult(k, mean, ci, float(np.sqrt(var)), cases, method)

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

__all__ = ["PassHatKCurve", "PassHatKResult", "pass_hat_k", "pass_hat_k_curve"]


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


_EXACT_RUNS = 400  # runs a case up to which exact binomial ratios cost little (≈ 10 ms a cell)


@dataclass(frozen=True)
class PassHatKCurve:
    """pass^k for every k = 1 … ``k_max`` at once (``stats.pass_hat_k_curve``); arrays indexed by k − 1, each
    entry what ``pass_hat_k`` returns for that k (to float rounding).

    Attributes
    ----------
    k : ndarray of int
        1 … k_max.
    statistic : ndarray of float
        Mean over cases of C(c, k) / C(n, k) at each k (NaN where no case has k runs).
    low, high : ndarray of float
        The t interval over cases at each k, clipped to [0, 1].
    standard_error : ndarray of float
        Standard error of the mean over cases at each k.
    n_cases : ndarray of int
        Cases with at least k runs at each k.
    """

    k: np.ndarray
    statistic: np.ndarray
    low: np.ndarray
    high: np.ndarray
    standard_error: np.ndarray
    n_cases: np.ndarray


def pass_hat_k_curve(case: ArrayLike, successes: ArrayLike, runs: ArrayLike, k_max: int, *,
                     confidence_level: float = 0.95) -> PassHatKCurve:
    """``pass_hat_k`` for k = 1 … ``k_max`` in one pass.

    Parameters
    ----------
    case : array_like, shape (cells,)
        Case id of each cell; cells of one case are pooled, as in ``pass_hat_k``.
    successes, runs : array_like of int, shape (cells,)
        Successful runs and scored runs of each cell, ``0 <= successes <= runs``.
    k_max : int
        The largest k, ``k_max >= 1``.
    confidence_level : float, default 0.95
        Two-sided level of each k's interval.

    Returns
    -------
    res : PassHatKCurve
        Arrays indexed by k − 1: ``k``, ``statistic``, ``low``, ``high``, ``standard_error``, ``n_cases`` (cases
        with at least k runs), each what ``pass_hat_k`` gives at that k.

    Notes
    -----
    C(c, k) / C(n, k) = ∏_{i<k} (c − i) / (n − i). A report tabulates k up to the most runs a case has, which grows
    with the output; exact binomial coefficients of big integers cost ≈ k_max² big-number operations per case
    (25 CPU s at 2,600 runs a case). Here the per-case estimates of every k are one cumulative product,
    O(cases × k_max) floats; each equals the exact ratio to within k_max float roundings (relative error
    ≲ k_max · 2⁻⁵³). Up to ``_EXACT_RUNS`` runs a case the exact ratios are used (cheap there), so small designs
    get ``pass_hat_k``'s figures to the last bit. The mean, standard error and t interval over cases at each k are
    ``pass_hat_k``'s.
    """
    if int(k_max) != k_max or k_max < 1:
        raise ValueError(f"k_max must be a positive integer, got {k_max!r}")
    k_max = int(k_max)
    codes, uniques = factorize_clusters(case)
    c, n = as_counts(successes, runs, codes.size)
    m = uniques.size
    c_case = np.bincount(codes, c, m).astype(np.float64)
    n_case = np.bincount(codes, n, m).astype(np.float64)
    i = np.arange(k_max, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.clip(c_case[:, None] - i, 0.0, None) / (n_case[:, None] - i)
    keep = n_case[:, None] >= i + 1  # (case, k): the case has at least k runs
    if n_case.max(initial=0) <= _EXACT_RUNS:  # small designs: the exact ratio, as ``pass_hat_k`` gives it
        est = np.zeros((m, k_max))
        for row, (ci, ni) in enumerate(zip(c_case.astype(np.int64), n_case.astype(np.int64), strict=True)):
            top = min(int(ni), k_max)
            est[row, :top] = [comb(int(ci), k) / comb(int(ni), k) for k in range(1, top + 1)]
    else:
        est = np.where(keep, np.cumprod(np.where(keep, factors, 1.0), axis=1), 0.0)
    cases = keep.sum(axis=0)
    if n_case.max(initial=0) <= _EXACT_RUNS:  # and ``pass_hat_k``'s own reductions, k by k
        mean, var = np.full(k_max, np.nan), np.full(k_max, np.nan)
        for k in range(k_max):
            kept = est[keep[:, k], k]
            if kept.size:
                mean[k] = float(kept.mean())
            if kept.size > 1:
                var[k] = float(kept.var(ddof=1) / kept.size)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(cases > 0, est.sum(axis=0) / np.maximum(cases, 1), np.nan)
            dev = np.where(keep, est - mean, 0.0)
            var = np.where(cases > 1, (dev * dev).sum(axis=0) / np.maximum(cases - 1, 1) / np.maximum(cases, 1),
                           np.nan)
    lo, hi = I.t_interval(mean, var, cases, confidence_level)
    return PassHatKCurve(np.arange(1, k_max + 1), mean, np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0),
                         np.sqrt(var), cases.astype(np.int64))

"""Agreement and association between two sets of labels or scores.

Why this exists: judges are validated by their agreement with reference
labels (Cohen's kappa), and per-model measures are compared by rank
(Spearman's rho). Both come with uncertainty computed the same way as the
rest of the package: a cluster bootstrap for kappa, an exact permutation
distribution (or a seeded Monte Carlo one) for Spearman.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from stats import _draws as D
from stats import _kernels as K
from stats._clusters import factorize_clusters
from stats._rng import SeedLike, kernel_seed
from stats.bootstrap import percentile_interval, resample_clusters
from stats.results import KappaResult, SpearmanResult

_SPEARMAN_EXACT_MAX_N = 10
_SPEARMAN_DEFAULT_DRAWS = 20_000


def _labels(x: ArrayLike, name: str) -> list[object]:
    values = list(np.asarray(x, dtype=object).ravel())
    for i, v in enumerate(values):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"{name} label at position {i} is missing")
    return values


def _kappa_from_counts(conf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kappa, observed and expected agreement for stacked flattened confusion matrices."""
    q = round(math.sqrt(conf.shape[-1]))
    m = conf.reshape(conf.shape[:-1] + (q, q))
    total = m.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        po = np.trace(m, axis1=-2, axis2=-1) / total
        pe = np.sum(m.sum(axis=-1) * m.sum(axis=-2), axis=-1) / (total * total)
        kappa = np.where(pe < 1.0, (po - pe) / (1.0 - pe), np.nan)
    return kappa, po, pe


def cohen_kappa(
    rater1: ArrayLike,
    rater2: ArrayLike,
    *,
    cluster: ArrayLike | None = None,
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
) -> KappaResult:
    """Cohen's kappa between two raters' labels on the same items, with a cluster bootstrap interval.

    Parameters
    ----------
    rater1, rater2 : array_like, shape (items,)
        The two raters' labels of the same items, aligned (any hashable labels).
    cluster : array_like, shape (items,), optional
        Cluster of each item for the bootstrap (default: every item its own cluster).
    n_resamples : int, default 4000
        Cluster resamples of the percentile interval.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).
    seed : None, int, or numpy.random.Generator, optional
        Seed of the resampling.

    Returns
    -------
    res : KappaResult
        ``statistic`` (kappa), ``confidence_interval``, ``observed_agreement``
        (p_o), ``expected_agreement`` (p_e), ``method``, ``n`` items and
        ``n_resamples``.

    Notes
    -----
    kappa = (p_o − p_e) / (1 − p_e), p_o the observed agreement, p_e the
    agreement expected from the two raters' marginal label frequencies
    (unweighted). The interval is a percentile bootstrap resampling clusters
    of items with replacement. Kappa is undefined (NaN) when p_e = 1, i.e.
    both raters always give the same single label; such resamples are
    excluded from the percentiles. As ``sklearn.metrics.cohen_kappa_score``
    for the statistic.

    References
    ----------
    .. [1] J. Cohen, "A coefficient of agreement for nominal scales",
           Educational and Psychological Measurement 20(1), 37–46, 1960.
    """
    r1 = _labels(rater1, "rater1")
    r2 = _labels(rater2, "rater2")
    if len(r1) != len(r2):
        raise ValueError(f"raters must label the same items, got {len(r1)} and {len(r2)} labels")
    cats = {v: i for i, v in enumerate(dict.fromkeys(r1 + r2))}
    q = max(len(cats), 1)
    cell = np.array([cats[x] * q + cats[y] for x, y in zip(r1, r2, strict=True)], dtype=np.int64)
    if cluster is None:
        codes = np.arange(len(r1), dtype=np.int64)
        k = len(r1)
    else:
        codes, uniques = factorize_clusters(cluster)
        if codes.size != len(r1):
            raise ValueError("cluster must have one entry per item")
        k = uniques.size
    per_cluster = np.zeros((k, q * q))
    np.add.at(per_cluster, (codes, cell), 1.0)
    kappa, po, pe = _kappa_from_counts(per_cluster.sum(axis=0))
    if k:
        dist, _, _ = _kappa_from_counts(resample_clusters(per_cluster, n_resamples, seed))
    else:
        dist = np.array([])
    return KappaResult(
        statistic=float(kappa), observed_agreement=float(po), expected_agreement=float(pe),
        confidence_interval=percentile_interval(dist, confidence_level),
        method=f"Cohen's kappa (unweighted); cluster bootstrap percentile interval, {int(n_resamples)} resamples of {k} clusters",
        n=len(r1), n_resamples=int(n_resamples),
    )


def average_ranks(x: ArrayLike) -> np.ndarray:
    """Ranks 1..n with ties given their average rank, as ``scipy.stats.rankdata(method="average")``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Values to rank; NaN is refused (``ValueError``).

    Returns
    -------
    ranks : numpy.ndarray of float64, shape (n,)
        The rank of each value, ties sharing the mean of the ranks they span.

    Notes
    -----
    A stable sort, then each run of equal values gets (first + last) / 2 of
    the ranks it spans: the ranks Spearman's rho correlates.
    """
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError("expected a 1-D array")
    if np.any(np.isnan(v)):
        raise ValueError("input contains NaN")
    order = np.argsort(v, kind="mergesort")
    sv = v[order]
    first = np.concatenate([[True], sv[1:] != sv[:-1]])
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    ends = np.concatenate([starts[1:], [v.size]])
    ranks = np.empty(v.size)
    ranks[order] = ((starts + 1 + ends) / 2.0)[group]
    return ranks


def spearman(
    x: ArrayLike,
    y: ArrayLike,
    *,
    n_resamples: int | None = None,
    seed: SeedLike = None,
) -> SpearmanResult:
    """Spearman's rank correlation rho with an exact or Monte Carlo permutation p.

    Parameters
    ----------
    x, y : array_like, shape (n,)
        Paired observations, n ≥ 2.
    n_resamples : int, optional
        Monte Carlo draws of the permutation p. None (default): exact for
        n ≤ 10, else 20,000 draws.
    seed : None, int, or numpy.random.Generator, optional
        Seed of the Monte Carlo draws.

    Returns
    -------
    res : SpearmanResult
        ``statistic`` (rho), two-sided ``pvalue``, ``method``, ``n``, and
        ``n_resamples`` / ``mc_stderr`` (None when the p is exact).

    Notes
    -----
    rho is the Pearson correlation of the average ranks. The p-value is the
    share of pairings of x with a permutation of y whose |rho| is at least the
    observed |rho|: exact over all n! pairings, or Monte Carlo with
    p = (b + 1) / (R + 1). Ranks are compared as integers (doubled average
    ranks), so ties in rho are exact. A constant input has no ranks to
    correlate: rho and p are NaN, as in ``scipy.stats.spearmanr``. Assumes
    the pairs are exchangeable under the null of no association.

    References
    ----------
    .. [1] C. Spearman, "The proof and measurement of association between two
           things", American Journal of Psychology 15(1), 72–101, 1904.
    .. [2] B. Phipson and G. K. Smyth, "Permutation p-values should never be
           zero", Statistical Applications in Genetics and Molecular Biology
           9(1), 2010 (the (b + 1) / (R + 1) estimate).
    """
    xv = np.asarray(x, dtype=np.float64)
    yv = np.asarray(y, dtype=np.float64)
    if xv.shape != yv.shape or xv.ndim != 1:
        raise ValueError("x and y must be 1-D and the same length")
    n = xv.size
    if n < 2:
        raise ValueError("spearman needs at least 2 pairs")
    rx = np.rint(2 * average_ranks(xv)).astype(np.int64)
    ry = np.rint(2 * average_ranks(yv)).astype(np.int64)
    sx, sy = int(rx.sum()), int(ry.sum())
    vx = n * int(rx @ rx) - sx * sx
    vy = n * int(ry @ ry) - sy * sy
    if vx == 0 or vy == 0:
        return SpearmanResult(statistic=float("nan"), pvalue=float("nan"), n=n, n_resamples=None, mc_stderr=None,
                              method="Spearman rank correlation: constant input, undefined")
    cov = n * int(rx @ ry) - sx * sy
    rho = cov / math.sqrt(vx) / math.sqrt(vy)
    rho = max(-1.0, min(1.0, rho))
    target = abs(cov)
    if n_resamples is None and n <= _SPEARMAN_EXACT_MAX_N:
        count, total = K.spearman_exact_count(rx, ry, target)
        return SpearmanResult(statistic=rho, pvalue=float(count / total), n=n, n_resamples=None, mc_stderr=None,
                              method=f"Spearman rank correlation; exact permutation p over all {total} pairings")
    r = int(n_resamples) if n_resamples is not None else _SPEARMAN_DEFAULT_DRAWS
    if r < 1:
        raise ValueError("n_resamples must be a positive integer")
    count = int(D.spearman_mc_count(rx, ry, target, r, kernel_seed(seed)))
    p = (count + 1) / (r + 1)
    return SpearmanResult(statistic=rho, pvalue=p, n=n, n_resamples=r, mc_stderr=math.sqrt(p * (1 - p) / r),
                          method=f"Spearman rank correlation; Monte Carlo permutation p, {r} draws")

"""Paired difference between two arms run on the same units.

Why this exists: when both arms ran on the same tasks (an intervention and
its concurrent control), pairing by task removes the between-task variance,
which an unpaired comparison leaves in. The interval resamples units (or the
clusters the units belong to) with both arms kept together; the test is the
exact McNemar test on the discordant pairs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from stats._clusters import factorize_clusters
from stats._rng import SeedLike
from stats.bootstrap import percentile_interval, resample_clusters
from stats.contingency import mcnemar_exact
from stats.results import PairedDifferenceResult


def _binary(x: ArrayLike, name: str) -> np.ndarray:
    v = np.asarray(x)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D")
    if v.dtype.kind == "f" and not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains a missing value")
    if not np.all((v == 0) | (v == 1)):
        raise ValueError(f"{name} must hold 0/1 outcomes")
    return v.astype(np.int64)


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    *,
    cluster: ArrayLike | None = None,
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
) -> PairedDifferenceResult:
    """Rate of A minus rate of B over aligned pairs, with a cluster bootstrap interval and exact McNemar.

    Parameters
    ----------
    a, b : array_like of {0, 1}, shape (pairs,)
        ``a[i]`` and ``b[i]`` are the outcomes of the two arms on the same
        unit (align them by unit id first).
    cluster : array_like, shape (pairs,), optional
        Groups pairs into clusters for the bootstrap (default: every pair is
        its own cluster).
    n_resamples : int, default 4000
        Cluster resamples of the percentile interval.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).
    seed : None, int, or numpy.random.Generator, optional
        Seed of the resampling.

    Returns
    -------
    res : PairedDifferenceResult
        ``statistic`` (rate A − rate B), ``rate_a``, ``rate_b``,
        ``confidence_interval``, ``mcnemar`` (a ``McNemarResult``),
        ``method``, ``n_pairs``, ``n_clusters`` and ``n_resamples``.

    Notes
    -----
    The interval is a percentile bootstrap that resamples clusters of pairs
    with replacement, both arms together, so the pairing is kept; the p-value
    is the exact McNemar test on discordant pairs (which assumes pairs
    independent). No pairs gives NaN statistic and interval and McNemar p = 1.

    References
    ----------
    .. [1] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap",
           Chapman & Hall, 1993, ch. 13 (percentile interval).
    .. [2] Q. McNemar, Psychometrika 12(2), 153–157, 1947.
    """
    av = _binary(a, "a")
    bv = _binary(b, "b")
    if av.size != bv.size:
        raise ValueError(f"a and b must be aligned pairs, got {av.size} and {bv.size} entries")
    if cluster is None:
        codes = np.arange(av.size, dtype=np.int64)
        k = av.size
    else:
        codes, uniques = factorize_clusters(cluster)
        if codes.size != av.size:
            raise ValueError("cluster must have one entry per pair")
        k = uniques.size
    values = np.column_stack([
        np.bincount(codes, av, k), np.bincount(codes, bv, k), np.bincount(codes, minlength=k).astype(np.float64)
    ])
    mc = mcnemar_exact(int(np.sum((av == 1) & (bv == 0))), int(np.sum((av == 0) & (bv == 1))))
    if av.size == 0:
        nan = float("nan")
        return PairedDifferenceResult(
            statistic=nan, rate_a=nan, rate_b=nan, confidence_interval=percentile_interval(np.array([]), confidence_level),
            mcnemar=mc, method="paired difference: no pairs", n_pairs=0, n_clusters=0, n_resamples=int(n_resamples),
        )
    sums = resample_clusters(values, n_resamples, seed)
    dist = (sums[:, 0] - sums[:, 1]) / sums[:, 2]
    rate_a, rate_b = av.mean(), bv.mean()
    return PairedDifferenceResult(
        statistic=float(rate_a - rate_b), rate_a=float(rate_a), rate_b=float(rate_b),
        confidence_interval=percentile_interval(dist, confidence_level), mcnemar=mc,
        method=(f"paired difference A − B; cluster bootstrap percentile interval ({int(n_resamples)} resamples "
                f"of {k} clusters, arms kept together); exact McNemar p"),
        n_pairs=int(av.size), n_clusters=int(k), n_resamples=int(n_resamples),
    )

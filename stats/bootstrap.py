"""Cluster bootstrap percentile intervals for a pooled rate or an A − B difference.

Why this exists: with a dozen prompts the uncertainty that matters is which
prompts happened to be chosen, so whole clusters are resampled with
replacement, never trials. For a difference, clusters are resampled once and
both arms are read off the same resample, which keeps the within-prompt
pairing of the arms.

Percentiles are taken with numpy's default (linear interpolation between
order statistics, "type 7"), which is what ``scipy.stats.bootstrap`` uses for
``method="percentile"``; the lower bound is the α/2 quantile and the upper the
1 − α/2 quantile of the resampled statistics (the ``ungrounded`` package reads
the order statistic one place too high at both ends).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from stats import _kernels as K
from stats._clusters import cluster_table
from stats._rng import SeedLike, kernel_seed
from stats.results import BootstrapResult, ConfidenceInterval


def percentile_interval(values: np.ndarray, confidence_level: float) -> ConfidenceInterval:
    """Percentile interval of the finite ``values`` (NaN, NaN if none are finite)."""
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    v = values[np.isfinite(values)]
    if v.size == 0:
        return ConfidenceInterval(float("nan"), float("nan"))
    alpha = 1.0 - confidence_level
    lo, hi = np.percentile(v, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return ConfidenceInterval(float(lo), float(hi))


def resample_clusters(values: np.ndarray, n_resamples: int, seed: SeedLike) -> np.ndarray:
    """(n_resamples × d) sums of per-cluster rows over clusters drawn with replacement."""
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")
    return K.resample_cluster_sums(np.ascontiguousarray(values, dtype=np.float64), int(n_resamples), kernel_seed(seed))


def cluster_bootstrap_ci(
    cluster: ArrayLike,
    hits: ArrayLike,
    n: ArrayLike,
    *,
    arm: ArrayLike | None = None,
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
) -> BootstrapResult:
    """Cluster bootstrap percentile interval of a pooled rate, or of A − B with ``arm``.

    Inputs are per-cell arrays (cluster id, hits, trials; optionally arm with
    1 = A, 0 = B); cells of one cluster are pooled. Each resample draws as many
    clusters as observed, with replacement, and computes the pooled rate
    Σhits / Σtrials (or rate A − rate B, both from the same drawn clusters).

    Assumptions: clusters are independent and exchangeable draws from the
    population of prompts; the percentile interval is adequate when the
    bootstrap distribution is not badly skewed and there are enough clusters
    (with few clusters it under-covers somewhat).

    Edge cases: no trials at all gives statistic NaN and a (NaN, NaN)
    interval. A resample in which an arm has no trials has an undefined
    statistic: it is stored as NaN, excluded from the percentiles and counted
    in ``n_undefined``. A single cluster gives a zero-width interval.
    """
    _, hk, nk = cluster_table(cluster, hits, n, arm)
    if arm is None:
        values = np.column_stack([hk[:, 0], nk[:, 0]])
    else:
        values = np.column_stack([hk[:, 1], nk[:, 1], hk[:, 0], nk[:, 0]])
    k = values.shape[0]
    sums = resample_clusters(values, n_resamples, seed) if k else np.full((int(n_resamples), values.shape[1]), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if arm is None:
            tot_n = values[:, 1].sum()
            statistic = values[:, 0].sum() / tot_n if tot_n else float("nan")
            dist = np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan)
            what = "pooled rate"
        else:
            na, nb = values[:, 1].sum(), values[:, 3].sum()
            statistic = values[:, 0].sum() / na - values[:, 2].sum() / nb if na and nb else float("nan")
            ok = (sums[:, 1] > 0) & (sums[:, 3] > 0)
            dist = np.where(ok, sums[:, 0] / sums[:, 1] - sums[:, 2] / sums[:, 3], np.nan)
            what = "difference of pooled rates A − B (clusters resampled once for both arms)"
    ci = percentile_interval(dist, confidence_level)
    finite = dist[np.isfinite(dist)]
    return BootstrapResult(
        statistic=float(statistic),
        confidence_interval=ci,
        standard_error=float(finite.std(ddof=1)) if finite.size > 1 else float("nan"),
        method=f"cluster bootstrap percentile interval of the {what}, {int(n_resamples)} resamples of {k} clusters",
        n_resamples=int(n_resamples),
        n_clusters=int(k),
        n_undefined=int(dist.size - finite.size),
        bootstrap_distribution=dist,
    )

"""The cluster bootstrap: clusters resampled with replacement, and the percentile interval read off them.

This is the one place in ``stats`` that draws resamples. It serves
``stats.cluster_rate_ci(..., method="percentile")`` and
``stats.cluster_rate_ci_many(..., method="percentile")`` (the analytic
default intervals, which draw none, are in ``stats.cluster_intervals``), and
``stats.paired_difference`` and ``stats.cohen_kappa``, whose intervals are
percentile bootstraps.

Why whole clusters: with a dozen prompts the uncertainty that matters is which
prompts happened to be chosen, so whole clusters are resampled with
replacement, never trials. For a difference, clusters are resampled once and
both arms are read off the same resample, which keeps the within-prompt
pairing of the arms. The simulation study benchmarks/interval_coverage.py
(docs/statistics-coverage.md) shows that the percentile interval under-covers
with few prompts (30–90% at 6–12 prompts), which is why it is not the default.

Percentiles are taken with numpy's default (linear interpolation between
order statistics, "type 7"), which is what ``scipy.stats.bootstrap`` uses for
``method="percentile"``; the lower bound is the α/2 quantile and the upper the
1 − α/2 quantile of the resampled statistics (the ``ungrounded`` package reads
the order statistic one place too high at both ends).
"""

from __future__ import annotations

import numpy as np

from stats import _draws as D
from stats._rng import SeedLike, kernel_seed
from stats.results import ClusterIntervalResult, ConfidenceInterval


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


#: cap on the count-matrix chunk (elements), so memory stays ~32 MB whatever the number of clusters
CHUNK_ELEMENTS = 1 << 23
#: up to this many value columns the sums are accumulated directly (same draws, same sums)
DIRECT_MAX_COLUMNS = 4
_F32_EXACT = float(1 << 24)


def resample_clusters(values: np.ndarray, n_resamples: int, seed: SeedLike) -> np.ndarray:
    """(n_resamples × d) sums of per-cluster rows over clusters drawn with replacement.

    Resample r draws k clusters with replacement (its own random stream, a hash of
    the seed and r) and is stored as a row of draw counts; a chunk of such rows
    times the (k × d) values is one BLAS matrix product. In single precision
    when that is exact (whole-number values with k·max|value| < 2**24, so every
    partial sum is an exactly representable integer), else in double. With at
    most ``DIRECT_MAX_COLUMNS`` columns the rows are instead added as clusters
    are drawn (``_draws.bootstrap_sums_direct``), which is faster there; both
    paths use the same draws and give identical sums for whole-number values
    (tests check this).
    """
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")
    r = int(n_resamples)
    v = np.ascontiguousarray(values, dtype=np.float64)
    k, d = v.shape
    out = np.zeros((r, d), np.float64)
    if k == 0:
        return out
    if k >= 2**31:
        raise ValueError("too many clusters")
    s = kernel_seed(seed)
    if d <= DIRECT_MAX_COLUMNS:  # few columns: adding rows as clusters are drawn beats the matrix product
        direct = D.bootstrap_sums_direct if k * r >= 1 << 21 else D.bootstrap_sums_direct_serial
        return direct(v, r, s)
    exact32 = bool(np.all(v == np.round(v))) and k * float(np.abs(v).max(initial=0.0)) < _F32_EXACT
    vv = v.astype(np.float32) if exact32 else v
    rows = max(1, min(r, CHUNK_ELEMENTS // k))
    buf = np.zeros((rows, k), np.float32)
    for r0 in range(0, r, rows):
        b = buf[: min(rows, r - r0)]
        b.fill(0.0)
        D.bootstrap_counts(k, r0, b, s)
        out[r0:r0 + b.shape[0]] = b @ vv if exact32 else b.astype(np.float64) @ v
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _result(statistic: float, dist: np.ndarray, confidence_level: float, what: str, r: int, k: int,
            shared: str = "") -> ClusterIntervalResult:
    """The percentile interval's result."""
    ci = percentile_interval(dist, confidence_level)
    finite = dist[np.isfinite(dist)]
    return ClusterIntervalResult(
        statistic=float(statistic),
        confidence_interval=ci,
        standard_error=float(finite.std(ddof=1)) if finite.size > 1 else float("nan"),
        method=f"cluster bootstrap percentile interval of the {what}, {r} resamples of {k} clusters{shared}",
        n_resamples=r,
        n_clusters=int(k),
        n_undefined=int(dist.size - finite.size),
        bootstrap_distribution=dist,
        interval_method="percentile",
    )


def percentile_rate(values: np.ndarray, difference: bool, n_resamples: int, confidence_level: float,
                    seed: SeedLike) -> ClusterIntervalResult:
    """Percentile interval of one pooled rate, or of A − B, from per-cluster (k × 2) or (k × 4) counts.

    ``values`` holds per cluster (hits, trials), or with ``difference`` (hits A, trials A, hits B,
    trials B); each resample draws as many clusters as observed, with replacement, and computes
    Σhits / Σtrials (or rate A − rate B, both from the same drawn clusters).
    """
    k = values.shape[0]
    r = int(n_resamples)
    sums = resample_clusters(values, r, seed)
    tot = values.sum(axis=0)
    if not difference:
        statistic = tot[0] / tot[1] if tot[1] else float("nan")
        dist = _ratio(sums[:, 0], sums[:, 1])
        what = "pooled rate"
    else:
        statistic = tot[0] / tot[1] - tot[2] / tot[3] if tot[1] and tot[3] else float("nan")
        dist = _ratio(sums[:, 0], sums[:, 1]) - _ratio(sums[:, 2], sums[:, 3])
        what = "difference of pooled rates A − B (clusters resampled once for both arms)"
    return _result(statistic, dist, confidence_level, what, r, k)


def percentile_many(cols_h: list[np.ndarray], cols_n: list[np.ndarray], k: int,
                    pairs: list[tuple[list[int], list[int]]], n_resamples: int, confidence_level: float,
                    seed: SeedLike) -> tuple[ClusterIntervalResult, ...]:
    """Percentile intervals of d pooled rates and of the differences ``pairs`` from one shared resample.

    ``cols_h`` / ``cols_n`` are the d columns of hits and trials of the ``k`` clusters; a side of a
    pair lists columns pooled into one arm. Identical columns (e.g. a shared n) are resampled once.
    """
    d = len(cols_h)
    values = np.column_stack(cols_h + cols_n) if d else np.zeros((k, 0))
    r = int(n_resamples)
    first: dict[bytes, int] = {}  # identical columns (e.g. a shared n) are resampled once
    inverse = np.array([first.setdefault(values[:, j].tobytes(), len(first)) for j in range(2 * d)], np.int64)
    distinct = np.unique(inverse, return_index=True)[1]  # first column of each distinct code, in code order
    sums = resample_clusters(values[:, distinct], r, seed)[:, inverse]
    tot = values.sum(axis=0)
    rates = [_ratio(sums[:, j], sums[:, d + j]) for j in range(d)]

    def pooled(side: list[int]) -> tuple[np.ndarray, float, float]:
        num, den = sums[:, side].sum(axis=1), sums[:, [d + j for j in side]].sum(axis=1)
        return _ratio(num, den), float(tot[side].sum()), float(tot[[d + j for j in side]].sum())

    shared = f" (one resample shared by {d} rate{'s' if d != 1 else ''}" + (
        f" and {len(pairs)} difference{'s' if len(pairs) != 1 else ''})" if pairs else ")")
    out = []
    for j in range(d):
        stat = tot[j] / tot[d + j] if tot[d + j] else float("nan")
        out.append(_result(stat, rates[j], confidence_level, "pooled rate", r, k, shared))
    for a, b in pairs:
        (dist_a, ha, na), (dist_b, hb, nb) = pooled(a), pooled(b)
        stat = ha / na - hb / nb if na and nb else float("nan")
        out.append(_result(stat, dist_a - dist_b, confidence_level,
                           "difference of pooled rates A − B (clusters resampled once for both arms)", r, k, shared))
    return tuple(out)

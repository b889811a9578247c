"""Cluster intervals for a pooled rate or an A − B difference: tilted Korn–Graubard (default), Korn–Graubard, t, bootstrap percentile.

The default interval (``method="korn-graubard-tilted"``) was chosen by the
simulation study benchmarks/interval_coverage.py (table and discussion in
docs/statistics-coverage.md): the percentile interval below covers only
30–90% at 6–12 prompts, while the tilted Korn–Graubard interval for a rate
(Clopper–Pearson at the effective trials, tails split α(½ ± 0.1(1 − 2r))), and
the MOVER combination of the arms' tilted intervals for a difference, stay at
or above 94% coverage in every cell of the study from 6 prompts up, at a
fraction of the cost (no resampling). ``"korn-graubard"`` is the equal-tailed
interval (the default before; it falls to 93.9–94.0% in the most skewed
cells). The formulas are in ``stats.intervals``.

Why the cluster bootstrap exists: with a dozen prompts the uncertainty that matters is which
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

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from stats import _kernels as K
from stats import intervals as I
from stats._clusters import as_counts, cluster_table, factorize_clusters
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
    are drawn (``_kernels.bootstrap_sums_direct``), which is faster there; both
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
        direct = K.bootstrap_sums_direct if k * r >= 1 << 21 else K.bootstrap_sums_direct_serial
        return direct(v, r, s)
    exact32 = bool(np.all(v == np.round(v))) and k * float(np.abs(v).max(initial=0.0)) < _F32_EXACT
    vv = v.astype(np.float32) if exact32 else v
    rows = max(1, min(r, CHUNK_ELEMENTS // k))
    buf = np.zeros((rows, k), np.float32)
    for r0 in range(0, r, rows):
        b = buf[: min(rows, r - r0)]
        b.fill(0.0)
        K.bootstrap_counts(k, r0, b, s)
        out[r0:r0 + b.shape[0]] = b @ vv if exact32 else b.astype(np.float64) @ v
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _result(statistic: float, dist: np.ndarray, confidence_level: float, what: str, r: int, k: int,
            shared: str = "") -> BootstrapResult:
    """The percentile interval's result."""
    ci = percentile_interval(dist, confidence_level)
    finite = dist[np.isfinite(dist)]
    return BootstrapResult(
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


#: the interval methods, scipy-style keys for ``method=``
METHODS = ("korn-graubard-tilted", "korn-graubard", "t", "percentile")
DEFAULT_METHOD = "korn-graubard-tilted"


def _check(method: str, n_resamples: int) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")


def _analytic(statistic: float, lo: float, hi: float, se: float, key: str, what: str, k: int) -> BootstrapResult:
    return BootstrapResult(
        statistic=float(statistic),
        confidence_interval=ConfidenceInterval(float(lo), float(hi)),
        standard_error=float(se),
        method=f"{what}, {k} clusters",
        n_resamples=0,
        n_clusters=int(k),
        n_undefined=0,
        bootstrap_distribution=np.empty(0),
        interval_method=key,
    )


def _kg(method: str, r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray,
        confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """The Korn–Graubard interval of ``method`` ("korn-graubard-tilted" or "korn-graubard")."""
    if method == "korn-graubard-tilted":
        return I.korn_graubard_tilted(r, v, N, k, confidence_level)
    return I.korn_graubard(r, v, N, k, confidence_level)


_KG_WHAT = {"korn-graubard-tilted": "tilted Korn–Graubard", "korn-graubard": "Korn–Graubard"}
_KG_TAILS = {"korn-graubard-tilted": f"α split α(½ + {I.TILT:g}(1 − 2r)) below and α(½ − {I.TILT:g}(1 − 2r)) above, ",
             "korn-graubard": ""}


def _rate_results(h: np.ndarray, n: np.ndarray, confidence_level: float, method: str) -> list[BootstrapResult]:
    """Analytic intervals of the pooled rate of each row of (columns × clusters) counts."""
    k_all = h.shape[1]
    _, N, r, v, k = I.ratio_moments(h, n)
    if method in _KG_WHAT:
        lo, hi = _kg(method, r, v, N, k, confidence_level)
    else:
        lo, hi = I.t_interval(r, v, k, confidence_level)
        lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    out = []
    for j in range(h.shape[0]):
        df = int(k[j]) - 1
        if method in _KG_WHAT:
            what = (f"{_KG_WHAT[method]} interval of the pooled rate (Clopper–Pearson at the effective number of "
                    f"trials from the cluster linearisation variance, {_KG_TAILS[method]}{df} df)")
        else:
            what = f"t interval of the pooled rate (cluster linearisation standard error, {df} df)"
        out.append(_analytic(r[j], lo[j], hi[j], np.sqrt(v[j]), method, what, k_all))
    return out


def _difference_results(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray, confidence_level: float,
                        method: str) -> list[BootstrapResult]:
    """Analytic intervals of rate A − rate B for each row of paired (rows × clusters) counts."""
    k_all = hA.shape[1]
    _, NA, rA, vA, kA = I.ratio_moments(hA, nA)
    _, NB, rB, vB, kB = I.ratio_moments(hB, nB)
    cov = I.ratio_covariance(hA, nA, hB, nB)
    k = ((np.asarray(nA) + np.asarray(nB)) > 0).sum(axis=-1).astype(np.float64).reshape(-1)
    d = rA - rB
    var = np.maximum(vA + vB - 2.0 * cov, 0.0)
    if method in _KG_WHAT:
        la, ua = _kg(method, rA, vA, NA, kA, confidence_level)
        lb, ub = _kg(method, rB, vB, NB, kB, confidence_level)
        lo, hi = I.mover(rA, la, ua, rB, lb, ub, I.correlation(vA, vB, cov))
        key = "mover-" + method
    else:
        lo, hi = I.t_interval(d, var, k, confidence_level)
        lo, hi = np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)
        key = "t"
    out = []
    for j in range(d.shape[0]):
        if method in _KG_WHAT:
            what = ("MOVER (Newcombe hybrid) interval of the difference of pooled rates A − B from the arms' "
                    f"{_KG_WHAT[method]} intervals and their cluster-estimated correlation "
                    f"({int(kA[j]) - 1} and {int(kB[j]) - 1} df)")
        else:
            what = (f"t interval of the difference of pooled rates A − B (paired cluster linearisation standard "
                    f"error, {int(k[j]) - 1} df)")
        out.append(_analytic(d[j], lo[j], hi[j], np.sqrt(var[j]), key, what, k_all))
    return out


def cluster_bootstrap_ci(
    cluster: ArrayLike,
    hits: ArrayLike,
    n: ArrayLike,
    *,
    arm: ArrayLike | None = None,
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
    method: str = DEFAULT_METHOD,
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
    _check(method, n_resamples)
    _, hk, nk = cluster_table(cluster, hits, n, arm)
    if method != "percentile":
        if arm is None:
            return _rate_results(hk[:, 0][None, :], nk[:, 0][None, :], confidence_level, method)[0]
        return _difference_results(hk[:, 1][None, :], nk[:, 1][None, :], hk[:, 0][None, :], nk[:, 0][None, :],
                                   confidence_level, method)[0]
    if arm is None:
        values = np.column_stack([hk[:, 0], nk[:, 0]])
    else:
        values = np.column_stack([hk[:, 1], nk[:, 1], hk[:, 0], nk[:, 0]])
    k = values.shape[0]
    r = int(n_resamples)
    sums = resample_clusters(values, r, seed)
    tot = values.sum(axis=0)
    if arm is None:
        statistic = tot[0] / tot[1] if tot[1] else float("nan")
        dist = _ratio(sums[:, 0], sums[:, 1])
        what = "pooled rate"
    else:
        statistic = tot[0] / tot[1] - tot[2] / tot[3] if tot[1] and tot[3] else float("nan")
        dist = _ratio(sums[:, 0], sums[:, 1]) - _ratio(sums[:, 2], sums[:, 3])
        what = "difference of pooled rates A − B (clusters resampled once for both arms)"
    return _result(statistic, dist, confidence_level, what, r, k)


def _side(side: int | Sequence[int], d: int) -> list[int]:
    cols = [int(j) for j in np.atleast_1d(side)]
    if not cols or any(not 0 <= j < d for j in cols):
        raise ValueError(f"difference side {side!r} must name columns in 0..{d - 1}")
    return cols


def cluster_bootstrap_many(
    cluster: ArrayLike,
    hits: ArrayLike,
    n: ArrayLike,
    *,
    differences: Sequence[tuple[int | Sequence[int], int | Sequence[int]]] = (),
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
    method: str = DEFAULT_METHOD,
) -> tuple[BootstrapResult, ...]:
    """Cluster bootstrap intervals of many pooled rates (and differences) from one shared resample.

    ``cluster`` has one entry per cell; ``hits`` is (cells × d) — one column per
    rate, e.g. per condition × outcome — and ``n`` is (cells × d) or (cells,)
    shared by every column. Column j's statistic is the pooled rate
    Σhits[:, j] / Σn[:, j]; each pair ``(a, b)`` in ``differences`` adds the
    interval of rate a − rate b, where a side may also be a sequence of columns
    pooled into one arm (Σ of their hits over Σ of their trials), e.g. the
    conditions of arm A. Every resample draws as many clusters as observed,
    with replacement, *once*, and all d columns (and differences) are read off
    it, so the cost is one resampling instead of d. Identical columns (e.g. an
    ``n`` shared by several rates) are resampled once.

    Each returned interval is, on its own, the cluster bootstrap percentile
    interval of ``cluster_bootstrap_ci``: with the same ``seed`` a single
    column gives exactly that function's result (with ``arm``, the difference
    of an arm-A and an arm-B column does). The intervals are dependent (they
    share resamples), which matters only if they are combined. A cluster with
    no trials in a column is still drawn for it and adds 0 / 0 (it is a prompt
    of the population that happened to have no trials there); a resample with
    no trials in a column gives NaN there, counted in ``n_undefined``.

    Returns d results (columns in order) followed by one per difference.
    """
    _check(method, n_resamples)
    codes, uniques = factorize_clusters(cluster)
    m = codes.size
    h = np.asarray(hits)
    if h.ndim == 1:
        h = h[:, None]
    nn = np.asarray(n)
    if nn.ndim == 1:
        nn = np.repeat(nn[:, None], h.shape[1], axis=1) if nn.shape == (m,) else nn
    if h.ndim != 2 or h.shape[0] != m or nn.shape != h.shape:
        raise ValueError(f"hits must be (cells × d) with one row per cell ({m}) and n (cells × d) or (cells,); "
                         f"got {h.shape} and {np.asarray(n).shape}")
    d = h.shape[1]
    k = uniques.size
    cols_h, cols_n = [], []
    for j in range(d):
        hj, nj = as_counts(h[:, j], nn[:, j], m)
        cols_h.append(np.bincount(codes, hj, k))
        cols_n.append(np.bincount(codes, nj, k))
    pairs = [(_side(a, d), _side(b, d)) for a, b in differences]
    if method != "percentile":
        hc = np.array(cols_h, dtype=np.float64).reshape(d, k)
        nc = np.array(cols_n, dtype=np.float64).reshape(d, k)
        out = _rate_results(hc, nc, confidence_level, method) if d else []
        if pairs:
            hA = np.array([hc[a].sum(axis=0) for a, _ in pairs])
            nA = np.array([nc[a].sum(axis=0) for a, _ in pairs])
            hB = np.array([hc[b].sum(axis=0) for _, b in pairs])
            nB = np.array([nc[b].sum(axis=0) for _, b in pairs])
            out += _difference_results(hA, nA, hB, nB, confidence_level, method)
        return tuple(out)
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

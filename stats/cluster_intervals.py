"""Cluster intervals of a pooled rate or an A − B difference: tilted Korn–Graubard (default), Korn–Graubard, t, percentile.

Why this exists: ``cluster_rate_ci`` and ``cluster_rate_ci_many`` are the one
entry point for every cluster interval the reports print, whatever the method.
The default (``method="korn-graubard-tilted"``) is analytic and draws no
resamples; only ``method="percentile"`` resamples clusters (``stats.bootstrap``).

The default was chosen by the simulation study benchmarks/interval_coverage.py
(table and discussion in docs/statistics-coverage.md): the percentile interval
covers only 30–90% at 6–12 prompts, while the tilted Korn–Graubard interval for
a rate (Clopper–Pearson at the effective trials, tails split
α(½ ± 0.1(1 − 2r))), and the MOVER combination of the arms' tilted intervals
for a difference, stay at or above 94% coverage in every cell of the study from
6 prompts up, at a fraction of the cost (no resampling). ``"korn-graubard"`` is
the equal-tailed interval (the default before; it falls to 93.9–94.0% in the
most skewed cells). The formulas are in ``stats.intervals``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from stats import bootstrap as B
from stats import intervals as I
from stats._clusters import as_counts, cluster_table, factorize_clusters
from stats._rng import SeedLike
from stats.results import (
    DEFAULT_METHOD,
    METHODS,
    ClusterIntervalResult,
    ConfidenceInterval,
    IntervalKey,
    IntervalMethod,
)

__all__ = ["DEFAULT_METHOD", "INTERVAL_NAMES", "METHODS", "IntervalMethod", "cluster_rate_ci",
           "cluster_rate_ci_many", "difference_results", "paired_difference_ci", "rate_results"]

#: readable name of each interval key (``ClusterIntervalResult.interval_method``), as captions print it
INTERVAL_NAMES: dict[str, str] = {
    "korn-graubard-tilted": "tilted Korn–Graubard cluster interval",
    "mover-korn-graubard-tilted": "MOVER interval from the arms' tilted Korn–Graubard intervals",
    "korn-graubard": "Korn–Graubard cluster interval",
    "mover-korn-graubard": "MOVER interval from the arms' Korn–Graubard intervals",
    "t": "cluster t interval",
    "percentile": "cluster bootstrap percentile interval",
    "paired-shaped": "paired interval of the difference (paired SE, reaches shaped by the arms' intervals)",
}


def _check(method: str, n_resamples: int) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError("n_resamples must be a positive integer")


def _analytic(statistic: float, lo: float, hi: float, se: float, key: IntervalKey, what: str,
              k: int) -> ClusterIntervalResult:
    return ClusterIntervalResult(
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
        confidence_level: float, df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Korn–Graubard interval of ``method`` ("korn-graubard-tilted" or "korn-graubard")."""
    if method == "korn-graubard-tilted":
        return I.korn_graubard_tilted(r, v, N, k, confidence_level, df=df)
    return I.korn_graubard(r, v, N, k, confidence_level, df=df)


def _df_text(df: float, k: float) -> str:
    """How the degrees of freedom were chosen, as the method string says it."""
    if not np.isfinite(df):
        return "no df: fewer than 2 clusters with trials"
    if abs(df - (k - 1.0)) < 1e-9:
        return f"{int(k) - 1} df"
    return f"{df:.1f} df (Bell–McCaffrey, from unequal cluster sizes; k − 1 = {int(k) - 1})"


def _factor_text(cA: float, cB: float) -> str:
    """The arms' Bell–McCaffrey variance factors, as the difference's method string says them (none if both 1)."""
    if cA == 1.0 and cB == 1.0:
        return ""
    return f"; arms' variances × {cA:.2f} and × {cB:.2f} (Bell–McCaffrey bias factor, from unequal cluster sizes)"


def _rate_factor_text(c: float) -> str:
    """The rate's Bell–McCaffrey variance factor, as the method string says it (nothing if 1)."""
    if c == 1.0:
        return ""
    return f"; variance × {c:.2f} (Bell–McCaffrey bias factor, from unequal cluster sizes)"


def _t_rate(r: np.ndarray, v: np.ndarray, k: np.ndarray, confidence_level: float,
            df: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The t interval of a rate, clipped to [0, 1]; the whole range [0, 1] with fewer than 2 clusters."""
    lo, hi = I.t_interval(r, v, k, confidence_level, df=df)
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    one = (k < 2) & np.isfinite(r)
    return np.where(one, 0.0, lo), np.where(one, 1.0, hi)


_ONE = ("; fewer than 2 clusters with trials in an arm, so no between-cluster variance can be estimated: "
        "the interval is the whole range its arms allow")


_KG_WHAT = {"korn-graubard-tilted": "tilted Korn–Graubard", "korn-graubard": "Korn–Graubard"}
_KG_TAILS = {"korn-graubard-tilted": f"α split α(½ + {I.TILT:g}(1 − 2r)) below and α(½ − {I.TILT:g}(1 − 2r)) above, ",
             "korn-graubard": ""}


def rate_results(h: np.ndarray, n: np.ndarray, confidence_level: float,
                 method: IntervalMethod) -> list[ClusterIntervalResult]:
    """Analytic intervals of the pooled rate of each row of (columns × clusters) counts."""
    k_all = h.shape[1]
    _, N, r, v, k = I.ratio_moments(h, n)
    df = I.design_df(n)
    # the variance carries Bell–McCaffrey's factor besides its df, as each arm of A − B does: where a few prompts
    # hold most trials the df alone leaves the rate under 94% (docs/statistics-coverage.md); 1 with equal sizes
    c = I.design_variance_factor(n)
    if method in _KG_WHAT:
        lo, hi = _kg(method, r, v * c, N, k, confidence_level, df)
    else:
        lo, hi = _t_rate(r, v, k, confidence_level, df)
    key: IntervalKey = "korn-graubard-tilted" if method == "korn-graubard-tilted" else (
        "korn-graubard" if method == "korn-graubard" else "t")
    out = []
    for j in range(h.shape[0]):
        dft = _df_text(df[j], k[j])
        if method in _KG_WHAT:
            what = (f"{_KG_WHAT[method]} interval of the pooled rate (Clopper–Pearson at the effective number of "
                    f"trials from the cluster linearisation variance, {_KG_TAILS[method]}{dft}{_rate_factor_text(c[j])})")
        else:
            what = f"t interval of the pooled rate (cluster linearisation standard error, {dft})"
        if k[j] < 2 and np.isfinite(r[j]):
            what += _ONE
        out.append(_analytic(r[j], lo[j], hi[j], np.sqrt(v[j]), key, what, k_all))
    return out


def difference_results(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray, confidence_level: float,
                       method: IntervalMethod) -> list[ClusterIntervalResult]:
    """Analytic intervals of rate A − rate B for each row of paired (rows × clusters) counts."""
    k_all = hA.shape[1]
    _, NA, rA, vA, kA = I.ratio_moments(hA, nA)
    _, NB, rB, vB, kB = I.ratio_moments(hB, nB)
    cov = I.ratio_covariance(hA, nA, hB, nB)
    k = ((np.asarray(nA) + np.asarray(nB)) > 0).sum(axis=-1).astype(np.float64).reshape(-1)
    d = rA - rB
    var = np.maximum(vA + vB - 2.0 * cov, 0.0)
    dfA, dfB = I.design_df(nA), I.design_df(nB)
    # One cluster in an arm: its interval is the whole range, and the difference's must be consistent with
    # both arms' (MOVER would cut [0, 1] − [0, 1] to a narrower, arbitrary interval): [lA − uB, uA − lB].
    one = ((kA < 2) | (kB < 2)) & np.isfinite(d)
    key: IntervalKey
    # the arms of the MOVER difference carry Bell–McCaffrey's variance factor besides its df: with a few big
    # prompts the df alone leaves A − B under 94% (docs/statistics-coverage.md); it is 1 with equal sizes
    cA, cB = I.design_variance_factor(nA), I.design_variance_factor(nB)
    if method in _KG_WHAT:
        la, ua = _kg(method, rA, vA * cA, NA, kA, confidence_level, dfA)
        lb, ub = _kg(method, rB, vB * cB, NB, kB, confidence_level, dfB)
        lo, hi = I.mover(rA, la, ua, rB, lb, ub, I.correlation(vA, vB, cov))
        lo, hi = np.where(one, la - ub, lo), np.where(one, ua - lb, hi)
        key = "mover-korn-graubard-tilted" if method == "korn-graubard-tilted" else "mover-korn-graubard"
    else:
        dfd = I.design_df(np.asarray(nA, np.float64) + np.asarray(nB, np.float64))
        lo, hi = I.t_interval(d, var, k, confidence_level, df=dfd)
        lo, hi = np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)
        la, ua = _t_rate(rA, vA, kA, confidence_level, dfA)
        lb, ub = _t_rate(rB, vB, kB, confidence_level, dfB)
        lo, hi = np.where(one, la - ub, lo), np.where(one, ua - lb, hi)
        key = "t"
    out = []
    for j in range(d.shape[0]):
        if method in _KG_WHAT:
            what = ("MOVER (Newcombe hybrid) interval of the difference of pooled rates A − B from the arms' "
                    f"{_KG_WHAT[method]} intervals and their cluster-estimated correlation "
                    f"({_df_text(dfA[j], kA[j])} and {_df_text(dfB[j], kB[j])}"
                    f"{_factor_text(cA[j], cB[j])})")
        else:
            what = (f"t interval of the difference of pooled rates A − B (paired cluster linearisation standard "
                    f"error, {_df_text(dfd[j], k[j])})")
        if one[j]:
            what += _ONE
        out.append(_analytic(d[j], lo[j], hi[j], np.sqrt(var[j]), key, what, k_all))
    return out


def cluster_rate_ci(
    cluster: ArrayLike,
    hits: ArrayLike,
    n: ArrayLike,
    *,
    arm: ArrayLike | None = None,
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
    method: IntervalMethod = DEFAULT_METHOD,
) -> ClusterIntervalResult:
    """Cluster confidence interval of a pooled rate, or of a difference A − B with ``arm``.

    The cluster (prompt, case, task) is the unit of inference: cells of one
    cluster are pooled, and the interval describes the population of
    clusters the observed ones were drawn from.

    Parameters
    ----------
    cluster : array_like, shape (cells,)
        Cluster id of each cell (any hashable labels).
    hits : array_like of int, shape (cells,)
        Hits (successes) in each cell.
    n : array_like of int, shape (cells,)
        Trials in each cell; ``0 <= hits <= n``.
    arm : array_like of {0, 1}, shape (cells,), optional
        With it, the statistic is pooled rate of arm A (1) minus pooled rate
        of arm B (0), the arms paired within clusters. Without it, the
        statistic is the pooled rate Σhits / Σn.
    n_resamples : int, default 4000
        Cluster resamples of ``method="percentile"``; ignored by the analytic
        methods, which draw none.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).
    seed : None, int, or numpy.random.Generator, optional
        Seed of the resampling (``method="percentile"`` only).
    method : {"korn-graubard-tilted", "korn-graubard", "t", "percentile"}, default "korn-graubard-tilted"
        ``"korn-graubard-tilted"``: Clopper–Pearson at the Korn–Graubard
        effective trials with tails split α(½ ± 0.1(1 − 2r)), the variance
        times its Bell–McCaffrey factor and the t quantile at the design df
        (both exactly as k − 1 with equal sizes); for A − B: the MOVER
        combination of the arms' tilted intervals, each arm so computed.
        ``"korn-graubard"``: the same with equal tails. ``"t"``: rate ± t
        times the cluster linearisation standard error, k − 1 df.
        ``"percentile"``: cluster bootstrap percentile interval (clusters
        resampled with replacement; one resample serves both arms).

    Returns
    -------
    res : ClusterIntervalResult
        ``statistic``, ``confidence_interval`` (low, high), ``standard_error``
        (linearisation SE, or the SD of the bootstrap distribution),
        ``interval_method`` (the key of the interval computed, e.g.
        ``"mover-korn-graubard-tilted"`` for a default difference) and
        ``method`` (a readable description). ``n_resamples`` is 0 and
        ``bootstrap_distribution`` empty unless ``method="percentile"``.

    Notes
    -----
    The pooled rate r = Σh / Σn is a ratio estimator; its with-replacement
    cluster linearisation variance is v = k / (k − 1) · Σ(h_i − r n_i)² / (Σn)²
    over the k clusters with trials. The Korn–Graubard interval is the
    Clopper–Pearson interval at n* = r(1 − r) / v · (z / t_{k−1})² effective
    trials (capped at Σn). Assumes clusters are independent draws from the
    population of clusters. No trials at all gives statistic NaN and a
    (NaN, NaN) interval; a single cluster gives the whole range (analytic)
    or a zero-width interval (percentile). In the percentile path a resample
    in which an arm has no trials is NaN, excluded from the percentiles and
    counted in ``n_undefined``.

    References
    ----------
    .. [1] E. L. Korn and B. I. Graubard, "Confidence intervals for proportions
           with small expected number of positive counts estimated from survey
           data", Survey Methodology 24(2), 193–201, 1998.
    .. [2] G. Y. Zou and A. Donner, "Construction of confidence limits about
           effect measures: a general approach", Statistics in Medicine 27,
           1693–1702, 2008 (MOVER).
    .. [3] B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap",
           Chapman & Hall, 1993, ch. 13 (percentile interval).

    Examples
    --------
    >>> import stats
    >>> res = stats.cluster_rate_ci([0, 1, 2, 3], [1, 0, 3, 2], [5, 5, 5, 5])
    >>> res.interval_method, round(res.statistic, 2)
    ('korn-graubard-tilted', 0.3)
    """
    _check(method, n_resamples)
    _, hk, nk = cluster_table(cluster, hits, n, arm)
    if method != "percentile":
        if arm is None:
            return rate_results(hk[:, 0][None, :], nk[:, 0][None, :], confidence_level, method)[0]
        return difference_results(hk[:, 1][None, :], nk[:, 1][None, :], hk[:, 0][None, :], nk[:, 0][None, :],
                                  confidence_level, method)[0]
    if arm is None:
        return B.percentile_rate(np.column_stack([hk[:, 0], nk[:, 0]]), False, n_resamples, confidence_level, seed)
    return B.percentile_rate(np.column_stack([hk[:, 1], nk[:, 1], hk[:, 0], nk[:, 0]]), True, n_resamples,
                             confidence_level, seed)


def paired_difference_ci(cluster: ArrayLike, hits: ArrayLike, n: ArrayLike, *, arm: ArrayLike,
                         confidence_level: float = 0.95) -> ClusterIntervalResult:
    """Paired interval of pooled rate A − pooled rate B, the arms run on the same clusters.

    A measured alternative to the MOVER difference of ``cluster_rate_ci(arm=...)``: it gains from
    arms that agree cluster by cluster, which MOVER of the arms' skewed intervals cannot. Not the
    default of any report (docs/statistics-coverage.md, "The paired A − B interval", has the tables
    behind that choice).

    Parameters
    ----------
    cluster : array_like, shape (cells,)
        Cluster id of each cell.
    hits, n : array_like of int, shape (cells,)
        Hits and trials of each cell; ``0 <= hits <= n``.
    arm : array_like of {0, 1}, shape (cells,)
        1 for arm A, 0 for arm B.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).

    Returns
    -------
    res : ClusterIntervalResult
        ``interval_method`` ``"paired-shaped"``; ``standard_error`` the paired one the interval used.

    Notes
    -----
    The scale is the paired standard error √max(v_d, v_0): v_d the linearisation variance of the
    paired difference (v_A + v_B − 2c_AB), v_0 the variance of two independent binomial samples at the
    pooled rates (H + ½)/(N + 1) (the trials' own noise: never [0, 0], even with no hit). The shape
    comes from the arms' default intervals (tilted Korn–Graubard, design df): each arm's reaches in
    units of its own standard error, weighted by the arms' shares of the spread
    (``stats.intervals.paired_shaped``), so the skew near 0 and 1 and the df carry over. Clipped to
    the range [l_A − u_B, u_A − l_B] the arms allow. An arm with trials in fewer than 2 clusters gives
    that range, as ``cluster_rate_ci`` does.

    References
    ----------
    .. [1] G. Y. Zou and A. Donner, "Construction of confidence limits about effect measures: a general
           approach", Statistics in Medicine 27, 1693–1702, 2008 (reaches from the arms' intervals).
    .. [2] W. G. Cochran, "Sampling Techniques", 3rd ed., Wiley, 1977, §6.9 (ratio estimators).
    """
    _, hk, nk = cluster_table(cluster, hits, n, arm)
    hA, nA, hB, nB = (x[None, :].astype(np.float64) for x in (hk[:, 1], nk[:, 1], hk[:, 0], nk[:, 0]))
    _, NA, rA, vA, kA = I.ratio_moments(hA, nA)
    _, NB, rB, vB, kB = I.ratio_moments(hB, nB)
    dfA, dfB = I.design_df(nA), I.design_df(nB)
    la, ua = I.korn_graubard_tilted(rA, vA, NA, kA, confidence_level, df=dfA)
    lb, ub = I.korn_graubard_tilted(rB, vB, NB, kB, confidence_level, df=dfB)
    lo, hi, var = I.paired_shaped(hA, nA, hB, nB, (la, ua, lb, ub))
    d = float((rA - rB)[0])
    what = ("paired interval of the difference of pooled rates A − B (linearisation SE of the paired difference, "
            "floored at the independent-trials binomial SE; reaches shaped by the arms' tilted Korn–Graubard "
            f"intervals, {_df_text(dfA[0], kA[0])} and {_df_text(dfB[0], kB[0])})")
    if (kA[0] < 2 or kB[0] < 2) and np.isfinite(d):
        lo, hi = la - ub, ua - lb
        what += _ONE
    return _analytic(d, lo[0], hi[0], np.sqrt(var[0]), "paired-shaped", what, hk.shape[0])


def _side(side: int | Sequence[int], d: int) -> list[int]:
    cols = [int(j) for j in np.atleast_1d(side)]
    if not cols or any(not 0 <= j < d for j in cols):
        raise ValueError(f"difference side {side!r} must name columns in 0..{d - 1}")
    return cols


def cluster_rate_ci_many(
    cluster: ArrayLike,
    hits: ArrayLike,
    n: ArrayLike,
    *,
    differences: Sequence[tuple[int | Sequence[int], int | Sequence[int]]] = (),
    n_resamples: int = 4000,
    confidence_level: float = 0.95,
    seed: SeedLike = None,
    method: IntervalMethod = DEFAULT_METHOD,
) -> tuple[ClusterIntervalResult, ...]:
    """Cluster confidence intervals of many pooled rates, and of differences between them, in one call.

    Each returned interval is, on its own, the interval ``cluster_rate_ci``
    gives for that column (or, with ``arm``, for that pair of columns): with
    the same ``method`` and ``seed`` a single column gives exactly that
    function's result. What the report uses for every condition at once.

    Parameters
    ----------
    cluster : array_like, shape (cells,)
        Cluster id of each cell.
    hits : array_like of int, shape (cells, d) or (cells,)
        One column per rate (e.g. per condition × outcome): column j's
        statistic is the pooled rate Σhits[:, j] / Σn[:, j].
    n : array_like of int, shape (cells, d) or (cells,)
        Trials per cell and column, or one column shared by every rate.
    differences : sequence of (a, b), optional
        Each pair adds the interval of rate a − rate b, where a side is a
        column index or a sequence of columns pooled into one arm (Σ of
        their hits over Σ of their trials), e.g. the conditions of arm A.
    n_resamples : int, default 4000
        Cluster resamples of ``method="percentile"``; ignored otherwise.
    confidence_level : float, default 0.95
        Two-sided confidence level, in (0, 1).
    seed : None, int, or numpy.random.Generator, optional
        Seed of the resampling (``method="percentile"`` only).
    method : {"korn-graubard-tilted", "korn-graubard", "t", "percentile"}, default "korn-graubard-tilted"
        As in ``cluster_rate_ci``.

    Returns
    -------
    results : tuple of ClusterIntervalResult
        d results (columns in order) followed by one per difference.

    Notes
    -----
    The analytic methods are vectorised over columns. With
    ``method="percentile"`` every resample draws as many clusters as
    observed, with replacement, *once*, and all d columns (and differences)
    are read off it, so the cost is one resampling instead of d; identical
    columns (e.g. an ``n`` shared by several rates) are resampled once, and
    the intervals are dependent (they share resamples), which matters only
    if they are combined. A cluster with no trials in a column adds 0 / 0
    there (it is a prompt of the population that happened to have no trials
    there); a resample with no trials in a column gives NaN, counted in
    ``n_undefined``.

    References
    ----------
    .. [1] E. L. Korn and B. I. Graubard, Survey Methodology 24(2), 193–201, 1998.
    .. [2] G. Y. Zou and A. Donner, Statistics in Medicine 27, 1693–1702, 2008.
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
    if method == "percentile":
        return B.percentile_many(cols_h, cols_n, k, pairs, n_resamples, confidence_level, seed)
    hc = np.array(cols_h, dtype=np.float64).reshape(d, k)
    nc = np.array(cols_n, dtype=np.float64).reshape(d, k)
    out = rate_results(hc, nc, confidence_level, method) if d else []
    if pairs:
        hA = np.array([hc[a].sum(axis=0) for a, _ in pairs])
        nA = np.array([nc[a].sum(axis=0) for a, _ in pairs])
        hB = np.array([hc[b].sum(axis=0) for _, b in pairs])
        nB = np.array([nc[b].sum(axis=0) for _, b in pairs])
        out += difference_results(hA, nA, hB, nB, confidence_level, method)
    return tuple(out)

"""Analytic cluster intervals for pooled rates and paired differences (Korn–Graubard, MOVER, t).

Why this exists: the cluster bootstrap percentile interval under-covers with a
dozen prompts (benchmarks/interval_coverage.py measures it: 80–90% at 6–12
prompts). The intervals here use the same cluster (prompt) as the unit of
inference, but through the ratio estimator's linearisation (Taylor) variance
with k − 1 degrees of freedom, and — for rates — the Clopper–Pearson shape at
an effective sample size, so they stay inside [0, 1], are skewed near 0 and 1
like the binomial, and are non-degenerate when no trial (or every trial) hit.

All functions are vectorised over designs: inputs are (designs × clusters)
arrays of per-cluster hit and trial counts (a 1-D input is one design), and
the outputs are arrays with one entry per design. The benchmark
(benchmarks/interval_coverage.py) calls exactly these functions, so the
coverage it prints is the coverage of the shipped code.

Notation: for one column, r = Σh / Σn is the pooled (trial-weighted) rate over
the k clusters with trials, and its linearisation variance is

    v = k / (k − 1) · Σ_i (h_i − r n_i)² / (Σn)²

(the with-replacement, ultimate-cluster variance of a ratio estimator;
Cochran 1977 §6.9, Wolter 2007 ch. 6).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from stats import _special as S


def _2d(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    return a[None, :] if a.ndim == 1 else a


def ratio_moments(h: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per design: (Σh, Σn, pooled rate r, linearisation variance v, clusters with trials k).

    r is NaN where Σn = 0; v is NaN where k < 2 (no between-cluster variance
    can be estimated from one cluster).
    """
    h, n = _2d(h), _2d(n)
    H, N = h.sum(axis=1), n.sum(axis=1)
    k = (n > 0).sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(N > 0, H / np.where(N > 0, N, 1.0), np.nan)
        e = h - r[:, None] * n
        v = np.where(k > 1, k / np.maximum(k - 1.0, 1.0) * (e * e).sum(axis=1) / (N * N), np.nan)
    return H, N, r, v, k


def ratio_covariance(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray) -> np.ndarray:
    """Linearisation covariance of the two pooled rates of paired columns (same clusters in both)."""
    hA, nA, hB, nB = _2d(hA), _2d(nA), _2d(hB), _2d(nB)
    NA, NB = nA.sum(axis=1), nB.sum(axis=1)
    k = ((nA + nB) > 0).sum(axis=1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        rA, rB = hA.sum(axis=1) / NA, hB.sum(axis=1) / NB
        eA = hA - rA[:, None] * nA
        eB = hB - rB[:, None] * nB
        return np.where(k > 1, k / np.maximum(k - 1.0, 1.0) * (eA * eB).sum(axis=1) / (NA * NB), np.nan)


def _z(confidence_level: float) -> float:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level}")
    return NormalDist().inv_cdf(0.5 + confidence_level / 2.0)


def t_quantiles(df: np.ndarray, confidence_level: float) -> np.ndarray:
    """Two-sided Student-t critical values t_{df, 1 − α/2} (NaN where df <= 0)."""
    d = np.atleast_1d(np.asarray(df, dtype=np.float64))
    out = np.full(d.shape, np.nan)
    ok = d > 0
    if ok.any():
        uniq, inv = np.unique(d[ok], return_inverse=True)  # few distinct df: solve each once
        out[ok] = S.t_ppf_many(0.5 + confidence_level / 2.0, uniq)[inv]
    return out


def design_df(n: np.ndarray) -> np.ndarray:
    """Bell–McCaffrey (Satterthwaite) degrees of freedom of the linearisation variance, per design.

    The variance of a pooled rate is v ∝ Σ w_i² e_i², w_i = n_i / N, with residuals
    e = M y, M = I − 1wᵀ, of the cluster rates y. Under the working model of independent
    cluster rates with a common variance, v is a quadratic form yᵀAy, A = MᵀW²M, and
    Satterthwaite's two-moment match gives df = (tr A)² / tr(A²) (Bell & McCaffrey 2002).
    With equal cluster sizes this is exactly k − 1; when a few clusters hold most trials
    v rests on those few and df falls toward 1 (the t quantile then widens the interval).
    Both traces have closed forms in O(k): with S₂ = Σw², a_i = w_i², g_i = S₂/2 − w_i,
    (W M Mᵀ W)_ij = w_i w_j (δ_ij + g_i + g_j). Clusters without trials are left out
    (w = 0); NaN where fewer than 2 clusters have trials. (A working model adding each rate's
    binomial noise to a moment estimate of the between-cluster variance was measured too:
    narrower, but 88% coverage at 8 prompts where one holds most trials.)
    """
    n = _2d(n)
    N = n.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(N > 0, n / np.where(N > 0, N, 1.0), 0.0)
        a = w * w
        g = a.sum(axis=1, keepdims=True) / 2.0 - w
        tr = (a * (1.0 + 2.0 * g)).sum(axis=1)
        sa = a.sum(axis=1)
        tr2 = ((a * a) * ((1.0 + 2.0 * g) ** 2 - (2.0 * g) ** 2)).sum(axis=1) \
            + 2.0 * sa * (a * g * g).sum(axis=1) + 2.0 * (a * g).sum(axis=1) ** 2
        k = (n > 0).sum(axis=1)
        df = np.where(k > 1, tr * tr / np.where(tr2 > 0, tr2, 1.0), np.nan)
    # rounding can leave equal sizes a hair off k − 1 (snap it back: then the interval is exactly the
    # published k − 1 rule); the df never exceeds k − 1
    df = np.where(np.abs(df - (k - 1.0)) <= 1e-9 * k, k - 1.0, df)
    out: np.ndarray = np.minimum(df, k - 1.0)
    return out


#: the variance factor applies where the design df is at most this share of k − 1 (``design_variance_factor``)
UNEQUAL_DF_SHARE = 0.5


def design_variance_factor(n: np.ndarray, *, gate: float | None = UNEQUAL_DF_SHARE) -> np.ndarray:
    """Bell–McCaffrey bias factor of the linearisation variance: Var(r) / E[v] under ``design_df``'s working model.

    With residuals e = M y of independent cluster rates with a common variance σ², the pooled rate has
    Var(r) = σ² Σw², while the variance estimate has E[v] = σ² k/(k − 1) Σ_i w_i² (1 − 2w_i + S₂),
    S₂ = Σw², because a big cluster pulls the pooled rate toward itself and its own residual shrinks
    by about (1 − w_i). The factor Var(r) / E[v] is exactly 1 with equal sizes, about 1.2 when 5 of
    50 prompts hold 80% of the trials, and about 20 when one of 8 holds 84%. Multiplying v by it is the
    scalar form of Bell & McCaffrey's (2002) bias-reduced linearisation; ``design_df`` is its df, and
    the df is unchanged by the scaling. Used for the pooled rate and for each arm of the A − B interval
    (where the df alone leaves them under 94%: docs/statistics-coverage.md); never below 1 (never narrower
    than the published rule); 1 where fewer than 2 clusters have trials.

    ``gate``: the factor applies only where ``design_df`` ≤ gate · (k − 1), i.e. where the sizes are
    unequal enough that the design rests on fewer than about half its clusters (log-uniform 1–100 sizes,
    a few prompts holding most trials); elsewhere it is 1. Error rows thinning some prompts (the
    coverage grid's ``uneq`` cells, df ≈ 0.8–1 · (k − 1)) leave the interval as it was: there the factor
    is 1.0–1.15 and only pushed cells over 97.5%. ``gate=None`` gives the factor everywhere.
    """
    n = _2d(n)
    N = n.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(N > 0, n / np.where(N > 0, N, 1.0), 0.0)
        k = (n > 0).sum(axis=1).astype(np.float64)
        s2 = (w * w).sum(axis=1)
        ev = k / np.maximum(k - 1.0, 1.0) * (w * w * (1.0 - 2.0 * w + s2[:, None])).sum(axis=1)
        c = np.where((k > 1) & (ev > 0), s2 / np.where(ev > 0, ev, 1.0), 1.0)
    # equal sizes give exactly 1 up to rounding: snap it, so equal designs keep the published interval bit for bit
    c = np.where(np.abs(c - 1.0) <= 1e-9, 1.0, np.maximum(c, 1.0))
    if gate is not None:
        c = np.where(design_df(n) <= gate * (k - 1.0), c, 1.0)
    out: np.ndarray = c
    return out


def effective_trials(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float,
                     *, cap: bool = True, df: np.ndarray | None = None) -> np.ndarray:
    """Korn–Graubard effective trials n* = n_eff · (z / t_df)², with n_eff = r(1 − r) / v.

    ``df`` defaults to k − 1 (the published Korn–Graubard rule); the cluster intervals pass
    ``design_df`` of the cluster sizes, which is k − 1 when sizes are equal and smaller when
    a few clusters hold most of the trials.

    n_eff is the trial count a simple binomial sample would need for the
    variance v. Where v = 0 (no hit, every trial a hit, or identical cluster
    rates) n_eff = Σn; with ``cap`` (the default) n_eff is never above Σn
    (design effect at least 1: between-prompt variation cannot make a pooled
    rate more precise than independent trials). The factor (z / t)² turns
    the k − 1 degrees of freedom into a shorter effective sample; with one
    cluster (k = 1) n* = 0 and the interval is the whole range.
    """
    z = _z(confidence_level)
    with np.errstate(invalid="ignore", divide="ignore"):
        neff = np.where(v > 0, r * (1.0 - r) / np.where(v > 0, v, 1.0), N)
        if cap:
            neff = np.minimum(neff, N)
        t = t_quantiles(k - 1.0 if df is None else np.broadcast_to(np.asarray(df, np.float64), np.shape(k)),
                        confidence_level)
        return np.where(k > 1, neff * (z / t) ** 2, np.where(N > 0, 0.0, np.nan))


def clopper_pearson(x: np.ndarray, m: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson interval for (possibly fractional) x successes in m trials, via Beta quantiles.

    lower = Beta(α/2; x, m − x + 1) (0 at x = 0), upper = Beta(1 − α/2; x + 1, m − x)
    (1 at x = m); m = 0 gives (0, 1); NaN m gives NaN.
    """
    alpha = 1.0 - confidence_level
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    x = np.clip(x, 0.0, m)
    lo = np.where(x > 0, S.beta_ppf_many(np.full(x.shape, alpha / 2.0), x, m - x + 1.0), 0.0)
    hi = np.where(x < m, S.beta_ppf_many(np.full(x.shape, 1.0 - alpha / 2.0), x + 1.0, m - x), 1.0)
    bad = ~np.isfinite(m)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def clopper_pearson_tails(x: np.ndarray, m: np.ndarray, tail_lo: np.ndarray,
                          tail_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson bounds with unequal tails: P(X >= x | lower) = tail_lo, P(X <= x | upper) = tail_hi.

    lower = Beta(tail_lo; x, m − x + 1) (0 at x = 0), upper = Beta(1 − tail_hi; x + 1, m − x) (1 at x = m),
    for (possibly fractional) x of m trials; tails are per-design arrays (or scalars). With
    tail_lo = tail_hi = α/2 this is ``clopper_pearson``.
    """
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    a_lo = np.broadcast_to(np.asarray(tail_lo, dtype=np.float64), x.shape).copy()
    a_hi = np.broadcast_to(np.asarray(tail_hi, dtype=np.float64), x.shape).copy()
    x = np.clip(x, 0.0, m)
    lo = np.where(x > 0, S.beta_ppf_many(a_lo, x, m - x + 1.0), 0.0)
    hi = np.where(x < m, S.beta_ppf_many(1.0 - a_hi, x + 1.0, m - x), 1.0)
    bad = ~np.isfinite(m)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def clopper_pearson_midp(x: np.ndarray, m: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """Mid-p Clopper–Pearson interval for (possibly fractional) x of m trials.

    lower: P(X > x) + ½ P(X = x) = α/2 (0 at x = 0); upper: P(X < x) + ½ P(X = x) = α/2 (1 at x = m),
    with the binomial tails continued to real x and m through the incomplete beta function
    (``_special.midp_bounds_many``); m = 0 gives (0, 1), NaN m gives NaN.
    """
    _z(confidence_level)
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    xc = np.where(np.isfinite(m), np.clip(x, 0.0, np.where(np.isfinite(m), m, 0.0)), np.nan)
    lo, hi = S.midp_bounds_many(np.ascontiguousarray(xc), np.ascontiguousarray(m), 1.0 - confidence_level)
    return lo, hi


def jeffreys(x: np.ndarray, m: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys interval: Beta(x + ½, m − x + ½) quantiles, lower 0 at x = 0 and upper 1 at x = m."""
    alpha = 1.0 - confidence_level
    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    m = np.atleast_1d(np.asarray(m, dtype=np.float64))
    x = np.clip(x, 0.0, m)
    lo = np.where(x > 0, S.beta_ppf_many(np.full(x.shape, alpha / 2.0), x + 0.5, m - x + 0.5), 0.0)
    hi = np.where(x < m, S.beta_ppf_many(np.full(x.shape, 1.0 - alpha / 2.0), x + 0.5, m - x + 0.5), 1.0)
    bad = ~np.isfinite(m)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def wilson(p: np.ndarray, m: np.ndarray, confidence_level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval at (possibly fractional) m trials; m = 0 gives (0, 1)."""
    z = _z(confidence_level)
    with np.errstate(invalid="ignore", divide="ignore"):
        mm = np.where(m > 0, m, np.nan)
        denom = 1.0 + z * z / mm
        centre = (p + z * z / (2.0 * mm)) / denom
        half = z * np.sqrt(p * (1.0 - p) / mm + z * z / (4.0 * mm * mm)) / denom
        lo = np.where(m > 0, np.clip(centre - half, 0.0, 1.0), np.where(m == 0, 0.0, np.nan))
        hi = np.where(m > 0, np.clip(centre + half, 0.0, 1.0), np.where(m == 0, 1.0, np.nan))
    return lo, hi


def korn_graubard(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float, *,
                  cap: bool = True, df: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Korn–Graubard (1998) interval: Clopper–Pearson at x* = r n*, n* = effective trials, df-adjusted."""
    m = effective_trials(r, v, N, k, confidence_level, cap=cap, df=df)
    lo, hi = clopper_pearson(r * m, m, confidence_level)
    return np.where(np.isnan(r), np.nan, lo), np.where(np.isnan(r), np.nan, hi)


def korn_graubard_midp(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float, *,
                       cap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Mid-p Clopper–Pearson interval at the Korn–Graubard effective trials (same n* as ``korn_graubard``)."""
    m = effective_trials(r, v, N, k, confidence_level, cap=cap)
    lo, hi = clopper_pearson_midp(r * m, m, confidence_level)
    return np.where(np.isnan(r), np.nan, lo), np.where(np.isnan(r), np.nan, hi)


#: tilt of the tilted Korn–Graubard interval: the lower tail gets α (½ + TILT (1 − 2r)), the upper the rest
TILT = 0.1


def tilted_tails(r: np.ndarray, confidence_level: float, tilt: float = TILT) -> tuple[np.ndarray, np.ndarray]:
    """(lower tail, upper tail) of the tilted interval: α (½ + tilt (1 − 2r)) and α (½ − tilt (1 − 2r)).

    At r = ½ the tails are equal; below ½ the upper tail is the smaller one (a longer reach upward), and
    the rule is symmetric: a rate r and the rate 1 − r of the complementary outcome get mirrored tails.
    """
    if not 0.0 <= tilt < 0.5:
        raise ValueError(f"tilt must be in [0, 0.5), got {tilt}")
    alpha = 1.0 - confidence_level
    shift = tilt * (1.0 - 2.0 * np.clip(np.nan_to_num(np.asarray(r, dtype=np.float64), nan=0.5), 0.0, 1.0))
    return alpha * (0.5 + shift), alpha * (0.5 - shift)


def korn_graubard_tilted(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float, *,
                         tilt: float = TILT, cap: bool = True,
                         df: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Korn–Graubard interval with tails tilted toward the far side from the nearer boundary (the default).

    Same effective trials n* and Clopper–Pearson shape as ``korn_graubard``, but the α is split
    α (½ + tilt (1 − 2r)) below and α (½ − tilt (1 − 2r)) above (``tilted_tails``): a rate under ½
    reaches further up. Why: a pooled rate over few heterogeneous prompts is right-skewed below ½ —
    a sample that missed the prompts that fire often has both a low rate and a low variance — so the
    equal-tailed interval misses above about 4–5% of the time and below only 0.5–1.5% (measured in
    benchmarks/interval_coverage.py); tilting by 0.1 moves the misses toward balance.
    """
    m = effective_trials(r, v, N, k, confidence_level, cap=cap, df=df)
    t_lo, t_hi = tilted_tails(r, confidence_level, tilt)
    lo, hi = clopper_pearson_tails(r * m, m, t_lo, t_hi)
    return np.where(np.isnan(r), np.nan, lo), np.where(np.isnan(r), np.nan, hi)


def jeffreys_effective(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float, *,
                       cap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys interval at the Korn–Graubard effective trials."""
    m = effective_trials(r, v, N, k, confidence_level, cap=cap)
    lo, hi = jeffreys(r * m, m, confidence_level)
    return np.where(np.isnan(r), np.nan, lo), np.where(np.isnan(r), np.nan, hi)


def wilson_effective(r: np.ndarray, v: np.ndarray, N: np.ndarray, k: np.ndarray, confidence_level: float, *, cap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval at the Korn–Graubard effective trials (same n*, Wilson shape)."""
    m = effective_trials(r, v, N, k, confidence_level, cap=cap)
    lo, hi = wilson(r, m, confidence_level)
    return np.where(np.isnan(r), np.nan, lo), np.where(np.isnan(r), np.nan, hi)


def t_interval(estimate: np.ndarray, variance: np.ndarray, k: np.ndarray, confidence_level: float, *,
               df: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """estimate ± t_df √variance, df = k − 1 unless given (NaN with fewer than 2 clusters)."""
    t = t_quantiles(np.asarray(k, dtype=np.float64) - 1.0 if df is None else np.asarray(df, np.float64),
                    confidence_level)
    se = np.sqrt(variance)
    return estimate - t * se, estimate + t * se


def mover(dA: np.ndarray, lA: np.ndarray, uA: np.ndarray, dB: np.ndarray, lB: np.ndarray, uB: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MOVER interval of θ_A − θ_B from the two arms' intervals (Zou & Donner 2008; Newcombe 1998, method 10).

    L = d − √[(θ̂A − lA)² + (uB − θ̂B)² − 2ρ(θ̂A − lA)(uB − θ̂B)],
    U = d + √[(uA − θ̂A)² + (θ̂B − lB)² − 2ρ(uA − θ̂A)(θ̂B − lB)],
    with ρ the estimated correlation of the two estimates (here: of the pooled
    rates, from the cluster linearisation covariance, so pairing is used).
    """
    d = dA - dB
    a1, b1 = dA - lA, uB - dB
    a2, b2 = uA - dA, dB - lB
    lo = d - np.sqrt(np.maximum(a1 * a1 + b1 * b1 - 2.0 * corr * a1 * b1, 0.0))
    hi = d + np.sqrt(np.maximum(a2 * a2 + b2 * b2 - 2.0 * corr * a2 * b2, 0.0))
    return np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)


def correlation(vA: np.ndarray, vB: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """cov / √(vA vB), clipped to [−1, 1]; 0 where either variance is 0 or undefined."""
    with np.errstate(invalid="ignore", divide="ignore"):
        c: np.ndarray = np.where((vA > 0) & (vB > 0), cov / np.sqrt(np.where((vA > 0) & (vB > 0), vA * vB, 1.0)), 0.0)
    out: np.ndarray = np.clip(np.nan_to_num(c, nan=0.0), -1.0, 1.0)
    return out


def _binomial_variance(h: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per design: r̃(1 − r̃)/N at r̃ = (H + ½)/(N + 1), the variance of N independent trials nudged off 0 and 1."""
    N = n.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (h.sum(axis=1) + 0.5) / (N + 1.0)
        out: np.ndarray = t * (1.0 - t) / N
    return out


def paired_variance(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray,
                    nB: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per design: (d = r_A − r_B, max(v_d, v_0), undefined) for the paired intervals ``paired_t``, ``paired_shaped``.

    v_d = k / (k − 1) · Σ_i (e_Ai / N_A − e_Bi / N_B)² = v_A + v_B − 2 cov is the linearisation variance
    of the paired difference: it shrinks as the arms agree cluster by cluster, which is the whole gain of
    the pairing. v_0 = ``_binomial_variance`` of A plus that of B is the variance of two independent
    binomial samples at the pooled rates: the trials' own noise, which no agreement between the arms can
    remove; it keeps the interval off the degenerate [0, 0] when no trial hit (or every trial did), and
    off a zero width when one hit is all there is. ``undefined`` where an arm has no trials or fewer
    than 2 clusters have trials.
    """
    _, _, rA, vA, _ = ratio_moments(hA, nA)
    _, _, rB, vB, _ = ratio_moments(hB, nB)
    vd = np.maximum(vA + vB - 2.0 * ratio_covariance(hA, nA, hB, nB), 0.0)
    k = ((nA + nB) > 0).sum(axis=1)
    d = rA - rB
    return d, np.maximum(vd, _binomial_variance(hA, nA) + _binomial_variance(hB, nB)), \
        ~np.isfinite(d) | ~np.isfinite(vd) | (k < 2)


def paired_t(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray, confidence_level: float, *,
                      arms: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Paired cluster-t interval of rate A − rate B on the same clusters: (low, high, variance used, df).

    d ± t_df · √max(v_d, v_0), with v_d and v_0 as in ``paired_variance`` (MOVER of the arms' skewed
    intervals cannot cancel their unequal reaches; v_d can), and df the Bell–McCaffrey df
    (``design_df``) of the paired weights n_Ai / N_A + n_Bi / N_B, k − 1 when the sizes are equal.

    The interval is clipped to [l_A − u_B, u_A − l_B] of the arms' intervals ``arms`` = (lA, uA, lB, uB)
    when given (the range of differences both arms allow), and to [−1, 1]. NaN where an arm has no
    trials or fewer than 2 clusters have trials.
    """
    hA, nA, hB, nB = _2d(hA), _2d(nA), _2d(hB), _2d(nB)
    d, var, bad = paired_variance(hA, nA, hB, nB)
    NA, NB = nA.sum(axis=1, keepdims=True), nB.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(NA > 0, nA / np.where(NA > 0, NA, 1.0), 0.0) + np.where(NB > 0, nB / np.where(NB > 0, NB, 1.0), 0.0)
    df = design_df(w)
    lo, hi = t_interval(d, var, ((nA + nB) > 0).sum(axis=1).astype(np.float64), confidence_level, df=df)
    if arms is not None:
        la, ua, lb, ub = arms
        lo, hi = np.maximum(lo, la - ub), np.minimum(hi, ua - lb)
    lo, hi = np.clip(lo, -1.0, 1.0), np.clip(hi, -1.0, 1.0)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi), var, df


def paired_shaped(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray,
                  arms: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paired interval of rate A − rate B: the paired standard error, the reaches shaped by the arms' intervals.

    Returns (low, high, variance used). ``arms`` = (lA, uA, lB, uB), the arms' own intervals (the default:
    tilted Korn–Graubard with the design df). Each arm's reaches in units of its standard error,
    f_lo = (r − l) / s and f_hi = (u − r) / s with s = √max(v, v₀) (v₀ the arm's binomial variance at
    (H + ½)/(N + 1)), carry what the arm's interval knows that a symmetric t does not: the skew near 0
    and 1 and the df. The difference's reaches are those factors, weighted by the arms' shares
    w = s_A / (s_A + s_B) of the spread, times the paired standard error √max(v_d, v₀A + v₀B)
    (``paired_variance``):

        low = d − √var · (w_A f_lo,A + w_B f_hi,B),   high = d + √var · (w_A f_hi,A + w_B f_lo,B).

    A reaches down where A is low or B is high, hence A's lower and B's upper factor. With symmetric
    arms (f = t) this is the paired t; with agreeing arms √var is the pairing's gain, which MOVER of the
    skewed arms cannot give. Clipped to [l_A − u_B, u_A − l_B] and [−1, 1]; NaN where the paired
    variance is undefined.
    """
    hA, nA, hB, nB = _2d(hA), _2d(nA), _2d(hB), _2d(nB)
    _, _, rA, vA, _ = ratio_moments(hA, nA)
    _, _, rB, vB, _ = ratio_moments(hB, nB)
    d, var, bad = paired_variance(hA, nA, hB, nB)
    la, ua, lb, ub = arms
    with np.errstate(invalid="ignore", divide="ignore"):
        sa = np.sqrt(np.maximum(np.nan_to_num(vA), _binomial_variance(hA, nA)))
        sb = np.sqrt(np.maximum(np.nan_to_num(vB), _binomial_variance(hB, nB)))
        wa = sa / (sa + sb)
        reach_lo = wa * (rA - la) / sa + (1.0 - wa) * (ub - rB) / sb
        reach_hi = wa * (ua - rA) / sa + (1.0 - wa) * (rB - lb) / sb
    se = np.sqrt(var)
    lo = np.clip(np.maximum(d - reach_lo * se, la - ub), -1.0, 1.0)
    hi = np.clip(np.minimum(d + reach_hi * se, ua - lb), -1.0, 1.0)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi), var

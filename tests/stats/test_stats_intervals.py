"""The analytic cluster intervals (default ``method="korn-graubard-tilted"``; ``"korn-graubard"``, ``"t"``) against scipy and brute force."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special as sp
from scipy import stats as sps

import stats
from stats import _special as S
from stats import intervals as I

Z = sps.norm.ppf(0.975)


# ---------------------------------------------------------------- special functions vs scipy

def test_betainc_and_inverse_agree_with_scipy():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        a, b = np.exp(rng.uniform(-3, 9, 2))
        x = rng.uniform()
        assert S.betainc(a, b, x) == pytest.approx(sp.betainc(a, b, x), rel=1e-11, abs=1e-290)
        p = rng.uniform()
        q = S.betaincinv(a, b, p)
        ref = sp.betaincinv(a, b, p)
        assert abs(q - ref) <= 1e-9 * min(ref, 1.0 - ref) + 4e-15
    # the parameters of real intervals: x* up to millions of trials
    for a, b in [(0.5, 2e6), (3e6, 7e6), (1.0, 1e7), (5e6, 0.5)]:
        for p in (0.025, 0.5, 0.975):
            assert S.betaincinv(a, b, p) == pytest.approx(sp.betaincinv(a, b, p), rel=1e-7)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 11, 29, 99, 1_000, 100_000])
def test_t_quantiles_agree_with_scipy(df):
    for p in (0.5, 0.6, 0.9, 0.975, 0.995, 0.9995, 0.025, 0.001):
        assert S.t_ppf(p, float(df)) == pytest.approx(sps.t.ppf(p, df), rel=1e-10, abs=1e-14)
    assert S.t_ppf(0.975, np.inf) == pytest.approx(Z, rel=1e-12)
    assert math.isnan(S.t_ppf(0.975, 0.0))


def test_clopper_pearson_is_scipys_exact_binomial_interval():
    for n in (1, 2, 7, 20, 240, 5000):
        for x in sorted({0, 1, n // 3, n - 1, n}):
            lo, hi = I.clopper_pearson(np.array([x]), np.array([n]), 0.95)
            ref = sps.binomtest(x, n).proportion_ci(0.95, method="exact")
            assert lo[0] == pytest.approx(ref.low, abs=1e-12) and hi[0] == pytest.approx(ref.high, abs=1e-12)


def test_jeffreys_and_wilson_at_integer_n_match_references():
    for n, x in [(10, 0), (10, 3), (50, 49), (200, 17)]:
        lo, hi = I.jeffreys(np.array([x]), np.array([n]), 0.95)
        ref = sps.beta.ppf([0.025, 0.975], x + 0.5, n - x + 0.5)
        assert (lo[0] == 0.0 if x == 0 else lo[0] == pytest.approx(ref[0], rel=1e-10))
        assert (hi[0] == 1.0 if x == n else hi[0] == pytest.approx(ref[1], rel=1e-10))
        wl, wh = I.wilson(np.array([x / n]), np.array([n]), 0.95)
        rl, rh = stats.wilson_interval(x, n)
        assert wl[0] == pytest.approx(float(rl), abs=1e-14) and wh[0] == pytest.approx(float(rh), abs=1e-14)


def test_mid_p_bounds_solve_the_mid_p_tail_equations_of_scipys_binomial():
    """Mid-p Clopper–Pearson at integer n: P(X > x) + ½P(X = x) = α/2 at the lower bound, the mirror at the upper."""
    for n in (1, 3, 10, 30, 240):
        for x in sorted({0, 1, 2, n // 2, n - 1, n} & set(range(n + 1))):
            for level in (0.9, 0.95):
                a = 1 - level
                lo, hi = I.clopper_pearson_midp(np.array([x]), np.array([n]), level)
                if x == 0:
                    assert lo[0] == 0.0
                else:
                    assert sps.binom.sf(x, n, lo[0]) + 0.5 * sps.binom.pmf(x, n, lo[0]) == pytest.approx(a / 2, abs=1e-12)
                if x == n:
                    assert hi[0] == 1.0
                else:
                    assert sps.binom.cdf(x - 1, n, hi[0]) + 0.5 * sps.binom.pmf(x, n, hi[0]) == pytest.approx(a / 2,
                                                                                                            abs=1e-12)
                cl, ch = I.clopper_pearson(np.array([x]), np.array([n]), level)
                assert cl[0] <= lo[0] + 1e-15 and hi[0] <= ch[0] + 1e-15  # mid-p is inside the exact interval
    assert I.clopper_pearson_midp(np.array([0.0]), np.array([30.0]), 0.95)[1][0] == pytest.approx(1 - 0.05 ** (1 / 30))


def test_mid_p_at_fractional_counts_is_continuous_and_the_mean_of_two_beta_tails():
    x = np.linspace(0.0, 17.4, 400)
    m = np.full_like(x, 17.4)
    lo, hi = I.clopper_pearson_midp(x, m, 0.95)
    assert np.all(np.diff(lo) >= 0) and np.all(np.diff(hi) >= 0)
    assert np.max(np.abs(np.diff(lo))) < 0.01 and np.max(np.abs(np.diff(hi))) < 0.01
    for xi, li, ui in zip(x[1:-1:37], lo[1:-1:37], hi[1:-1:37], strict=True):
        tail = 0.5 * (sp.betainc(xi, 17.4 - xi + 1, li) + (sp.betainc(xi + 1, 17.4 - xi, li) if xi < 17.4 else 0.0))
        assert tail == pytest.approx(0.025, abs=1e-12)
        tail_u = 0.5 * ((1 - sp.betainc(xi + 1, 17.4 - xi, ui)) + (1 - sp.betainc(xi, 17.4 - xi + 1, ui)))
        assert tail_u == pytest.approx(0.025, abs=1e-12)


def test_unequal_tail_clopper_pearson_and_the_tilt():
    for n, x, t_lo, t_hi in [(20, 3, 0.03, 0.02), (240, 17, 0.01, 0.04), (7, 0, 0.03, 0.02), (7, 7, 0.02, 0.03)]:
        lo, hi = I.clopper_pearson_tails(np.array([x]), np.array([n]), t_lo, t_hi)
        assert lo[0] == (0.0 if x == 0 else pytest.approx(sps.beta.ppf(t_lo, x, n - x + 1), rel=1e-10))
        assert hi[0] == (1.0 if x == n else pytest.approx(sps.beta.ppf(1 - t_hi, x + 1, n - x), rel=1e-10))
        if x not in (0, n):  # the exact tail probabilities of the binomial at each bound
            assert sps.binom.sf(x - 1, n, lo[0]) == pytest.approx(t_lo, rel=1e-9)
            assert sps.binom.cdf(x, n, hi[0]) == pytest.approx(t_hi, rel=1e-9)
    t_lo, t_hi = I.tilted_tails(np.array([0.0, 0.2, 0.5, 0.8, 1.0]), 0.95)
    assert t_lo + t_hi == pytest.approx(np.full(5, 0.05))
    assert t_lo == pytest.approx([0.03, 0.028, 0.025, 0.022, 0.02]) and t_hi == pytest.approx(t_lo[::-1])
    with pytest.raises(ValueError, match="tilt"):
        I.tilted_tails(np.array([0.1]), 0.95, tilt=0.5)


def test_tilted_interval_mirrors_under_swapping_hits_and_misses():
    rng = np.random.default_rng(4)
    n = rng.integers(1, 25, (50, 9)).astype(float)
    h = rng.binomial(n.astype(int), rng.beta(0.5, 3, (50, 9))).astype(float)
    _, N, r, v, k = I.ratio_moments(h, n)
    lo, hi = I.korn_graubard_tilted(r, v, N, k, 0.95)
    _, N2, r2, v2, k2 = I.ratio_moments(n - h, n)
    lo2, hi2 = I.korn_graubard_tilted(r2, v2, N2, k2, 0.95)
    assert lo == pytest.approx(1 - hi2, abs=1e-12) and hi == pytest.approx(1 - lo2, abs=1e-12)
    l0, h0 = I.korn_graubard(r, v, N, k, 0.95)
    below = r < 0.5  # under ½ the tilted interval reaches further up (and less far down) than the equal-tailed one
    assert np.all(hi[below] >= h0[below]) and np.all(lo[below] >= l0[below])
    m = I.effective_trials(r, v, N, k, 0.95)
    ml, mh = I.korn_graubard_midp(r, v, N, k, 0.95)
    rl, rh = I.clopper_pearson_midp(r * m, m, 0.95)
    assert ml == pytest.approx(rl, rel=1e-14) and mh == pytest.approx(rh, rel=1e-14)


# ---------------------------------------------------------------- linearisation variance by brute force

def test_linearisation_variance_is_k_over_k_minus_1_times_exact_bootstrap_variance_of_residual_sum():
    """v = k/(k−1) · Var*(Σ e*_i) / N², Var* over all k^k equally likely cluster draws (exact fractions)."""
    h, n = [3, 0, 5, 1], [10, 4, 12, 6]
    k, N = len(h), sum(n)
    r = Fraction(sum(h), N)
    e = [hi - r * ni for hi, ni in zip(h, n, strict=True)]
    sums = [sum(e[i] for i in draw) for draw in itertools.product(range(k), repeat=k)]
    mean = sum(sums, Fraction(0)) / len(sums)
    var = sum(((s - mean) ** 2 for s in sums), Fraction(0)) / len(sums)
    expected = Fraction(k, k - 1) * var / N ** 2
    _, _, rr, v, kk = I.ratio_moments(np.array(h), np.array(n))
    assert rr[0] == pytest.approx(float(r), rel=1e-15) and kk[0] == k
    assert v[0] == pytest.approx(float(expected), rel=1e-13)


def test_paired_covariance_by_brute_force():
    hA, nA, hB, nB = [3, 0, 5, 1], [10, 4, 12, 6], [1, 1, 2, 0], [9, 5, 12, 6]
    k = 4
    rA, rB = Fraction(sum(hA), sum(nA)), Fraction(sum(hB), sum(nB))
    eA = [h - rA * n for h, n in zip(hA, nA, strict=True)]
    eB = [h - rB * n for h, n in zip(hB, nB, strict=True)]
    draws = list(itertools.product(range(k), repeat=k))
    sa = [sum(eA[i] for i in d) for d in draws]
    sb = [sum(eB[i] for i in d) for d in draws]
    ma, mb = sum(sa, Fraction(0)) / len(draws), sum(sb, Fraction(0)) / len(draws)
    cov = sum(((x - ma) * (y - mb) for x, y in zip(sa, sb, strict=True)), Fraction(0)) / len(draws)
    expected = Fraction(k, k - 1) * cov / (sum(nA) * sum(nB))
    got = I.ratio_covariance(np.array(hA), np.array(nA), np.array(hB), np.array(nB))
    assert got[0] == pytest.approx(float(expected), rel=1e-13)


# ---------------------------------------------------------------- the public default against a scipy recomputation

def _df_reference(h, n):
    """Bell–McCaffrey df by explicit matrices: v ∝ yᵀAy, A = MᵀW²M, M = I − 1wᵀ, w = n / Σn; df = tr(A)² / tr(A²)."""
    n = np.asarray(n, float)
    n = n[n > 0]
    k = n.size
    w = n / n.sum()
    M = np.eye(k) - np.outer(np.ones(k), w)
    A = M.T @ np.diag(w * w) @ M
    df = np.trace(A) ** 2 / np.trace(A @ A)
    return k - 1.0 if abs(df - (k - 1)) <= 1e-9 * k else min(df, k - 1.0)


def _factor_reference(n):
    """Bell–McCaffrey variance factor by explicit matrices: Var(r) / E[v] = Σw² / (k/(k − 1) · tr(MᵀW²M)) under
    independent cluster rates with a common variance; applied (else 1) only where the df is at most ½ (k − 1)."""
    n = np.asarray(n, float)
    n = n[n > 0]
    k = n.size
    w = n / n.sum()
    M = np.eye(k) - np.outer(np.ones(k), w)
    c = max(float(np.sum(w * w) / (k / (k - 1) * np.trace(M.T @ np.diag(w * w) @ M))), 1.0)
    return c if _df_reference(None, n) <= 0.5 * (k - 1) else 1.0


def _kg_reference(h, n, level=0.95, tilt=0.1, factor=1.0):
    """Korn & Graubard (1998) recomputed with scipy: CP at x* = r n*, n* = min(r(1−r)/v, Σn)·(z/t_df)²;
    tails α(½ + tilt(1 − 2r)) below and α(½ − tilt(1 − 2r)) above (tilt 0: the equal-tailed original);
    df the Bell–McCaffrey df of the cluster sizes (k − 1 when they are equal); v times ``factor``."""
    h, n = np.asarray(h, float), np.asarray(n, float)
    N, r = n.sum(), h.sum() / n.sum()
    k = int((n > 0).sum())
    v = factor * k / (k - 1) * np.sum((h - r * n) ** 2) / N ** 2
    neff = min(r * (1 - r) / v, N) if v > 0 else N
    z, t = sps.norm.ppf(0.5 + level / 2), sps.t.ppf(0.5 + level / 2, _df_reference(h, n))
    m = neff * (z / t) ** 2
    x = r * m
    a = 1 - level
    a_lo, a_hi = a * (0.5 + tilt * (1 - 2 * r)), a * (0.5 - tilt * (1 - 2 * r))
    lo = sps.beta.ppf(a_lo, x, m - x + 1) if x > 0 else 0.0
    hi = sps.beta.ppf(1 - a_hi, x + 1, m - x) if x < m else 1.0
    return r, math.sqrt(v), lo, hi


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", ["korn-graubard-tilted", "korn-graubard"])
def test_default_rate_interval_is_tilted_korn_graubard(seed, method):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 40))
    n = rng.integers(0, 30, k)
    n[0] = max(n[0], 1)
    h = rng.binomial(n, rng.beta(0.5, 3, k))
    kwargs = {} if method == stats.cluster_intervals.DEFAULT_METHOD else {"method": method}
    res = stats.cluster_rate_ci(np.arange(k), h, n, seed=1, **kwargs)
    c = _factor_reference(n)
    r, se, lo, hi = _kg_reference(h[n > 0], n[n > 0], tilt=0.1 if method == "korn-graubard-tilted" else 0.0,
                                  factor=c)
    assert stats.cluster_intervals.DEFAULT_METHOD == "korn-graubard-tilted"
    assert res.interval_method == method and "Korn–Graubard" in res.method
    assert res.statistic == pytest.approx(r, rel=1e-14)
    assert res.standard_error == pytest.approx(se / math.sqrt(c), rel=1e-12)  # the linearisation SE, unscaled
    assert res.confidence_interval.low == pytest.approx(lo, rel=1e-9, abs=1e-14)
    assert res.confidence_interval.high == pytest.approx(hi, rel=1e-9, abs=1e-14)
    assert res.n_resamples == 0 and res.bootstrap_distribution.size == 0


def test_confidence_level_is_respected():
    h, n = [3, 0, 5, 1, 2], [10, 4, 12, 6, 8]
    for level in (0.8, 0.9, 0.99):
        res = stats.cluster_rate_ci(np.arange(5), h, n, confidence_level=level)
        _, _, lo, hi = _kg_reference(h, n, level)
        assert tuple(res.confidence_interval) == pytest.approx((lo, hi), rel=1e-9)
    w = [np.diff(stats.cluster_rate_ci(np.arange(5), h, n, confidence_level=c).confidence_interval)[0]
         for c in (0.8, 0.9, 0.95, 0.99)]
    assert np.all(np.diff(w) > 0)


def test_t_method_is_the_t_interval_on_the_linearised_ratio():
    h, n = np.array([3, 0, 5, 1, 2, 7]), np.array([10, 4, 12, 6, 8, 9])
    res = stats.cluster_rate_ci(np.arange(6), h, n, method="t")
    r, se, _, _ = _kg_reference(h, n)
    t = sps.t.ppf(0.975, _df_reference(h, n))  # unequal sizes: the design df (k − 1 = 5 for equal ones)
    assert res.interval_method == "t"
    assert tuple(res.confidence_interval) == pytest.approx((r - t * se, r + t * se), rel=1e-12)


def test_korn_graubard_approaches_the_t_interval_with_many_trials_and_clusters():
    rng = np.random.default_rng(3)
    k = 3000
    n = np.full(k, 200)
    h = rng.binomial(n, rng.beta(20, 60, k))
    kg = stats.cluster_rate_ci(np.arange(k), h, n).confidence_interval
    t = stats.cluster_rate_ci(np.arange(k), h, n, method="t").confidence_interval
    assert kg.low == pytest.approx(t.low, abs=2e-4) and kg.high == pytest.approx(t.high, abs=2e-4)


# ---------------------------------------------------------------- differences: MOVER of the arms' intervals

@pytest.mark.parametrize("method", ["korn-graubard-tilted", "korn-graubard"])
def test_default_difference_is_mover_of_arm_korn_graubard_intervals(method):
    rng = np.random.default_rng(11)
    tilt = 0.1 if method == "korn-graubard-tilted" else 0.0
    k = 12
    pa = rng.beta(0.5, 3, k)
    hA, hB = rng.binomial(20, pa), rng.binomial(20, 0.4 * pa)
    cluster = np.repeat(np.arange(k), 2)
    arm = np.tile([1, 0], k)
    hits = np.column_stack([hA, hB]).ravel()
    kwargs = {} if method == stats.cluster_intervals.DEFAULT_METHOD else {"method": method}
    res = stats.cluster_rate_ci(cluster, hits, np.full(2 * k, 20), arm=arm, **kwargs)
    rA, sA, lA, uA = _kg_reference(hA, np.full(k, 20), tilt=tilt)
    rB, sB, lB, uB = _kg_reference(hB, np.full(k, 20), tilt=tilt)
    eA, eB = hA - rA * 20, hB - rB * 20
    rho = (k / (k - 1) * np.sum(eA * eB) / (20 * k) ** 2) / (sA * sB)
    lo = rA - rB - math.sqrt((rA - lA) ** 2 + (uB - rB) ** 2 - 2 * rho * (rA - lA) * (uB - rB))
    hi = rA - rB + math.sqrt((uA - rA) ** 2 + (rB - lB) ** 2 - 2 * rho * (uA - rA) * (rB - lB))
    assert res.interval_method == "mover-" + method
    assert res.statistic == pytest.approx(rA - rB, rel=1e-14)
    assert tuple(res.confidence_interval) == pytest.approx((lo, hi), rel=1e-9)
    assert res.standard_error == pytest.approx(math.sqrt(sA ** 2 + sB ** 2 - 2 * rho * sA * sB), rel=1e-10)


def test_mover_of_symmetric_intervals_is_the_wald_interval_of_the_difference():
    dA, dB, sA, sB, rho = 0.3, 0.1, 0.04, 0.03, 0.6
    lo, hi = I.mover(np.array([dA]), np.array([dA - Z * sA]), np.array([dA + Z * sA]),
                     np.array([dB]), np.array([dB - Z * sB]), np.array([dB + Z * sB]), np.array([rho]))
    half = Z * math.sqrt(sA ** 2 + sB ** 2 - 2 * rho * sA * sB)
    assert (lo[0], hi[0]) == pytest.approx((dA - dB - half, dA - dB + half), rel=1e-13)


def test_t_method_for_a_difference_uses_the_paired_linearised_variance():
    hA, hB, n = np.array([3, 0, 5, 1, 2, 7]), np.array([1, 0, 2, 2, 0, 3]), np.array([10, 4, 12, 6, 8, 9])
    cluster, arm = np.repeat(np.arange(6), 2), np.tile([1, 0], 6)
    res = stats.cluster_rate_ci(cluster, np.column_stack([hA, hB]).ravel(), np.repeat(n, 2), arm=arm,
                                     method="t")
    rA, rB, N = hA.sum() / n.sum(), hB.sum() / n.sum(), n.sum()
    e = (hA - rA * n) - (hB - rB * n)
    se = math.sqrt(6 / 5 * np.sum(e ** 2) / N ** 2)
    t = sps.t.ppf(0.975, _df_reference(hA, 2 * n))  # the design df of the prompts' trials in both arms
    assert tuple(res.confidence_interval) == pytest.approx((rA - rB - t * se, rA - rB + t * se), rel=1e-12)


# ---------------------------------------------------------------- many == single, edge cases, validation

def test_many_equals_single_calls_for_columns_and_differences():
    rng = np.random.default_rng(5)
    k = 15
    cluster = np.repeat(np.arange(k), 3)
    hits = rng.binomial(20, 0.2, (3 * k, 3))
    n = np.full(3 * k, 20)
    for method in ("korn-graubard-tilted", "korn-graubard", "t"):
        res = stats.cluster_rate_ci_many(cluster, hits, n, differences=[(0, 2), ([0, 1], 2)], method=method)
        for j in range(3):
            single = stats.cluster_rate_ci(cluster, hits[:, j], n, method=method)
            assert tuple(res[j].confidence_interval) == pytest.approx(tuple(single.confidence_interval), rel=1e-12)
            assert res[j].interval_method == single.interval_method
        arm = np.repeat([[1, 0]], 3 * k, axis=0).ravel()
        pair = stats.cluster_rate_ci(np.repeat(cluster, 2), np.column_stack([hits[:, 0], hits[:, 2]]).ravel(),
                                          np.repeat(n, 2), arm=arm, method=method)
        assert tuple(res[3].confidence_interval) == pytest.approx(tuple(pair.confidence_interval), rel=1e-12)
        pooled_a = np.column_stack([hits[:, 0] + hits[:, 1], hits[:, 2]]).ravel()
        pooled = stats.cluster_rate_ci(np.repeat(cluster, 2), pooled_a,
                                            np.column_stack([2 * n, n]).ravel(), arm=arm, method=method)
        assert tuple(res[4].confidence_interval) == pytest.approx(tuple(pooled.confidence_interval), rel=1e-12)


def test_edge_cases_stay_defined():
    empty = stats.cluster_rate_ci(["a", "b"], [0, 0], [0, 0])
    assert math.isnan(empty.statistic) and all(map(math.isnan, empty.confidence_interval))
    single = stats.cluster_rate_ci(["a", "a"], [2, 1], [5, 5])
    assert single.statistic == 0.3 and tuple(single.confidence_interval) == (0.0, 1.0)  # one prompt: no information
    zero = stats.cluster_rate_ci([1, 2, 3], [0, 0, 0], [5, 6, 7])
    m = 18 * (Z / sps.t.ppf(0.975, _df_reference([0, 0, 0], [5, 6, 7]))) ** 2  # v = 0: n_eff = Σn, then the df
    assert zero.confidence_interval.low == 0.0  # r = 0: the upper tail is α(½ − 0.1) = 0.02
    assert zero.confidence_interval.high == pytest.approx(1 - 0.02 ** (1 / m), rel=1e-10)
    one = stats.cluster_rate_ci([1, 2, 3], [5, 6, 7], [5, 6, 7])
    assert one.confidence_interval.high == 1.0
    assert one.confidence_interval.low == pytest.approx(0.02 ** (1 / m), rel=1e-10)
    zero_kg = stats.cluster_rate_ci([1, 2, 3], [0, 0, 0], [5, 6, 7], method="korn-graubard")
    assert zero_kg.confidence_interval.high == pytest.approx(1 - 0.025 ** (1 / m), rel=1e-10)
    both_zero = stats.cluster_rate_ci([1, 1, 2, 2, 3, 3], [0] * 6, [5] * 6, arm=[1, 0] * 3)
    assert both_zero.statistic == 0.0 and both_zero.confidence_interval.low < 0 < both_zero.confidence_interval.high
    no_b = stats.cluster_rate_ci([1, 2], [1, 2], [4, 4], arm=[1, 1])
    assert math.isnan(no_b.statistic) and math.isnan(no_b.confidence_interval.low)
    t_single = stats.cluster_rate_ci(["a"], [1], [4], method="t")
    assert tuple(t_single.confidence_interval) == (0.0, 1.0)  # one cluster: the whole range, as Korn–Graubard's
    many = stats.cluster_rate_ci_many([1, 2, 3], np.array([[0, 0], [0, 2], [0, 0]]), np.array([[5, 0], [5, 4],
                                                                                                   [5, 4]]))
    assert many[0].confidence_interval.high > 0 and many[1].n_clusters == 3


def test_method_validation_and_percentile_still_available():
    with pytest.raises(ValueError, match="method"):
        stats.cluster_rate_ci([1, 2], [0, 1], [2, 2], method="bca")
    with pytest.raises(ValueError, match="confidence_level"):
        stats.cluster_rate_ci([1, 2], [0, 1], [2, 2], confidence_level=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        stats.cluster_rate_ci_many([1, 2], [0, 1], [2, 2], n_resamples=0)
    res = stats.cluster_rate_ci(np.arange(8), [0, 1, 2, 3, 1, 0, 2, 4], [5] * 8, method="percentile",
                                     n_resamples=500, seed=2)
    assert res.interval_method == "percentile" and res.n_resamples == 500
    assert res.bootstrap_distribution.size == 500 and "percentile" in res.method


def test_exact_coverage_by_enumeration_in_a_tiny_binomial_design():
    """Independent trials (no prompt effect), 4 prompts x 3 runs: the exact coverage, summing the binomial
    probability of every outcome (3^4... counts per prompt), is at least nominal for the default interval."""
    k, runs = 4, 3
    outcomes = list(itertools.product(range(runs + 1), repeat=k))
    h = np.array(outcomes, dtype=float)
    n = np.full(h.shape, float(runs))
    _, N, r, v, kk = I.ratio_moments(h, n)
    for fn in (I.korn_graubard, I.korn_graubard_tilted):
        lo, hi = fn(r, v, N, kk, 0.95)
        for p in (0.05, 0.2, 0.5, 0.8):
            prob = np.prod(sps.binom.pmf(h.astype(int), runs, p), axis=1)
            assert prob.sum() == pytest.approx(1.0)
            coverage = prob[(lo <= p) & (p <= hi)].sum()
            assert coverage >= 0.95


# ---------------------------------------------------------------- degrees of freedom that follow the design

def test_design_df_matches_the_matrix_form_and_is_k_minus_1_for_equal_sizes():
    rng = np.random.default_rng(29)
    for _ in range(40):
        k = int(rng.integers(2, 30))
        n = np.floor(np.exp(rng.uniform(0, math.log(101), k))) if rng.random() < 0.7 else np.full(k, 9.0)
        n[rng.random(k) < 0.1] = 0  # clusters without trials are left out
        n[:2] = np.maximum(n[:2], 1)
        h = rng.binomial(n.astype(int), rng.beta(0.5, 2, k)).astype(float)
        got = I.design_df(n)[0]
        assert got == pytest.approx(_df_reference(h, n), rel=1e-9)
        assert 0 < got <= (n > 0).sum() - 1
    n = np.full((3, 12), 7.0)
    h = rng.binomial(7, 0.3, (3, 12)).astype(float)
    assert np.array_equal(I.design_df(n), np.full(3, 11.0))  # equal sizes: exactly k − 1


def test_equal_sizes_keep_the_published_k_minus_1_interval():
    rng = np.random.default_rng(30)
    h = rng.binomial(20, rng.beta(0.5, 3, 10))
    res = stats.cluster_rate_ci(np.arange(10), h, np.full(10, 20))
    r, v, N, k = I.ratio_moments(h, np.full(10, 20))[2], I.ratio_moments(h, np.full(10, 20))[3], 200.0, 10.0
    lo, hi = I.korn_graubard_tilted(r, v, np.array([N]), np.array([k]), 0.95)  # df defaults to k − 1
    assert tuple(res.confidence_interval) == (lo[0], hi[0]) and "9 df" in res.method


def test_a_few_big_prompts_lower_the_df_and_widen_the_interval():
    n = np.array([200, 200] + [3] * 18)
    h = np.array([30, 120] + [1, 0, 2] * 6)
    res = stats.cluster_rate_ci(np.arange(20), h, n)
    _, N, r, v, k = I.ratio_moments(h, n)
    old = I.korn_graubard_tilted(r, v, N, k, 0.95)
    df = I.design_df(n)[0]
    assert df < 5 and "Bell–McCaffrey" in res.method and f"{df:.1f} df" in res.method
    assert res.confidence_interval.low < old[0][0] and res.confidence_interval.high > old[1][0]


@pytest.mark.parametrize("method", ["korn-graubard-tilted", "korn-graubard", "t"])
def test_one_prompt_difference_is_consistent_with_its_arms(method):
    """3/10 vs 1/10 on one prompt: each arm is [0, 1], so A − B is [−1, 1] (MOVER gave [−0.749, 0.907])."""
    res = stats.cluster_rate_ci(["p", "p"], [3, 1], [10, 10], arm=[1, 0], method=method)
    assert tuple(res.confidence_interval) == (-1.0, 1.0)
    assert "fewer than 2 clusters" in res.method
    # one arm on one prompt, the other on several: [lA − uB, uA − lB] with A = [0, 1]
    res = stats.cluster_rate_ci(["p", "p", "q", "r"], [3, 1, 2, 4], [10, 10, 10, 10], arm=[1, 0, 0, 0],
                                method=method)
    b = stats.cluster_rate_ci(["p", "q", "r"], [1, 2, 4], [10, 10, 10], method=method).confidence_interval
    assert res.confidence_interval.low == pytest.approx(0.0 - b.high) and res.confidence_interval.high == (
        pytest.approx(1.0 - b.low))


# ---------------------------------------------------------------- the Bell–McCaffrey variance factor of A − B's arms

def _factor_by_enumeration(n, p=0.3):
    """Var(r) / E[v] by enumerating every outcome of independent Bernoulli(p) cluster rates (a common variance)."""
    n = np.asarray(n, float)
    n = n[n > 0]
    k = n.size
    w = n / n.sum()
    ys = np.array(list(itertools.product((0.0, 1.0), repeat=k)))
    prob = np.prod(np.where(ys == 1.0, p, 1 - p), axis=1)
    r = ys @ w
    v = k / (k - 1) * np.sum((w * (ys - r[:, None])) ** 2, axis=1)  # Σ(h − r n)² / N² = Σ w²(y − r)²
    var_r = np.sum(prob * (r - p) ** 2)
    return var_r / np.sum(prob * v)


def test_design_variance_factor_matches_enumeration_and_is_1_for_equal_sizes():
    rng = np.random.default_rng(291)
    for _ in range(30):
        k = int(rng.integers(2, 9))
        n = np.floor(np.exp(rng.uniform(0, math.log(201), k)))
        if k > 2 and rng.random() < 0.3:
            n[0] = 0.0  # a cluster without trials is left out
            n[1:3] = np.maximum(n[1:3], 1)
        got = I.design_variance_factor(n, gate=None)[0]
        assert got == pytest.approx(max(_factor_by_enumeration(n), 1.0), rel=1e-10)
        assert got == pytest.approx(_factor_by_enumeration(n, p=0.8), rel=1e-10)  # free of p: a common variance
        gated = I.design_variance_factor(n)[0]  # the default: only where the df is at most ½ (k − 1)
        assert gated == (got if _df_reference(None, n) <= 0.5 * ((n > 0).sum() - 1) else 1.0)
    assert np.array_equal(I.design_variance_factor(np.full((3, 9), 7.0)), np.ones(3))
    assert I.design_variance_factor(np.array([5.0, 0.0, 0.0]))[0] == 1.0  # one cluster: nothing to correct
    few = np.array([200.0] + [5.0] * 7)
    mild = np.array([20.0, 18, 15, 12, 9, 20])  # error rows thinning some prompts: df 4.2 of 5, factor 1.04
    assert I.design_variance_factor(mild, gate=None)[0] > 1.0 and I.design_variance_factor(mild)[0] == 1.0
    assert 20 < I.design_variance_factor(few)[0] < 30  # one of 8 prompts holding 85% of the trials: about 27


def test_unequal_difference_is_mover_of_arms_with_the_bell_mccaffrey_factor():
    rng = np.random.default_rng(292)
    k = 10
    n = np.array([150, 120] + list(rng.integers(1, 12, k - 2)))
    pa = rng.beta(1, 4, k)
    hA, hB = rng.binomial(n, pa), rng.binomial(n, 0.5 * pa)
    cluster = np.repeat(np.arange(k), 2)
    arm = np.tile([1, 0], k)
    res = stats.cluster_rate_ci(cluster, np.column_stack([hA, hB]).ravel(), np.repeat(n, 2), arm=arm)
    c = _factor_by_enumeration(n)
    rA, sA, lA, uA = _kg_reference(hA, n, factor=c)
    rB, sB, lB, uB = _kg_reference(hB, n, factor=c)
    N = n.sum()
    eA, eB = hA - rA * n, hB - rB * n
    rho = (k / (k - 1) * np.sum(eA * eB) / N ** 2) / (sA * sB / c)  # the correlation of the unscaled variances
    lo = rA - rB - math.sqrt((rA - lA) ** 2 + (uB - rB) ** 2 - 2 * rho * (rA - lA) * (uB - rB))
    hi = rA - rB + math.sqrt((uA - rA) ** 2 + (rB - lB) ** 2 - 2 * rho * (uA - rA) * (rB - lB))
    assert c > 1.5
    assert tuple(res.confidence_interval) == pytest.approx((lo, hi), rel=1e-9)
    assert f"× {c:.2f}" in res.method and "Bell–McCaffrey bias factor" in res.method
    equal = stats.cluster_rate_ci(cluster, np.minimum(np.column_stack([hA, hB]).ravel(), 9), np.full(2 * k, 9),
                                  arm=arm)
    assert "bias factor" not in equal.method  # equal sizes: factor 1, the interval as before


def test_unequal_rate_is_korn_graubard_with_the_bell_mccaffrey_factor():
    """A few big prompts: the rate's variance carries the factor (as A − B's arms do), named in the method."""
    n = np.array([200, 200] + [3] * 18)
    h = np.array([30, 120] + [1, 0, 2] * 6)
    c = _factor_reference(n)
    res = stats.cluster_rate_ci(np.arange(20), h, n)
    _, _, lo, hi = _kg_reference(h, n, factor=c)
    assert c > 1.2 and c == pytest.approx(I.design_variance_factor(n)[0], rel=1e-12)
    assert tuple(res.confidence_interval) == pytest.approx((lo, hi), rel=1e-9)
    assert f"variance × {c:.2f}" in res.method and "Bell–McCaffrey bias factor" in res.method
    many = stats.cluster_rate_ci_many(np.arange(20), np.column_stack([h, n - h]), n)
    assert tuple(many[0].confidence_interval) == tuple(res.confidence_interval)


@pytest.mark.parametrize("seed", range(4))
def test_equal_and_mildly_unequal_sizes_give_bit_identical_rate_intervals(seed):
    """Where the factor is 1 (equal sizes; df above ½ (k − 1)) the rate interval is bit for bit the design-df
    interval without it: the factor is snapped to exactly 1.0 and v · 1.0 == v in IEEE arithmetic."""
    rng = np.random.default_rng([2910, seed])
    R, k = 200, int(rng.integers(2, 60))
    runs = int(rng.integers(1, 30))
    for n in (np.full((R, k), float(runs)),  # equal sizes: the published k − 1 rule
              rng.binomial(runs, 1.0 - rng.uniform(0, 0.6, (R, k))).astype(np.float64)):  # error rows thinning cells
        h = rng.binomial(n.astype(np.int64), rng.beta(0.5, 3, (R, k))).astype(np.float64)
        c = I.design_variance_factor(n)
        keep = c == 1.0
        assert keep.all() if n.min() == n.max() else keep.mean() > 0.9
        _, N, r, v, kk = I.ratio_moments(h, n)
        old = I.korn_graubard_tilted(r, v, N, kk, 0.95, df=I.design_df(n))
        res = stats.cluster_intervals.rate_results(h, n, 0.95, "korn-graubard-tilted")
        lo = np.array([x.confidence_interval.low for x in res])
        hi = np.array([x.confidence_interval.high for x in res])
        np.testing.assert_array_equal(np.where(keep, lo, 0.0), np.where(keep, old[0], 0.0))
        np.testing.assert_array_equal(np.where(keep, hi, 0.0), np.where(keep, old[1], 0.0))

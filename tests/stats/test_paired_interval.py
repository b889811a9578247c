"""The paired intervals of A − B (``stats.paired_difference_ci``, ``stats.intervals.paired_t``) against scipy and brute force.

Why this exists: the paired interval is measured against MOVER in benchmarks/paired_coverage.py and
benchmarks/interval_coverage.py; those figures are only worth something if the interval is the formula
docs/statistics-coverage.md states. Here each part is recomputed independently: the paired variance by an
explicit loop over clusters, the Bell–McCaffrey df by explicit matrices, the t quantile by scipy, the arms'
bounds by scipy's Beta quantiles, and the coverage of a tiny design by enumerating every outcome.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

import stats
from stats import intervals as I


def _df_matrix(w: np.ndarray) -> float:
    """Bell–McCaffrey df by explicit matrices (as tests/stats/test_stats_intervals.py): tr(A)² / tr(A²)."""
    w = w[w > 0] / w[w > 0].sum()
    k = w.size
    M = np.eye(k) - np.outer(np.ones(k), w)
    A = M.T @ np.diag(w * w) @ M
    df = np.trace(A) ** 2 / np.trace(A @ A)
    return k - 1.0 if abs(df - (k - 1)) <= 1e-9 * k else min(df, k - 1.0)


def _arm_reference(h: np.ndarray, n: np.ndarray, level: float = 0.95, tilt: float = 0.1) -> tuple[float, float]:
    """The arm's default interval (tilted Korn–Graubard, design df), recomputed with scipy."""
    N, r = n.sum(), h.sum() / n.sum()
    k = int((n > 0).sum())
    v = k / (k - 1) * np.sum((h - r * n) ** 2) / N ** 2
    neff = min(r * (1 - r) / v, N) if v > 0 else N
    m = neff * (sps.norm.ppf(0.5 + level / 2) / sps.t.ppf(0.5 + level / 2, _df_matrix(n.astype(float)))) ** 2
    x, a = r * m, 1 - level
    lo = sps.beta.ppf(a * (0.5 + tilt * (1 - 2 * r)), x, m - x + 1) if x > 0 else 0.0
    hi = sps.beta.ppf(1 - a * (0.5 - tilt * (1 - 2 * r)), x + 1, m - x) if x < m else 1.0
    return float(lo), float(hi)


def _reference(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray,
               level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, se) of the paired cluster t, from the formula, with loops and scipy."""
    NA, NB = nA.sum(), nB.sum()
    rA, rB = hA.sum() / NA, hB.sum() / NB
    clusters = [i for i in range(hA.size) if nA[i] + nB[i] > 0]
    k = len(clusters)
    s = 0.0
    for i in clusters:
        s += ((hA[i] - rA * nA[i]) / NA - (hB[i] - rB * nB[i]) / NB) ** 2
    vd = k / (k - 1) * s
    ta, tb = (hA.sum() + 0.5) / (NA + 1), (hB.sum() + 0.5) / (NB + 1)
    v0 = ta * (1 - ta) / NA + tb * (1 - tb) / NB
    se = math.sqrt(max(vd, v0))
    t = sps.t.ppf(0.5 + level / 2, _df_matrix(nA / NA + nB / NB))
    la, ua = _arm_reference(hA, nA, level)
    lb, ub = _arm_reference(hB, nB, level)
    d = rA - rB
    lo, hi = max(d - t * se, la - ub, -1.0), min(d + t * se, ua - lb, 1.0)
    return lo, hi, se


def _reference_shaped(hA: np.ndarray, nA: np.ndarray, hB: np.ndarray, nB: np.ndarray,
                      level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, se) of the shaped paired interval: the paired SE, reaches from the arms' intervals."""
    NA, NB = nA.sum(), nB.sum()
    rA, rB = hA.sum() / NA, hB.sum() / NB
    _, _, se = _reference(hA, nA, hB, nB, level)
    la, ua = _arm_reference(hA, nA, level)
    lb, ub = _arm_reference(hB, nB, level)

    def arm_se(h: np.ndarray, n: np.ndarray) -> float:
        N, r, k = n.sum(), h.sum() / n.sum(), int((n > 0).sum())
        v = k / (k - 1) * np.sum((h - r * n) ** 2) / N ** 2
        t = (h.sum() + 0.5) / (N + 1)
        return math.sqrt(max(v, t * (1 - t) / N))

    sa, sb = arm_se(hA, nA), arm_se(hB, nB)
    wa, wb = sa / (sa + sb), sb / (sa + sb)
    d = rA - rB
    lo = d - se * (wa * (rA - la) / sa + wb * (ub - rB) / sb)
    hi = d + se * (wa * (ua - rA) / sa + wb * (rB - lb) / sb)
    return max(lo, la - ub, -1.0), min(hi, ua - lb, 1.0), se


def _call(hA, nA, hB, nB, level=0.95):
    k = len(hA)
    cluster = np.concatenate([np.arange(k), np.arange(k)])
    arm = np.repeat([1, 0], k)
    return stats.paired_difference_ci(cluster, np.concatenate([hA, hB]), np.concatenate([nA, nB]), arm=arm,
                                      confidence_level=level)


def _designs(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        k = int(rng.integers(2, 25))
        sizes = np.floor(np.exp(rng.uniform(0, math.log(60), k))) if trial % 2 else np.full(k, 8.0)
        nA = sizes.astype(np.int64)
        nB = (sizes if trial % 3 else rng.integers(1, 30, k)).astype(np.int64)
        z = rng.standard_normal(k)
        pA = 1 / (1 + np.exp(-(rng.normal(-1.5, 1) + 1.2 * z)))
        pB = 1 / (1 + np.exp(-(rng.normal(-1.5, 1) + 1.2 * (0.8 * z + 0.6 * rng.standard_normal(k)))))
        yield rng.binomial(nA, pA), nA, rng.binomial(nB, pB), nB, (0.95, 0.9, 0.99)[trial % 3]


def test_paired_t_is_the_formula_recomputed_with_scipy_on_random_designs() -> None:
    for hA, nA, hB, nB, level in _designs(2030, 60):
        f = [x[None, :].astype(float) for x in (hA, nA, hB, nB)]
        _, NA, rA, vA, kA = I.ratio_moments(f[0], f[1])
        _, NB, rB, vB, kB = I.ratio_moments(f[2], f[3])
        arms = (*I.korn_graubard_tilted(rA, vA, NA, kA, level, df=I.design_df(f[1])),
                *I.korn_graubard_tilted(rB, vB, NB, kB, level, df=I.design_df(f[3])))
        lo, hi, var, _ = I.paired_t(*f, level, arms=arms)
        ref = _reference(*(x.astype(float) for x in (hA, nA, hB, nB)), level)
        assert (lo[0], hi[0], math.sqrt(var[0])) == pytest.approx(ref, abs=1e-9)


def test_paired_interval_is_the_formula_recomputed_with_scipy_on_random_designs() -> None:
    for hA, nA, hB, nB, level in _designs(2029, 60):
        res = _call(hA, nA, hB, nB, level)
        lo, hi, se = _reference_shaped(hA.astype(float), nA.astype(float), hB.astype(float), nB.astype(float),
                                       level)
        assert res.interval_method == "paired-shaped"
        assert res.statistic == pytest.approx(hA.sum() / nA.sum() - hB.sum() / nB.sum(), abs=1e-15)
        assert res.confidence_interval.low == pytest.approx(lo, abs=1e-9)
        assert res.confidence_interval.high == pytest.approx(hi, abs=1e-9)
        assert res.standard_error == pytest.approx(se, rel=1e-9)


def test_equal_sizes_use_k_minus_1_df_and_unequal_sizes_fewer() -> None:
    res = _call(np.array([1, 3, 0, 2, 5]), np.full(5, 10), np.array([0, 2, 0, 2, 4]), np.full(5, 10))
    assert "4 df and 4 df" in res.method
    res = _call(np.array([40, 1, 0, 2, 1]), np.array([200, 3, 3, 3, 3]), np.array([35, 0, 0, 1, 1]),
                np.array([200, 3, 3, 3, 3]))
    assert "Bell–McCaffrey" in res.method


def test_no_hit_in_either_arm_is_not_the_degenerate_zero_interval() -> None:
    for k, runs in ((3, 5), (12, 10), (50, 2)):
        res = _call(np.zeros(k, int), np.full(k, runs), np.zeros(k, int), np.full(k, runs))
        lo, hi = res.confidence_interval
        assert res.statistic == 0.0 and lo < 0.0 < hi and lo == pytest.approx(-hi)
        ref = _reference_shaped(np.zeros(k), np.full(k, float(runs)), np.zeros(k), np.full(k, float(runs)))
        assert (lo, hi) == pytest.approx(ref[:2], abs=1e-12)
        # and every trial a hit mirrors it
        res1 = _call(np.full(k, runs), np.full(k, runs), np.full(k, runs), np.full(k, runs))
        assert tuple(res1.confidence_interval) == pytest.approx((lo, hi), abs=1e-12)


def test_swapping_the_arms_negates_the_interval() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        k = int(rng.integers(2, 15))
        n = rng.integers(1, 20, k)
        hA, hB = rng.binomial(n, 0.3), rng.binomial(n, 0.1)
        a, b = _call(hA, n, hB, n), _call(hB, n, hA, n)
        assert b.statistic == pytest.approx(-a.statistic, abs=1e-15)
        assert b.confidence_interval.low == pytest.approx(-a.confidence_interval.high, abs=1e-12)
        assert b.confidence_interval.high == pytest.approx(-a.confidence_interval.low, abs=1e-12)


def test_one_cluster_gives_the_range_its_arms_allow() -> None:
    res = stats.paired_difference_ci(["p", "p"], [3, 1], [10, 10], arm=[1, 0])
    assert tuple(res.confidence_interval) == (-1.0, 1.0) and "fewer than 2 clusters" in res.method


def test_agreeing_arms_near_zero_are_narrower_than_mover() -> None:
    # the same few prompts fire often in both arms (J-shaped rates): MOVER of the skewed arm intervals
    # cannot cancel their reaches, while the paired variance sees the agreement
    hA = np.array([0] * 17 + [9, 8, 10])
    hB = np.array([0] * 17 + [8, 9, 9])
    n = np.full(20, 10)
    paired = _call(hA, n, hB, n)
    mover = stats.cluster_rate_ci(np.tile(np.arange(20), 2), np.concatenate([hA, hB]), np.concatenate([n, n]),
                                  arm=np.repeat([1, 0], 20))
    wp = paired.confidence_interval.high - paired.confidence_interval.low
    wm = mover.confidence_interval.high - mover.confidence_interval.low
    assert paired.confidence_interval.low < paired.statistic < paired.confidence_interval.high
    assert wp < 0.7 * wm


def test_exact_coverage_by_enumeration_of_a_tiny_paired_design() -> None:
    """3 prompts × 2 runs in each arm, the arms independent Binomial(2, p) within every prompt (no prompt
    effect): the exact coverage of the difference 0, summing the probability of all 3^6 outcomes, is at
    least nominal — the binomial floor holds where the linearisation variance alone would collapse."""
    k, runs = 3, 2
    outcomes = np.array(list(itertools.product(range(runs + 1), repeat=2 * k)), dtype=float)
    hA, hB = outcomes[:, :k], outcomes[:, k:]
    n = np.full(hA.shape, float(runs))
    _, NA, rA, vA, kA = I.ratio_moments(hA, n)
    _, NB, rB, vB, kB = I.ratio_moments(hB, n)
    la, ua = I.korn_graubard_tilted(rA, vA, NA, kA, 0.95, df=I.design_df(n))
    lb, ub = I.korn_graubard_tilted(rB, vB, NB, kB, 0.95, df=I.design_df(n))
    for lo, hi in (I.paired_t(hA, n, hB, n, 0.95, arms=(la, ua, lb, ub))[:2],
                   I.paired_shaped(hA, n, hB, n, (la, ua, lb, ub))[:2]):
        for p in (0.05, 0.2, 0.5, 0.9):
            prob = np.prod(sps.binom.pmf(outcomes.astype(int), runs, p), axis=1)
            assert prob.sum() == pytest.approx(1.0)
            assert prob[(lo <= 1e-12) & (-1e-12 <= hi)].sum() >= 0.95

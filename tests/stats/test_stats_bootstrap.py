import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

import stats
from stats.bootstrap import percentile_interval


def exact_bootstrap_moments(values, fn):
    """Mean and variance of fn over all k^k equally likely ordered cluster draws."""
    k = len(values)
    out = []
    for draw in itertools.product(range(k), repeat=k):
        s = np.sum([values[i] for i in draw], axis=0)
        out.append(fn(s))
    out = np.array(out, dtype=float)
    out = out[np.isfinite(out)]
    return out.mean(), out.var()


def test_pooled_rate_resampling_matches_exact_bootstrap_distribution():
    rng = np.random.default_rng(1)
    draws = 20_000
    for i in range(200):
        k = int(rng.integers(1, 5))
        n = rng.integers(1, 30, k)
        h = rng.binomial(n, rng.random(k))
        res = stats.cluster_bootstrap_ci(np.arange(k), h, n, n_resamples=draws, seed=i)
        mean, var = exact_bootstrap_moments(np.column_stack([h, n]), lambda s: s[0] / s[1])
        d = res.bootstrap_distribution
        assert res.statistic == pytest.approx(h.sum() / n.sum())
        assert abs(d.mean() - mean) <= 4 * math.sqrt(var / draws) + 1e-12
        assert res.confidence_interval.low <= res.confidence_interval.high


def test_difference_resamples_clusters_once_for_both_arms():
    rng = np.random.default_rng(2)
    draws = 20_000
    for i in range(200):
        k = int(rng.integers(2, 5))
        n = rng.integers(1, 20, (k, 2))
        h = rng.binomial(n, rng.random((k, 2)))
        cl = np.repeat(np.arange(k), 2)
        arm = np.tile([1, 0], k)
        res = stats.cluster_bootstrap_ci(cl, h.ravel(), n.ravel(), arm=arm, n_resamples=draws, seed=i)
        mean, var = exact_bootstrap_moments(
            np.column_stack([h[:, 0], n[:, 0], h[:, 1], n[:, 1]]), lambda s: s[0] / s[1] - s[2] / s[3]
        )
        assert abs(res.bootstrap_distribution.mean() - mean) <= 4 * math.sqrt(var / draws) + 1e-12
    # Identical arms within every cluster: a shared resample gives exactly zero every time.
    res = stats.cluster_bootstrap_ci([1, 1, 2, 2, 3, 3], [2, 2, 5, 5, 0, 0], [9, 9, 7, 7, 4, 4],
                                     arm=[1, 0, 1, 0, 1, 0], seed=3)
    assert res.statistic == 0.0 and tuple(res.confidence_interval) == (0.0, 0.0)


def test_agrees_with_scipy_bootstrap_percentile():
    rng = np.random.default_rng(4)
    for i in range(3):
        k = 40
        n = rng.integers(5, 30, k)
        h = rng.binomial(n, rng.beta(1, 4, k))
        ours = stats.cluster_bootstrap_ci(np.arange(k), h, n, n_resamples=40_000, seed=i)
        ref = sps.bootstrap((h, n), lambda a, b, axis=-1: a.sum(axis) / b.sum(axis), paired=True,
                            vectorized=True, n_resamples=40_000, method="percentile", rng=np.random.default_rng(i))
        assert ours.confidence_interval.low == pytest.approx(ref.confidence_interval.low, abs=0.006)
        assert ours.confidence_interval.high == pytest.approx(ref.confidence_interval.high, abs=0.006)
        assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.05)


def test_percentile_indexing_is_numpy_type_7():
    v = np.arange(4000, dtype=float)
    lo, hi = percentile_interval(v, 0.95)
    assert (lo, hi) == (pytest.approx(99.975), pytest.approx(3899.025))
    # The ungrounded package reads v[100] and v[3900], one place too high at each end.
    assert lo < v[100] and hi < v[3900]


def test_edge_cases():
    single = stats.cluster_bootstrap_ci(["a", "a"], [2, 1], [5, 5], seed=0)
    assert single.statistic == 0.3 and tuple(single.confidence_interval) == (0.3, 0.3)
    empty = stats.cluster_bootstrap_ci(["a", "b"], [0, 0], [0, 0], seed=0)
    assert math.isnan(empty.statistic) and math.isnan(empty.confidence_interval.low)
    assert empty.n_undefined == empty.n_resamples
    # Cluster "b" has no arm-B trials: resamples drawing only "b" are undefined and excluded.
    res = stats.cluster_bootstrap_ci(["a", "a", "b"], [1, 0, 3], [4, 4, 4], arm=[1, 0, 1], n_resamples=2000, seed=0)
    assert res.n_undefined > 0 and np.isfinite(res.confidence_interval.low)
    assert np.isnan(res.bootstrap_distribution).sum() == res.n_undefined
    allzero = stats.cluster_bootstrap_ci([1, 2, 3], [0, 0, 0], [5, 6, 7], seed=0)
    assert tuple(allzero.confidence_interval) == (0.0, 0.0)
    allone = stats.cluster_bootstrap_ci([1, 2, 3], [5, 6, 7], [5, 6, 7], seed=0)
    assert tuple(allone.confidence_interval) == (1.0, 1.0)
    with pytest.raises(ValueError, match="missing"):
        stats.cluster_bootstrap_ci([1, None], [0, 1], [2, 2])
    with pytest.raises(ValueError, match="confidence_level"):
        stats.cluster_bootstrap_ci([1, 2], [0, 1], [2, 2], confidence_level=1.5)


def test_seed_reproducible_and_confidence_level_respected():
    args = ([1, 2, 3, 4, 5], [0, 3, 1, 5, 2], [10, 10, 10, 10, 10])
    a = stats.cluster_bootstrap_ci(*args, seed=9)
    b = stats.cluster_bootstrap_ci(*args, seed=9)
    assert a.confidence_interval == b.confidence_interval
    assert np.array_equal(a.bootstrap_distribution, b.bootstrap_distribution)
    narrow = stats.cluster_bootstrap_ci(*args, confidence_level=0.5, seed=9)
    assert narrow.confidence_interval.low >= a.confidence_interval.low
    assert narrow.confidence_interval.high <= a.confidence_interval.high

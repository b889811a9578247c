"""The cluster bootstrap percentile path (``method="percentile"``); the analytic default is tested in
test_stats_intervals.py."""

import itertools
import math
from functools import partial

import numpy as np
import pytest
from scipy import stats as sps

import stats
from stats.bootstrap import percentile_interval

percentile_ci = partial(stats.cluster_rate_ci, method="percentile")
percentile_many = partial(stats.cluster_rate_ci_many, method="percentile")


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
        res = percentile_ci(np.arange(k), h, n, n_resamples=draws, seed=i)
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
        res = percentile_ci(cl, h.ravel(), n.ravel(), arm=arm, n_resamples=draws, seed=i)
        mean, var = exact_bootstrap_moments(
            np.column_stack([h[:, 0], n[:, 0], h[:, 1], n[:, 1]]), lambda s: s[0] / s[1] - s[2] / s[3]
        )
        assert abs(res.bootstrap_distribution.mean() - mean) <= 4 * math.sqrt(var / draws) + 1e-12
    # Identical arms within every cluster: a shared resample gives exactly zero every time.
    res = percentile_ci([1, 1, 2, 2, 3, 3], [2, 2, 5, 5, 0, 0], [9, 9, 7, 7, 4, 4],
                                     arm=[1, 0, 1, 0, 1, 0], seed=3)
    assert res.statistic == 0.0 and tuple(res.confidence_interval) == (0.0, 0.0)


def test_agrees_with_scipy_bootstrap_percentile():
    rng = np.random.default_rng(4)
    for i in range(3):
        k = 40
        n = rng.integers(5, 30, k)
        h = rng.binomial(n, rng.beta(1, 4, k))
        ours = percentile_ci(np.arange(k), h, n, n_resamples=40_000, seed=i)
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
    single = percentile_ci(["a", "a"], [2, 1], [5, 5], seed=0)
    assert single.statistic == 0.3 and tuple(single.confidence_interval) == (0.3, 0.3)
    empty = percentile_ci(["a", "b"], [0, 0], [0, 0], seed=0)
    assert math.isnan(empty.statistic) and math.isnan(empty.confidence_interval.low)
    assert empty.n_undefined == empty.n_resamples
    # Cluster "b" has no arm-B trials: resamples drawing only "b" are undefined and excluded.
    res = percentile_ci(["a", "a", "b"], [1, 0, 3], [4, 4, 4], arm=[1, 0, 1], n_resamples=2000, seed=0)
    assert res.n_undefined > 0 and np.isfinite(res.confidence_interval.low)
    assert np.isnan(res.bootstrap_distribution).sum() == res.n_undefined
    allzero = percentile_ci([1, 2, 3], [0, 0, 0], [5, 6, 7], seed=0)
    assert tuple(allzero.confidence_interval) == (0.0, 0.0)
    allone = percentile_ci([1, 2, 3], [5, 6, 7], [5, 6, 7], seed=0)
    assert tuple(allone.confidence_interval) == (1.0, 1.0)
    with pytest.raises(ValueError, match="missing"):
        percentile_ci([1, None], [0, 1], [2, 2])
    with pytest.raises(ValueError, match="confidence_level"):
        percentile_ci([1, 2], [0, 1], [2, 2], confidence_level=1.5)


def test_seed_reproducible_and_confidence_level_respected():
    args = ([1, 2, 3, 4, 5], [0, 3, 1, 5, 2], [10, 10, 10, 10, 10])
    a = percentile_ci(*args, seed=9)
    b = percentile_ci(*args, seed=9)
    assert a.confidence_interval == b.confidence_interval
    assert np.array_equal(a.bootstrap_distribution, b.bootstrap_distribution)
    narrow = percentile_ci(*args, confidence_level=0.5, seed=9)
    assert narrow.confidence_interval.low >= a.confidence_interval.low
    assert narrow.confidence_interval.high <= a.confidence_interval.high


# --- many intervals from one shared resample -------------------------------------------------------------------

from stats import _draws as _K  # noqa: E402
from stats import bootstrap as _boot  # noqa: E402
from stats._rng import kernel_seed  # noqa: E402


@pytest.mark.parametrize("chunk", [None, 1000])
def test_count_matrix_product_equals_direct_accumulation(monkeypatch, chunk):
    """The BLAS path (float32 when exact, else float64) sums exactly what drawing cluster by cluster sums."""
    monkeypatch.setattr(_boot, "DIRECT_MAX_COLUMNS", 0)  # always the count-matrix product
    if chunk:
        monkeypatch.setattr(_boot, "CHUNK_ELEMENTS", chunk)  # many small chunks
    rng = np.random.default_rng(11)
    for i, (k, d) in enumerate([(1, 2), (3, 4), (57, 6), (400, 3), (2500, 5)]):
        for values in (rng.integers(0, 30, (k, d)).astype(float), rng.random((k, d)) * 7):
            got = _boot.resample_clusters(values, 333, seed=i)
            ref = _K.bootstrap_sums_direct(values, 333, kernel_seed(i))
            if np.all(values == np.round(values)):
                assert np.array_equal(got, ref)
            else:
                assert np.allclose(got, ref, rtol=1e-12, atol=0)


def test_many_equals_single_interval_function_for_one_column_and_for_a_difference():
    rng = np.random.default_rng(12)
    for i in range(60):
        k = int(rng.integers(1, 40))
        n = rng.integers(0, 25, (k, 2))
        h = rng.binomial(n, rng.random((k, 2)))
        cl = rng.permutation(np.repeat(np.arange(k), 1))  # ids in arbitrary order
        single = percentile_ci(cl, h[:, 0], n[:, 0], n_resamples=500, seed=i)
        [many] = percentile_many(cl, h[:, :1], n[:, :1], n_resamples=500, seed=i)
        assert many.confidence_interval == single.confidence_interval or (
            math.isnan(single.confidence_interval.low) and math.isnan(many.confidence_interval.low))
        assert np.array_equal(many.bootstrap_distribution, single.bootstrap_distribution, equal_nan=True)
        assert many.statistic == single.statistic or math.isnan(single.statistic)
        assert many.n_undefined == single.n_undefined
        # A − B: arm-A and arm-B columns plus the difference (0, 1).
        cells_cl = np.repeat(cl, 2)
        arm = np.tile([1, 0], k)
        ref = percentile_ci(cells_cl, h.ravel(), n.ravel(), arm=arm, n_resamples=500, seed=i)
        hm = np.column_stack([h.ravel() * arm, h.ravel() * (1 - arm)])
        nm = np.column_stack([n.ravel() * arm, n.ravel() * (1 - arm)])
        *_, diff = percentile_many(cells_cl, hm, nm, differences=[(0, 1)], n_resamples=500, seed=i)
        assert np.array_equal(diff.bootstrap_distribution, ref.bootstrap_distribution, equal_nan=True)
        assert diff.statistic == ref.statistic or math.isnan(ref.statistic)


@pytest.mark.slow
def test_many_columns_match_exact_bootstrap_moments():
    rng = np.random.default_rng(13)
    draws = 20_000
    for i in range(200):
        k = int(rng.integers(1, 5))
        n = rng.integers(1, 20, (k, 3))
        h = rng.binomial(n, rng.random((k, 3)))
        res = percentile_many(np.arange(k), h, n, differences=[(0, 2)], n_resamples=draws, seed=i)
        for j in range(3):
            mean, var = exact_bootstrap_moments(np.column_stack([h[:, j], n[:, j]]), lambda s: s[0] / s[1])
            assert abs(res[j].bootstrap_distribution.mean() - mean) <= 4 * math.sqrt(var / draws) + 1e-12
            assert res[j].statistic == pytest.approx(h[:, j].sum() / n[:, j].sum())
        mean, var = exact_bootstrap_moments(np.column_stack([h[:, 0], n[:, 0], h[:, 2], n[:, 2]]),
                                            lambda s: s[0] / s[1] - s[2] / s[3])
        assert abs(res[3].bootstrap_distribution.mean() - mean) <= 4 * math.sqrt(var / draws) + 1e-12


def test_many_shared_n_column_validation_and_thread_independence():
    import numba

    cl = np.repeat(np.arange(50), 2)
    n = np.full(100, 10)
    h = np.column_stack([np.arange(100) % 11, np.arange(100) % 3])
    a = percentile_many(cl, h, n, n_resamples=300, seed=1)  # n shared by both columns
    b = percentile_many(cl, h, np.column_stack([n, n]), n_resamples=300, seed=1)
    assert all(x.confidence_interval == y.confidence_interval for x, y in zip(a, b, strict=True))
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        c = percentile_many(cl, h, n, n_resamples=300, seed=1)
    finally:
        numba.set_num_threads(before)
    assert all(np.array_equal(x.bootstrap_distribution, y.bootstrap_distribution) for x, y in zip(a, c, strict=True))
    with pytest.raises(ValueError, match="hits"):
        percentile_many(cl, h + 20, n)
    with pytest.raises(ValueError, match="column"):
        percentile_many(cl, h, n, differences=[(0, 5)])
    with pytest.raises(ValueError, match="missing"):
        percentile_many([None] * 100, h, n)


def test_many_pooled_arms_equal_arm_interval_and_duplicate_columns_are_harmless():
    """A side of a difference may pool several columns (the conditions of an arm)."""
    rng = np.random.default_rng(14)
    for i in range(40):
        k = int(rng.integers(2, 30))
        n = rng.integers(0, 12, (k, 3))
        h = rng.binomial(n, rng.random((k, 3)))
        cl = np.repeat(np.arange(k), 3)
        arm = np.tile([1, 1, 0], k)
        ref = percentile_ci(cl, h.ravel(), n.ravel(), arm=arm, n_resamples=400, seed=i)
        cond = np.tile([0, 1, 2], k)
        hm = np.column_stack([np.where(cond == j, h.ravel(), 0) for j in range(3)] + [h.ravel()])
        nm = np.column_stack([np.where(cond == j, n.ravel(), 0) for j in range(3)] + [n.ravel()])
        res = percentile_many(cl, hm, nm, differences=[([0, 1], 2), ([0, 1], [2])], n_resamples=400,
                                           seed=i)
        for diff in res[4:]:
            assert np.array_equal(diff.bootstrap_distribution, ref.bootstrap_distribution, equal_nan=True)
            assert diff.statistic == ref.statistic or math.isnan(ref.statistic)
        pooled = percentile_ci(cl, h.ravel(), n.ravel(), n_resamples=400, seed=i)
        assert np.array_equal(res[3].bootstrap_distribution, pooled.bootstrap_distribution, equal_nan=True)

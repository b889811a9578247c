import numpy as np
import pytest
from scipy import stats as sps

import stats


def test_rates_mcnemar_counts_and_interval():
    rng = np.random.default_rng(20)
    for i in range(200):
        n = int(rng.integers(5, 60))
        a = (rng.random(n) < 0.5).astype(int)
        b = np.where(rng.random(n) < 0.7, a, 1 - a)
        res = stats.paired_difference(a, b, n_resamples=2000, seed=i)
        assert res.statistic == pytest.approx(a.mean() - b.mean())
        assert res.mcnemar.a_only == int(np.sum((a == 1) & (b == 0)))
        assert res.mcnemar.b_only == int(np.sum((a == 0) & (b == 1)))
        m = res.mcnemar.a_only + res.mcnemar.b_only
        if m:
            assert res.mcnemar.pvalue == pytest.approx(sps.binomtest(res.mcnemar.a_only, m, 0.5).pvalue, abs=1e-12)
        lo, hi = res.confidence_interval
        assert (lo <= res.statistic + 1e-12 and res.statistic - 1e-12 <= hi) or m == 0


def test_paired_interval_agrees_with_scipy_paired_bootstrap():
    rng = np.random.default_rng(21)
    a = (rng.random(300) < 0.55).astype(float)
    b = np.where(rng.random(300) < 0.8, a, (rng.random(300) < 0.35)).astype(float)
    ours = stats.paired_difference(a, b, n_resamples=40_000, seed=1)
    ref = sps.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis), paired=True, vectorized=True,
                        n_resamples=40_000, method="percentile", rng=np.random.default_rng(1))
    assert ours.confidence_interval.low == pytest.approx(ref.confidence_interval.low, abs=0.004)
    assert ours.confidence_interval.high == pytest.approx(ref.confidence_interval.high, abs=0.004)


def test_identical_arms_and_clusters_and_validation():
    a = np.array([1, 0, 1, 1, 0, 0])
    res = stats.paired_difference(a, a, cluster=["t1", "t1", "t2", "t2", "t3", "t3"], seed=0)
    assert res.statistic == 0.0 and tuple(res.confidence_interval) == (0.0, 0.0)
    assert res.mcnemar.pvalue == 1.0 and res.n_clusters == 3
    empty = stats.paired_difference([], [], seed=0)
    assert np.isnan(empty.statistic) and empty.mcnemar.pvalue == 1.0
    with pytest.raises(ValueError, match="aligned"):
        stats.paired_difference([1, 0], [1], seed=0)
    with pytest.raises(ValueError, match="0/1"):
        stats.paired_difference([2, 0], [1, 0], seed=0)
    with pytest.raises(ValueError, match="missing"):
        stats.paired_difference([1, 0], [1, 0], cluster=["x", None], seed=0)

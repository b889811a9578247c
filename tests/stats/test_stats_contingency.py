import numpy as np
import pytest
from scipy import stats as sps

import stats


def test_fisher_matches_scipy_on_random_tables():
    rng = np.random.default_rng(10)
    for _ in range(400):
        t = rng.integers(0, rng.integers(1, 40), (2, 2))
        ours = stats.fisher_exact(t)
        ref = sps.fisher_exact(t)
        assert ours.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
        if np.isnan(ref.statistic):
            assert np.isnan(ours.statistic)
        else:
            assert ours.statistic == pytest.approx(ref.statistic)


def test_fisher_symmetric_tables_and_edges():
    assert stats.fisher_exact([[5, 5], [5, 5]]).pvalue == 1.0
    assert stats.fisher_exact([[0, 0], [3, 4]]).pvalue == 1.0  # empty row: p = 1, odds NaN
    assert stats.fisher_exact([[3, 0], [0, 3]]).statistic == float("inf")
    with pytest.raises(ValueError):
        stats.fisher_exact([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError):
        stats.fisher_exact([[-1, 2], [3, 4]])


def test_mcnemar_matches_binomtest():
    rng = np.random.default_rng(11)
    for _ in range(400):
        b, c = (int(v) for v in rng.integers(0, 60, 2))
        res = stats.mcnemar_exact(b, c)
        if b + c == 0:
            assert res.pvalue == 1.0
            continue
        ref = sps.binomtest(b, b + c, 0.5).pvalue
        assert res.pvalue == pytest.approx(ref, abs=1e-12)
        assert res.statistic == min(b, c)
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 2)

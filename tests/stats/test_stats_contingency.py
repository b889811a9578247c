import math

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


def _tables_around(n_total, rng, count):
    """Random 2 × 2 tables of about n_total trials: near-balanced (p from ~1 to tiny) and lopsided."""
    out = []
    for _ in range(count):
        r1 = int(rng.integers(1, n_total))
        r2 = n_total - r1
        p = rng.uniform(0.001, 0.999)
        shift = rng.choice([0.0, 0.002, 0.02, 0.2])
        a = int(rng.binomial(r1, min(0.999, p + shift)))
        c = int(rng.binomial(r2, p))
        out.append([[a, r1 - a], [c, r2 - c]])
    return out


def test_fisher_large_tables_match_scipy_to_1e_9_relative():
    """Above EXACT_INT_MAX trials the log-space route: equal to scipy from 1e3 to 1e7 trials."""
    rng = np.random.default_rng(29)
    tables = [t for n in (1_001, 5_000, 100_000) for t in _tables_around(n, rng, 8)] + _tables_around(10_000_000, rng, 4)
    tables += [[[2000, 2000], [2040, 1960]], [[5000, 5000], [5100, 4900]], [[0, 600], [1, 600]],
               [[3, 5_000_000], [40, 4_999_000]], [[500, 500], [500, 500]]]
    for t in tables:
        ref = sps.fisher_exact(t).pvalue
        ours = stats.fisher_exact(t).pvalue
        if ref < 1e-290:  # scipy itself is at the end of the float range there
            assert ours < 1e-280
            continue
        if sum(map(sum, t)) < 1_000_000:
            assert ours == pytest.approx(ref, rel=1e-9, abs=0), t
            continue
        # At 10^7 trials scipy's hypergeometric pmf itself sums to 1 only within ~1e-9 (Boost's
        # algorithm), so the reference is scipy's pmf summed over every table within ±60 sd of
        # the mode and renormalised: the same sum with scipy's drift divided out.
        (a, b), (c, d) = t
        big, good, draws = a + b + c + d, a + c, a + b
        mean = draws * good / big
        sd = math.sqrt(mean * (1 - good / big) * (big - draws) / (big - 1))
        xs = np.arange(max(0, int(mean - 60 * sd), draws - (big - good)), min(good, draws, int(mean + 60 * sd)) + 1)
        pmf = sps.hypergeom.pmf(xs, big, good, draws)
        p_obs = sps.hypergeom.pmf(a, big, good, draws)
        brute = math.fsum(pmf[pmf <= p_obs * (1 + 1e-12)]) / math.fsum(pmf)
        assert ours == pytest.approx(brute, rel=1e-9, abs=1e-300), t
        assert ours == pytest.approx(ref, rel=5e-9, abs=0), t  # and scipy's own figure, within its drift


def test_fisher_integer_and_log_space_routes_agree_at_the_switch(monkeypatch):
    """The same tables through both routes (ties included: symmetric tables give p = 1 on both)."""
    import stats.contingency as C

    rng = np.random.default_rng(30)
    tables = _tables_around(900, rng, 40) + [[[450, 450], [450, 450]], [[10, 440], [440, 10]]]
    exact = [stats.fisher_exact(t).pvalue for t in tables]
    monkeypatch.setattr(C, "EXACT_INT_MAX", 0)
    for t, e in zip(tables, exact, strict=True):
        assert stats.fisher_exact(t).pvalue == pytest.approx(e, rel=1e-11, abs=1e-300), t


def test_mcnemar_large_counts_match_binomtest():
    rng = np.random.default_rng(31)
    pairs = [(50_500, 49_500), (5_000_100, 4_999_900), (0, 2000), (1200, 1200), (3_000, 3_300)]
    for m in (2_000, 100_000, 10_000_000):
        for _ in range(6):
            b = int(rng.binomial(m, rng.uniform(0.45, 0.55)))
            pairs.append((b, m - b))
    for b, c in pairs:
        ref = sps.binomtest(b, b + c, 0.5).pvalue
        ours = stats.mcnemar_exact(b, c).pvalue
        if ref < 1e-290:
            assert ours < 1e-280
            continue
        assert ours == pytest.approx(ref, rel=1e-9, abs=0), (b, c)

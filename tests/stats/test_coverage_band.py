"""The decision behind the design df, pinned on seeded simulations of benchmarks/interval_coverage.py cells.

Why this exists: docs/statistics-coverage.md ("The band, restated") keeps the Bell–McCaffrey design df although
it moves a few mildly-unequal cells of the grid from just inside 97.5% to just above it. The decision rests on
three measured facts, and this test keeps them true: (1) where prompt sizes differ greatly, the k − 1 df
collapses and the design df holds ≥ 94%; (2) on the grid's own cells whose sizes differ only mildly (error rows
dropping up to 60% of trials) the design df costs at most about 1 pp of over-coverage and never pushes a cell
under 94%; (3) the rate's variance and the A − B default's arms also carry the Bell–McCaffrey variance factor,
which holds them ≥ 94% in the unequal-size cells the df alone left short. It also pins why ``stats.paired_difference_ci``
is the shaped paired interval and not the symmetric paired t: the shaped one gains where the arms agree and
holds where the difference is skewed.
Seeded, vectorised, 4,000 designs a cell (Monte Carlo SE of a 95% coverage 0.34 pp).
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import pytest

DESIGNS = 4000


def _coverage(ints: dict, truth: float, name: str) -> float:
    lo, hi = ints[name]
    return float((np.isfinite(lo) & (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)).mean())


def _few_big_pairs(bench: ModuleType, k: int, mu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``DESIGNS`` designs of ``k`` prompts where a few hold most trials: (sizes, A's hits, B's hits), the arms'
    Beta prompt rates (ICC 0.2) tied by the benchmark's copula, seeded by ``k``."""
    rng = np.random.default_rng([29, k])
    n = bench.unequal_sizes(rng, DESIGNS, k, "few")
    z1 = rng.standard_normal((DESIGNS, k))
    z2 = bench.COPULA * z1 + math.sqrt(1 - bench.COPULA ** 2) * rng.standard_normal((DESIGNS, k))
    hA = rng.binomial(n.astype(np.int64), bench.rates_from_normals(z1, mu, "beta", 0.2)).astype(np.float64)
    hB = rng.binomial(n.astype(np.int64), bench.rates_from_normals(z2, bench.B_FACTOR * mu, "beta", 0.2))
    return n, hA, hB.astype(np.float64)


def test_design_df_holds_where_a_few_prompts_hold_most_trials_and_k_minus_1_does_not(bench: ModuleType) -> None:
    mu = 0.15
    n, hA, hB = _few_big_pairs(bench, 8, mu)
    rates = bench.rate_intervals(hA, n, 0, 0)
    assert _coverage(rates, mu, "kg-tilted") < 0.90
    assert _coverage(rates, mu, "kg-tilted-df") >= 0.94
    diffs = bench.diff_intervals(hA, n, hB.astype(np.float64), n, 0, 0)
    truth = (1 - bench.B_FACTOR) * mu
    before, df_only = _coverage(diffs, truth, "mover-kg-tilted"), _coverage(diffs, truth, "mover-kg-tilted-df")
    after = _coverage(diffs, truth, "mover-kg-tilted-bm")
    # the df alone left A − B short here (92.2% at 2,000 designs); the arms' Bell–McCaffrey factor holds it
    assert before < 0.90 and df_only >= 0.90 and after >= 0.94


def test_variance_factor_lifts_the_rate_where_five_of_50_prompts_hold_most_trials(bench: ModuleType) -> None:
    # the rate's shortfall cell (50 prompts, 15%, 'few': 92.7% with the df alone at 2,000 designs); its true
    # coverage with the factor is close to 94% (94.3% at 2,000 and at 20,000 designs), so this runs 20,000
    # (Monte Carlo SE 0.15 pp) under its own seed
    mu, R = 0.15, 20_000
    rng = np.random.default_rng([31, 50])
    n = bench.unequal_sizes(rng, R, 50, "few")
    hA = rng.binomial(n.astype(np.int64), bench.rates_from_normals(rng.standard_normal((R, 50)), mu, "beta", 0.2))
    rates = bench.rate_intervals(hA.astype(np.float64), n, 0, 0)
    df_only, after = _coverage(rates, mu, "kg-tilted-df"), _coverage(rates, mu, "kg-tilted-bm")
    assert df_only < 0.94 <= after and after - df_only >= 0.01
    assert _width(rates, "kg-tilted-bm") <= 1.15 * _width(rates, "kg-tilted-df")  # +10% at 20,000


def test_variance_factor_lifts_a_minus_b_where_five_of_50_prompts_hold_most_trials(bench: ModuleType) -> None:
    # the second shortfall cell (50 prompts, 15%, 'few'; 93.7% with the df alone at 2,000 designs): the df is
    # about 4 and the arms' variances about 1.2 times too small, so both tails miss
    mu = 0.15
    n, hA, hB = _few_big_pairs(bench, 50, mu)
    diffs = bench.diff_intervals(hA, n, hB.astype(np.float64), n, 0, 0)
    truth = (1 - bench.B_FACTOR) * mu
    df_only, after = _coverage(diffs, truth, "mover-kg-tilted-df"), _coverage(diffs, truth, "mover-kg-tilted-bm")
    assert after >= 0.94 and after - df_only >= 0.008
    assert _width(diffs, "mover-kg-tilted-bm") <= 1.2 * _width(diffs, "mover-kg-tilted-df")  # +13% at 2,000


@pytest.mark.parametrize(("k", "mu", "het", "runs"), [(6, 0.50, 1.5, 5), (12, 0.15, 0.5, 20), (12, 0.50, 0.5, 5)])
def test_design_df_costs_at_most_about_a_point_on_the_grids_mildly_unequal_cells(bench: ModuleType, k: int,
                                                                               mu: float, het: float,
                                                                               runs: int) -> None:
    # three of the cells that left [94.0, 97.5] for 97.6–98.3% in the 10,000-design grid
    rng = np.random.default_rng([29, k, runs, int(100 * mu)])
    hA, nA, hB, nB = bench.simulate(rng, DESIGNS, k, mu, "logitnormal", het, runs, "uneq")
    rates = bench.rate_intervals(hA, nA, 0, 0)
    diffs = bench.diff_intervals(hA, nA, hB, nB, 0, 0)
    for ints, truth, old, new in ((rates, mu, "kg-tilted", "kg-tilted-df"), (rates, mu, "kg-tilted", "kg-tilted-bm"),
                                  (diffs, (1 - bench.B_FACTOR) * mu, "mover-kg-tilted", "mover-kg-tilted-df"),
                                  (diffs, (1 - bench.B_FACTOR) * mu, "mover-kg-tilted", "mover-kg-tilted-bm")):
        before, after = _coverage(ints, truth, old), _coverage(ints, truth, new)
        assert after >= 0.94 and after >= before - 0.005  # never under the floor, never less than before
        assert after - before <= 0.012  # the over-coverage the docs accept: at most about a point


def _width(ints: dict, name: str) -> float:
    lo, hi = ints[name]
    return float(np.nanmean(hi - lo))


def test_shaped_paired_interval_gains_where_arms_agree_and_holds_where_the_difference_is_skewed(
        bench: ModuleType) -> None:
    # null A − B at 1%, J-shaped Beta rates shared by both arms (the --only paired-null cell 12 / 1% / 0.95)
    rng = np.random.default_rng([29, 12, 95])
    k, mu, cop, runs = 12, 0.01, 0.95, 10
    z1 = rng.standard_normal((DESIGNS, k))
    z2 = cop * z1 + math.sqrt(1 - cop ** 2) * rng.standard_normal((DESIGNS, k))
    n = np.full((DESIGNS, k), float(runs))
    hA = rng.binomial(runs, bench.rates_from_normals(z1, mu, "beta", 0.25)).astype(np.float64)
    hB = rng.binomial(runs, bench.rates_from_normals(z2, mu, "beta", 0.25)).astype(np.float64)
    null = bench.diff_intervals(hA, n, hB, n, 0, 0)
    assert _coverage(null, 0.0, "paired-shaped") >= 0.94
    assert _width(null, "paired-shaped") <= 0.85 * _width(null, "mover-kg-tilted-df")
    # a skewed main-grid cell (12 prompts, 15%, high heterogeneity, 20 runs): the symmetric paired t misses
    # above, the shaped interval does not
    rng = np.random.default_rng([29, 12, 15])
    hA, nA, hB, nB = bench.simulate(rng, DESIGNS, 12, 0.15, "logitnormal", 1.5, 20, "eq")
    skewed = bench.diff_intervals(hA, nA, hB, nB, 0, 0)
    truth = (1 - bench.B_FACTOR) * 0.15
    assert _coverage(skewed, truth, "paired-t") < 0.94 <= _coverage(skewed, truth, "paired-shaped")

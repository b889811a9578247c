"""The exact coverage floors of benchmarks/interval_coverage.py against brute-force enumeration.

Why this exists: docs/statistics-coverage.md states that some study cells are out of reach for every
interval at least as wide as a design-effect-1 reference, from exact distributions computed by quadrature
and FFT convolution. These tests rebuild those distributions by enumerating every outcome of tiny designs,
so a wrong convolution, a lost probability mass or a mis-specified design effect shows up here.
"""

from __future__ import annotations

import itertools
from types import ModuleType

import numpy as np
import pytest

from stats import intervals as I


def _brute_totals(one: np.ndarray, k: int) -> dict[tuple[int, int], float]:
    """pmf of (Σh_A, Σh_B) over k independent prompts, by enumerating every prompt's outcome."""
    cells = [(a, b) for a in range(one.shape[0]) for b in range(one.shape[1])]
    out: dict[tuple[int, int], float] = {}
    for combo in itertools.product(cells, repeat=k):
        p = float(np.prod([one[a, b] for a, b in combo]))
        key = (sum(a for a, _ in combo), sum(b for _, b in combo))
        out[key] = out.get(key, 0.0) + p
    return out


@pytest.mark.parametrize(("mu", "sigma", "runs", "k"), [(0.15, 1.5, 2, 3), (0.5, 0.5, 3, 2), (0.02, 1.5, 2, 3)])
def test_joint_hit_pmf_of_the_sums_matches_enumeration(bench: ModuleType, mu: float, sigma: float, runs: int,
                                                       k: int) -> None:
    one = bench._pair_pmf_eq(mu, sigma, runs)
    assert one.sum() == pytest.approx(1.0, abs=1e-12)
    # marginal means are the arms' mean rates (the copula keeps each arm's logit-normal law)
    h = np.arange(runs + 1)
    assert float(one.sum(axis=1) @ h) / runs == pytest.approx(mu, rel=1e-9)
    assert float(one.sum(axis=0) @ h) / runs == pytest.approx(bench.B_FACTOR * mu, rel=1e-9)
    total = bench.total_pmf(one, k)
    for (a, b), p in _brute_totals(one, k).items():
        assert total[a, b] == pytest.approx(p, abs=1e-13)
    assert total.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("mu", "sigma", "runs"), [(0.15, 1.5, 5), (0.02, 0.5, 20), (0.5, 1.5, 3)])
def test_design_effect_of_the_difference_is_the_exact_variance_ratio(bench: ModuleType, mu: float, sigma: float,
                                                                    runs: int) -> None:
    # equal sizes: r_A − r_B = Σ(h_A − h_B) / (k runs) exactly, so its variance is k Var(h_A − h_B) / (k runs)²
    one = bench._pair_pmf_eq(mu, sigma, runs)
    h = np.arange(runs + 1)
    diff = h[:, None] - h[None, :]
    var_one = float((one * diff**2).sum() - (one * diff).sum() ** 2)
    mb = bench.B_FACTOR * mu
    expected = var_one / runs / (mu * (1 - mu) + mb * (1 - mb))  # the k cancels
    assert bench.diff_design_effect(mu, sigma, runs, "eq") == pytest.approx(expected, rel=1e-8)


def test_difference_floor_is_the_probability_of_the_covering_outcomes(bench: ModuleType) -> None:
    mu, sigma, runs, k = 0.15, 1.5, 3, 3
    res = bench.exact_diff_floor(k, mu, sigma, runs, "eq", seed=0, designs=0)
    one = bench._pair_pmf_eq(mu, sigma, runs)
    n = float(k * runs)
    truth = (1 - bench.B_FACTOR) * mu
    covered = 0.0
    no_hit = 0.0
    for (a, b), p in _brute_totals(one, k).items():
        la, ua = I.clopper_pearson_midp(np.array([a]), np.array([n]), 0.95)
        lb, ub = I.clopper_pearson_midp(np.array([b]), np.array([n]), 0.95)
        lo, hi = I.mover(np.array([a / n]), la, ua, np.array([b / n]), lb, ub, np.zeros(1))
        covered += p * bool(lo[0] <= truth + 1e-12 and truth - 1e-12 <= hi[0])
        no_hit += p * (a == 0)
    assert res["mid-p"] == pytest.approx(covered, abs=1e-12)
    assert res["P(no hit A)"] == pytest.approx(no_hit, abs=1e-12)
    assert 0.0 < res["mid-p"] < 1.0

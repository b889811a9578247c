"""The planner's power simulation against a brute-force one through the stats core, and its direction."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stats
from stats.power import design_floor, simulate_power

# The ungrounded leaderboard's design (12 triples × 3 conditions × 20 runs) at gpt-5.6-sol's observed
# decoy rates (21/240 ungroundable, 40/240 groundable_unknown, 4/240 groundable_known); arm A = the
# first two, B = groundable_known, as the leaderboard tests it.
RATES = [21 / 240, 40 / 240, 4 / 240]
ARM = [1, 1, 0]


def brute_force_power(sd: float, n_sims: int, seed: int, n_prompts: int = 12, n_runs: int = 20) -> float:
    """Simulate studies in plain numpy and test each with stats.cluster_permutation_test (exact, cell level)."""
    rng = np.random.default_rng(seed)
    logits = np.log(np.array(RATES) / (1 - np.array(RATES)))
    cluster = np.repeat(np.arange(n_prompts), 3)
    arm = np.tile(ARM, n_prompts)
    n = np.full(3 * n_prompts, n_runs)
    rejections = 0
    for _ in range(n_sims):
        z = logits[None, :] + sd * rng.standard_normal((n_prompts, 3))
        hits = rng.binomial(n_runs, 1 / (1 + np.exp(-z))).ravel()
        rejections += stats.cluster_permutation_test(cluster, arm, hits, n, level="cell").pvalue <= 0.05
    return rejections / n_sims


@pytest.mark.parametrize("sd", [0.5, 1.5])
def test_power_agrees_with_brute_force_at_the_leaderboard_design(sd: float) -> None:
    sims = 600
    planner = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=sd, n_sims=2000, seed=11)
    assert planner.exact
    brute = brute_force_power(sd, sims, seed=12)
    se = math.sqrt(planner.power_se ** 2 + max(brute * (1 - brute), 0.01) / sims)
    assert abs(planner.power - brute) <= 4 * se, (planner.power, brute)


def test_monte_carlo_p_agrees_with_exact() -> None:
    exact = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=1.0, n_sims=1500, seed=3, method="exact")
    mc = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=1.0, n_sims=1500, seed=3, method="mc", n_perm=999)
    assert abs(exact.power - mc.power) <= 4 * math.sqrt(2) * exact.power_se + 0.01
    assert mc.mean_width == pytest.approx(exact.mean_width, rel=0.05)


@pytest.mark.parametrize("interval", ["korn-graubard", "percentile"])
def test_interval_width_matches_the_stats_core_interval(interval: str) -> None:
    """Zero heterogeneity: the planner's mean width is the stats core's width of the same interval method.

    The default is the report's own interval (MOVER of Korn–Graubard for A − B); the percentile interval
    is still simulated in the kernel on request.
    """
    res = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=0.0, n_sims=300, n_boot=2000, seed=5,
                         interval=interval)
    assert res.interval_method == ("mover-korn-graubard" if interval == "korn-graubard" else interval)
    rng = np.random.default_rng(9)
    widths = []
    for _ in range(60):
        hits = rng.binomial(20, np.tile(RATES, 12))
        ci = stats.cluster_rate_ci(np.repeat(np.arange(12), 3), hits, np.full(36, 20), arm=np.tile(ARM, 12),
                                        n_resamples=2000, seed=1, method=interval).confidence_interval
        widths.append(ci.high - ci.low)
    assert res.mean_width == pytest.approx(float(np.mean(widths)), rel=0.08)


def test_heterogeneity_lowers_power_and_runs_cannot_buy_it_back() -> None:
    calm = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=0.25, n_sims=800, seed=1)
    wild = simulate_power(RATES, ARM, n_prompts=12, n_runs=20, sd=2.0, n_sims=800, seed=1)
    assert wild.power < calm.power - 0.2 and wild.mean_width > calm.mean_width
    # at a high sd, 4x the runs barely helps; 4x the prompts (same trials) helps a lot
    more_runs = simulate_power(RATES, ARM, n_prompts=6, n_runs=80, sd=2.0, n_sims=800, seed=2)
    more_prompts = simulate_power(RATES, ARM, n_prompts=24, n_runs=20, sd=2.0, n_sims=800, seed=2)
    assert more_prompts.power > more_runs.power + 0.2


def test_design_floor_is_set_by_prompts_only() -> None:
    assert design_floor(ARM, 4) == pytest.approx(3.0 ** -4)
    assert design_floor([1, 0], 5) == pytest.approx(2 * 2.0 ** -5)  # a = b: both extremes count
    assert simulate_power(RATES, ARM, n_prompts=2, n_runs=200, sd=0.0, n_sims=50, seed=1).power == 0.0


def test_is_deterministic_and_validates_input() -> None:
    a = simulate_power(RATES, ARM, n_prompts=6, n_runs=5, sd=1.0, n_sims=100, seed=4)
    assert a == simulate_power(RATES, ARM, n_prompts=6, n_runs=5, sd=1.0, n_sims=100, seed=4)
    with pytest.raises(ValueError):
        simulate_power([0.0, 0.1], [1, 0], n_prompts=3, n_runs=3, sd=1.0)
    with pytest.raises(ValueError):
        simulate_power([0.2, 0.1], [1, 1], n_prompts=3, n_runs=3, sd=1.0)

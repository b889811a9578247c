"""stats.paired_permutation_test, stats.holm and stats.pass_hat_k against brute-force enumeration."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

import stats


def _brute_paired(ha, na, hb, nb):
    """Every one of the 2^cases swaps of A and B within a case: (p, floor) as Fractions.

    |rate A − rate B| = |x·N − H·t| / (t·(N − t)) for arm-A hits x of trials t: compared as integer fractions.
    """
    k = len(ha)
    big_h, big_n = sum(ha) + sum(hb), sum(na) + sum(nb)
    values = []
    for swap in itertools.product((0, 1), repeat=k):
        x = sum(hb[i] if s else ha[i] for i, s in enumerate(swap))
        t = sum(nb[i] if s else na[i] for i, s in enumerate(swap))
        values.append(None if t in (0, big_n) else (abs(x * big_n - big_h * t), t * (big_n - t)))
    num0, den0 = values[0]
    defined = [v for v in values if v is not None]
    p = Fraction(sum(1 for num, den in defined if num * den0 >= num0 * den), len(values))
    top = max(Fraction(num, den) for num, den in defined)
    floor = Fraction(sum(1 for num, den in defined if Fraction(num, den) >= top), len(values))
    return p, floor


def _design(rng):
    k = int(rng.integers(2, 9))
    runs_a = rng.integers(1, 7, size=k)
    runs_b = rng.integers(1, 7, size=k)
    pa, pb = rng.random(k), rng.random(k)
    return (list(rng.binomial(runs_a, pa)), list(runs_a), list(rng.binomial(runs_b, pb)), list(runs_b))


def test_paired_p_and_floor_equal_enumeration_on_random_small_designs() -> None:
    rng = np.random.default_rng(27)
    checked = 0
    for _ in range(240):
        ha, na, hb, nb = _design(rng)
        cases = [f"c{i}" for i in range(len(ha))]
        res = stats.paired_permutation_test(cases, ha, na, hb, nb)
        p, floor = _brute_paired(ha, na, hb, nb)
        assert res.n_resamples is None and "paired" in res.method and f"2^{len(ha)}" in res.method
        assert res.statistic == pytest.approx(sum(ha) / sum(na) - sum(hb) / sum(nb), abs=1e-12)
        assert res.pvalue == pytest.approx(float(p), abs=1e-9), (ha, na, hb, nb)
        assert res.attainable_floor == pytest.approx(float(floor), abs=1e-9)
        checked += 1
    assert checked >= 200


def test_cells_of_one_case_are_pooled_and_swapped_together() -> None:
    # two conditions per case: the same test as the case totals, not as four independent cells
    case = ["a", "a", "b", "b", "c", "c"]
    ha, na, hb, nb = [3, 2, 1, 0, 4, 4], [4, 3, 2, 2, 4, 5], [0, 1, 1, 2, 0, 1], [4, 3, 2, 2, 4, 5]
    res = stats.paired_permutation_test(case, ha, na, hb, nb)
    tot = stats.paired_permutation_test(["a", "b", "c"], [5, 1, 8], [7, 4, 9], [1, 3, 1], [7, 4, 9])
    assert (res.pvalue, res.attainable_floor) == (tot.pvalue, tot.attainable_floor)
    assert res.pvalue == pytest.approx(float(_brute_paired([5, 1, 8], [7, 4, 9], [1, 3, 1], [7, 4, 9])[0]))
    assert res.n_clusters == 3


def test_monte_carlo_path_agrees_with_exact_and_keeps_the_floor() -> None:
    rng = np.random.default_rng(5)
    ha, na, hb, nb = _design(rng)
    while len(ha) < 6:
        ha, na, hb, nb = _design(rng)
    cases = list(range(len(ha)))
    exact = stats.paired_permutation_test(cases, ha, na, hb, nb)
    mc = stats.paired_permutation_test(cases, ha, na, hb, nb, n_resamples=20_000, seed=1)
    assert mc.n_resamples == 20_000 and "Monte Carlo" in mc.method
    assert abs(mc.pvalue - exact.pvalue) < 5 * mc.mc_stderr + 1 / 20_001
    assert mc.attainable_floor == exact.attainable_floor


def test_identical_arms_give_p_one_and_few_cases_cannot_reach_alpha() -> None:
    res = stats.paired_permutation_test([1, 2, 3], [2, 3, 1], [5, 5, 5], [2, 3, 1], [5, 5, 5])
    assert res.statistic == 0 and res.pvalue == 1.0
    # three cases: 8 swaps, the floor is 2/8 however large the difference
    big = stats.paired_permutation_test([1, 2, 3], [5, 5, 5], [5, 5, 5], [0, 0, 0], [5, 5, 5])
    assert big.pvalue == pytest.approx(0.25) and big.attainable_floor == pytest.approx(0.25)


def _holm_by_closed_testing(p):
    """Closed testing with Bonferroni: adjusted p_i = max over subsets S ∋ i of min(1, |S| min_{j∈S} p_j)."""
    m = len(p)
    out = []
    for i in range(m):
        worst = 0.0
        for size in range(1, m + 1):
            for subset in itertools.combinations(range(m), size):
                if i in subset:
                    worst = max(worst, min(1.0, size * min(p[j] for j in subset)))
        out.append(worst)
    return out


def test_holm_equals_closed_bonferroni_testing() -> None:
    rng = np.random.default_rng(3)
    for _ in range(60):
        m = int(rng.integers(1, 8))
        p = list(np.round(rng.random(m) ** 3, 3))  # rounding makes ties
        assert stats.holm(p) == pytest.approx(_holm_by_closed_testing(p), abs=1e-12)
    adj = stats.holm([0.2, float("nan"), 0.01])
    assert np.isnan(adj[1]) and adj[0] == pytest.approx(0.2) and adj[2] == pytest.approx(0.02)
    with pytest.raises(ValueError):
        stats.holm([1.5])


def test_pass_hat_k_equals_enumeration_of_k_run_subsets() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        m = int(rng.integers(1, 6))
        outcomes = [list(rng.random(int(rng.integers(1, 7))) < rng.random()) for _ in range(m)]
        for k in range(1, 7):
            per_case = []
            for runs in outcomes:
                if len(runs) >= k:
                    subsets = list(itertools.combinations(runs, k))
                    per_case.append(Fraction(sum(all(s) for s in subsets), len(subsets)))
            res = stats.pass_hat_k(range(m), [sum(r) for r in outcomes], [len(r) for r in outcomes], k)
            assert res.n_cases == len(per_case)
            if per_case:
                assert res.statistic == pytest.approx(float(sum(per_case) / len(per_case)), abs=1e-12)
                lo, hi = res.confidence_interval
                assert len(per_case) < 2 or lo - 1e-12 <= res.statistic <= hi + 1e-12
            else:
                assert np.isnan(res.statistic)


def test_pass_hat_k_pools_conditions_of_a_case_and_its_interval_is_over_cases() -> None:
    res = stats.pass_hat_k(["a", "a", "b"], [2, 2, 1], [2, 2, 4], 2)
    assert res.n_cases == 2 and res.statistic == pytest.approx((1 + 0) / 2)
    est = np.array([1.0, 0.0])
    half = 12.706204736174707 * est.std(ddof=1) / np.sqrt(2)  # t_{0.975, 1 df}
    assert res.confidence_interval == pytest.approx((max(0.0, 0.5 - half), min(1.0, 0.5 + half)))
    with pytest.raises(ValueError):
        stats.pass_hat_k([1], [1], [1], 0)


def test_plan_simulates_the_paired_test_a_model_comparison_runs() -> None:
    """`trialgrid plan --arm-a X --arm-b Y --shared S` is the power of `paired_permutation_test` on two models.

    The planner draws each case's logit effect (a share ``shared`` of the variance common to both models, the
    rest per model) and applies the cell-level test, whose one-A-cell one-B-cell scheme is the swap within case.
    The same studies drawn here in numpy and tested with ``paired_permutation_test`` reject at the planner's
    rate, within Monte Carlo error.
    """
    # sd 2 and shared 0.9: pairing matters (the planned power is 0.31 here, 0.125 with shared 0)
    rate_a, rate_b, sd, shared, cases, runs, sims = 0.4, 0.15, 2.0, 0.9, 10, 5, 600
    planned = stats.simulate_power([rate_a, rate_b], [1, 0], n_prompts=cases, n_runs=runs, sd=sd, shared=shared,
                                   n_sims=sims, seed=3, method="exact")
    rng = np.random.default_rng(11)
    logit = np.log(np.array([rate_a, rate_b]) / (1 - np.array([rate_a, rate_b])))
    rejected = 0
    for _ in range(sims):
        u = rng.standard_normal((cases, 1)) * sd * np.sqrt(shared)
        e = rng.standard_normal((cases, 2)) * sd * np.sqrt(1 - shared)
        hits = rng.binomial(runs, 1 / (1 + np.exp(-(logit + u + e))))
        res = stats.paired_permutation_test(np.arange(cases), hits[:, 0], np.full(cases, runs), hits[:, 1],
                                            np.full(cases, runs))
        rejected += res.pvalue <= 0.05
    se = np.sqrt(planned.power * (1 - planned.power) / sims)
    assert 0.2 < planned.power < 0.95  # a design where power is neither trivial nor certain
    assert abs(rejected / sims - planned.power) <= 4 * np.sqrt(2) * se, (rejected / sims, planned.power)


@pytest.mark.parametrize("exact_runs", [0, 400])  # the cumulative product (big designs) and the exact branch
def test_pass_hat_k_curve_is_pass_hat_k_at_every_k(exact_runs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-pass curve against the exact binomial ratio, k by k, on random designs."""
    import stats as st
    import stats.consistency

    monkeypatch.setattr(stats.consistency, "_EXACT_RUNS", exact_runs)
    rng = np.random.default_rng(30)
    for _ in range(60):
        cells = int(rng.integers(1, 12))
        case = rng.integers(0, max(1, cells // 2) + 1, cells)
        runs = rng.integers(0, 40, cells)
        succ = rng.binomial(runs, rng.uniform(0, 1, cells))
        k_max = int(max(1, runs.max()))
        curve = st.pass_hat_k_curve(case, succ, runs, k_max)
        for k in range(1, k_max + 1):
            exact = st.pass_hat_k(case, succ, runs, k)
            assert curve.n_cases[k - 1] == exact.n_cases
            for got, want in ((curve.statistic[k - 1], exact.statistic), (curve.low[k - 1], exact.confidence_interval.low),
                              (curve.high[k - 1], exact.confidence_interval.high),
                              (curve.standard_error[k - 1], exact.standard_error)):
                assert (np.isnan(got) and np.isnan(want)) or abs(got - want) <= 1e-12, (k, got, want)

import math

import _stats_brute as _brute
import numpy as np
import pytest
from scipy import stats as sps

import stats
import stats.permutation as perm_mod


def random_design(rng, max_clusters=4, max_cells=3, max_n=5, trial_budget=None):
    """Small random per-cell design; guarantees both arms have trials."""
    while True:
        k = int(rng.integers(1, max_clusters + 1))
        cells = []
        for c in range(k):
            m = int(rng.integers(1, max_cells + 1))
            for _ in range(m):
                n = int(rng.integers(0, max_n + 1))
                h = int(rng.integers(0, n + 1))
                cells.append((f"c{c}", int(rng.integers(0, 2)), h, n))
        na = sum(c[3] for c in cells if c[1] == 1)
        nb = sum(c[3] for c in cells if c[1] == 0)
        if na and nb:
            return cells


def call(cells, **kw):
    cl, arm, h, n = zip(*cells, strict=True)
    return stats.cluster_permutation_test(list(cl), np.array(arm), np.array(h), np.array(n), **kw)


def trial_design(rng):
    # Keep per-cluster trial enumeration small: at most 8 trials per cluster.
    while True:
        cells = random_design(rng, max_clusters=4, max_cells=3, max_n=4)
        per = {}
        for c, _, _, n in cells:
            per[c] = per.get(c, 0) + n
        if max(per.values()) <= 8:
            return cells


def test_trial_level_exact_matches_enumeration():
    rng = np.random.default_rng(20240501)
    for _ in range(220):
        cells = trial_design(rng)
        res = call(cells, level="trial")
        p, floor = _brute.trial_level(cells)
        assert res.n_resamples is None and res.mc_stderr is None
        assert abs(res.pvalue - float(p)) <= 1e-12, cells
        assert abs(res.attainable_floor - float(floor)) <= 1e-12, cells
        assert res.attainable_floor <= res.pvalue + 1e-15


def test_cell_level_exact_matches_enumeration():
    rng = np.random.default_rng(777)
    for _ in range(220):
        cells = random_design(rng, max_clusters=5, max_cells=4, max_n=6)
        res = call(cells, level="cell")
        p, floor = _brute.cell_level(cells)
        assert res.n_resamples is None
        assert abs(res.pvalue - float(p)) <= 1e-12, cells
        assert abs(res.attainable_floor - float(floor)) <= 1e-12, cells


@pytest.mark.parametrize("level", ["trial", "cell"])
def test_monte_carlo_within_four_standard_errors(level):
    rng = np.random.default_rng(99 if level == "trial" else 100)
    draws = 20_000
    for i in range(200):
        cells = random_design(rng, max_clusters=6, max_cells=3, max_n=10)
        exact = call(cells, level=level)
        mc = call(cells, level=level, n_resamples=draws, seed=i)
        assert mc.n_resamples == draws and mc.mc_stderr is not None
        assert "Monte Carlo" in mc.method
        se = max(math.sqrt(exact.pvalue * (1 - exact.pvalue) / draws), 1.0 / draws)
        assert abs(mc.pvalue - exact.pvalue) <= 4 * se, (cells, mc.pvalue, exact.pvalue)
        assert mc.attainable_floor == pytest.approx(exact.attainable_floor, rel=1e-9, abs=1e-300)


def test_trial_level_single_cluster_matches_scipy_permutation_test():
    rng = np.random.default_rng(5)
    for _ in range(40):
        na, nb = int(rng.integers(2, 7)), int(rng.integers(2, 7))
        x = (rng.random(na) < rng.random()).astype(float)
        y = (rng.random(nb) < rng.random()).astype(float)
        ref = sps.permutation_test(
            (x, y), lambda a, b: abs(a.mean() - b.mean()), permutation_type="independent",
            alternative="greater", vectorized=False, n_resamples=10**6,
        )
        res = stats.cluster_permutation_test(["p", "p"], [1, 0], [int(x.sum()), int(y.sum())], [na, nb])
        assert res.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


def test_cell_level_single_cluster_matches_scipy_permutation_test():
    rng = np.random.default_rng(6)
    for _ in range(30):
        m_a, m_b = int(rng.integers(2, 4)), int(rng.integers(2, 4))
        n = rng.integers(1, 8, m_a + m_b)
        h = rng.binomial(n, rng.random())
        arm = np.array([1] * m_a + [0] * m_b)

        def stat(ia, ib, h=h, n=n):
            ia, ib = ia.astype(int), ib.astype(int)
            return abs(h[ia].sum() / n[ia].sum() - h[ib].sum() / n[ib].sum())

        ref = sps.permutation_test(
            (np.arange(m_a), np.arange(m_a, m_a + m_b)), stat, permutation_type="independent",
            alternative="greater", vectorized=False, n_resamples=10**6,
        )
        res = stats.cluster_permutation_test(np.zeros(m_a + m_b, int), arm, h, n, level="cell")
        assert res.pvalue == pytest.approx(ref.pvalue, abs=1e-12)


@pytest.mark.parametrize("level", ["trial", "cell"])
def test_one_empty_arm_is_defined(level):
    res = stats.cluster_permutation_test([1, 1, 2], [1, 1, 1], [2, 3, 1], [5, 5, 5], level=level)
    assert math.isnan(res.statistic) and res.pvalue == 1.0 and res.attainable_floor == 1.0
    # An arm whose cells all have zero trials is empty too.
    res = stats.cluster_permutation_test([1, 1], [1, 0], [2, 0], [5, 0], level=level)
    assert math.isnan(res.statistic) and res.pvalue == 1.0


@pytest.mark.parametrize("level", ["trial", "cell"])
@pytest.mark.parametrize("value", [0, 1])
def test_all_zero_and_all_one(level, value):
    cl = np.repeat(np.arange(4), 3)
    arm = np.tile([1, 1, 0], 4)
    n = np.array([20, 18, 20, 20, 20, 17, 19, 20, 20, 20, 20, 15])
    res = stats.cluster_permutation_test(cl, arm, n * value, n, level=level)
    assert res.statistic == 0.0 and res.pvalue == 1.0 and res.attainable_floor == 1.0


@pytest.mark.parametrize("level", ["trial", "cell"])
def test_single_cluster_and_unequal_sizes_and_empty_cells(level):
    cells = [("a", 1, 3, 4), ("a", 0, 0, 3), ("a", 1, 0, 0), ("b", 1, 1, 2), ("b", 0, 0, 5), ("b", 0, 0, 0)]
    res = call(cells, level=level)
    ref = (_brute.trial_level if level == "trial" else _brute.cell_level)(cells)
    assert res.pvalue == pytest.approx(float(ref[0]), abs=1e-12)
    single = call([c for c in cells if c[0] == "a"], level=level)
    ref = (_brute.trial_level if level == "trial" else _brute.cell_level)([c for c in cells if c[0] == "a"])
    assert single.n_clusters == 1 and single.pvalue == pytest.approx(float(ref[0]), abs=1e-12)


def test_floor_is_data_dependent_not_two_over_two_to_the_n():
    cl = np.repeat(np.arange(12), 3)
    arm = np.tile([1, 1, 0], 12)
    n = np.full(36, 20)
    h = np.tile([5, 4, 0], 12)
    cell = stats.cluster_permutation_test(cl, arm, h, n, level="cell")
    assert cell.attainable_floor == pytest.approx(1 / 3**12)  # one extreme arrangement of 3^12
    trial = stats.cluster_permutation_test(cl, arm, h, n, level="trial")
    assert trial.attainable_floor < 1e-30 and trial.pvalue >= trial.attainable_floor


def test_float_comparison_path_agrees_with_integer_path(monkeypatch):
    rng = np.random.default_rng(3)
    designs = [random_design(rng, max_clusters=5, max_cells=4, max_n=6) for _ in range(60)]
    ints = [call(d, level="cell") for d in designs]
    monkeypatch.setattr(perm_mod, "INT_EXACT_MAX_N", 0)
    floats = [call(d, level="cell") for d in designs]
    for a, b in zip(ints, floats, strict=True):
        assert a.pvalue == pytest.approx(b.pvalue, abs=1e-12)
        assert a.attainable_floor == pytest.approx(b.attainable_floor, abs=1e-12)


@pytest.mark.slow
def test_over_budget_uses_tilted_convolution_or_monte_carlo(monkeypatch):
    cl = np.repeat(np.arange(6), 3)
    arm = np.tile([1, 1, 0], 6)
    n = np.full(18, 10)
    h = np.tile([3, 2, 0], 6)
    exact_cell = stats.cluster_permutation_test(cl, arm, h, n, level="cell")
    exact_trial = stats.cluster_permutation_test(cl, arm, h, n, level="trial")
    _budget_off(monkeypatch)
    # Trial level, and cell level while arm-A trials are fixed: tilted convolution with a stated bound.
    for level, exact in (("cell", exact_cell), ("trial", exact_trial)):
        res = stats.cluster_permutation_test(cl, arm, h, n, level=level, seed=1)
        assert res.n_resamples is None and res.mc_stderr is None and "tilted" in res.method
        assert abs(res.pvalue - exact.pvalue) <= res.pvalue_error + 1e-15
        assert res.attainable_floor == pytest.approx(exact.attainable_floor, rel=1e-9)
    # Unequal cells: the arm-A trial total varies, so Monte Carlo, and without the DP only a floor bound is known.
    n2 = n.copy()
    n2[0] = 7
    exact = stats.cluster_permutation_test(cl, arm, np.minimum(h, n2), n2, level="cell")
    _budget_off(monkeypatch)
    res = stats.cluster_permutation_test(cl, arm, np.minimum(h, n2), n2, level="cell", seed=1)
    assert res.n_resamples == perm_mod.DEFAULT_DRAWS and "over budget" in res.method
    assert abs(res.pvalue - exact.pvalue) <= 4 * max(res.mc_stderr, 1 / res.n_resamples)
    assert res.floor_is_bound and res.attainable_floor == pytest.approx(3.0**-6)


def _budget_off(monkeypatch):
    """Send small designs down the routes meant for big ones (no dense DP, no counting of arrangements)."""
    monkeypatch.setattr(perm_mod, "EXACT_BUDGET", -1)
    monkeypatch.setattr(perm_mod, "ENUMERATE_MAX", 0)


def test_tilted_trial_level_matches_enumeration(monkeypatch):
    rng = np.random.default_rng(4242)
    designs = [trial_design(rng) for _ in range(220)]
    _budget_off(monkeypatch)
    for cells in designs:
        res = call(cells, level="trial")
        p, floor = _brute.trial_level(cells)
        assert "tilted" in res.method and not res.pvalue_is_bound
        # Stated bound (plus the float representation of the reference), and the bound itself is tight.
        assert abs(res.pvalue - float(p)) <= res.pvalue_error + 4e-16 * float(p), cells
        assert res.pvalue_error <= 1e-10 * res.pvalue + 1e-15
        assert abs(res.attainable_floor - float(floor)) <= 1e-12


def test_tilted_cell_level_matches_enumeration_when_arm_a_trials_are_fixed(monkeypatch):
    rng = np.random.default_rng(4343)
    designs = []
    while len(designs) < 220:
        k = int(rng.integers(1, 6))
        cells = []
        for c in range(k):
            m, size = int(rng.integers(1, 5)), int(rng.integers(1, 7))  # equal cell sizes within a cluster
            cells += [(f"c{c}", int(rng.integers(0, 2)), int(rng.integers(0, size + 1)), size) for _ in range(m)]
        if any(c[1] for c in cells) and not all(c[1] for c in cells):
            designs.append(cells)
    _budget_off(monkeypatch)
    for cells in designs:
        res = call(cells, level="cell")
        p, floor = _brute.cell_level(cells)
        assert "tilted" in res.method
        assert abs(res.pvalue - float(p)) <= res.pvalue_error + 4e-16 * float(p), cells
        assert res.pvalue_error <= 1e-10 * res.pvalue + 1e-15
        assert abs(res.attainable_floor - float(floor)) <= 1e-12


def _heterogeneous(k, effect, seed, runs=20, error_rate=0.0):
    rng = np.random.default_rng(seed)
    base = 1 / (1 + np.exp(-rng.normal(-2.2, 1.0, k)))
    rate = np.stack([base * (1 + effect), base, base], axis=1).clip(0, 1)
    n = np.full((k, 3), runs)
    if error_rate:
        n = n - rng.binomial(runs, error_rate, (k, 3))
    h = rng.binomial(n, rate)
    return np.repeat(np.arange(k), 3), np.tile([1, 1, 0], k), h.ravel(), n.ravel()


@pytest.mark.parametrize("level", ["trial", "cell"])
def test_tilted_agrees_with_exact_method_on_larger_designs(monkeypatch, level):
    """Hundreds of clusters, p from ~0.5 down to ~1e-150: agreement within the stated bound."""
    cases = [(k, e, s) for k in (40, 300, 1500) for e in (0.0, 0.3, 1.0) for s in range(2)]
    designs = [_heterogeneous(k, e, s) for k, e, s in cases]
    exact = [stats.cluster_permutation_test(*d, level=level) for d in designs]
    _budget_off(monkeypatch)
    for d, ex, case in zip(designs, exact, cases, strict=True):
        assert "exact" in ex.method and ex.n_resamples is None
        res = stats.cluster_permutation_test(*d, level=level)
        assert "tilted" in res.method
        # The exact method carries its own rounding (~1e-12 relative after many sequential convolutions).
        assert abs(res.pvalue - ex.pvalue) <= res.pvalue_error + 1e-11 * ex.pvalue, (case, res.pvalue, ex.pvalue)
        if ex.pvalue > 0:
            assert res.log10_pvalue == pytest.approx(math.log10(ex.pvalue), abs=1e-9)


def test_tilted_p_below_float_range_is_reported_as_a_bound(monkeypatch):
    d = _heterogeneous(3000, 1.5, 0)
    within_budget = stats.cluster_permutation_test(*d, level="trial")  # the plain convolution underflows here...
    _budget_off(monkeypatch)
    res = stats.cluster_permutation_test(*d, level="trial")
    assert res.pvalue_is_bound and res.pvalue == perm_mod.TILTED_P_MIN and "p < 1e-300" in res.method
    assert res.log10_pvalue < -300 and math.isfinite(res.log10_pvalue)
    assert within_budget == res  # ...so it hands over to the tilted method: a bound, never a bare 0


def test_cell_level_monte_carlo_with_varying_arm_a_trials_within_four_standard_errors(monkeypatch):
    rng = np.random.default_rng(515)
    designs = []
    while len(designs) < 200:
        cells = random_design(rng, max_clusters=6, max_cells=3, max_n=8)
        if len({c[3] for c in cells}) > 1:
            designs.append(cells)
    exact = [call(d, level="cell") for d in designs]
    _budget_off(monkeypatch)
    for i, (cells, ex) in enumerate(zip(designs, exact, strict=True)):
        mc = call(cells, level="cell", seed=i)
        if mc.n_resamples is None:  # arm-A trials happened to be fixed after all
            assert abs(mc.pvalue - ex.pvalue) <= mc.pvalue_error + 1e-15
            continue
        se = max(math.sqrt(ex.pvalue * (1 - ex.pvalue) / mc.n_resamples), 1.0 / mc.n_resamples)
        assert abs(mc.pvalue - ex.pvalue) <= 4 * se, (cells, mc.pvalue, ex.pvalue)


def test_parallel_monte_carlo_does_not_depend_on_thread_count(monkeypatch):
    import numba

    d = _heterogeneous(300, 0.1, 3, error_rate=0.02)
    _budget_off(monkeypatch)
    a = stats.cluster_permutation_test(*d, level="cell", seed=8)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        b = stats.cluster_permutation_test(*d, level="cell", seed=8)
    finally:
        numba.set_num_threads(before)
    assert a.n_resamples and a == b


def test_seeded_monte_carlo_is_reproducible():
    cells = [("a", 1, 3, 9), ("a", 0, 1, 9), ("b", 1, 4, 9), ("b", 0, 0, 9)]
    r1 = call(cells, level="cell", n_resamples=500, seed=11)
    r2 = call(cells, level="cell", n_resamples=500, seed=11)
    assert r1 == r2


def test_statistic_and_counts():
    res = stats.cluster_permutation_test(["x", "x", "y", "y"], [1, 0, 1, 0], [3, 1, 2, 0], [10, 10, 10, 10])
    assert res.statistic == pytest.approx(5 / 20 - 1 / 20)
    assert (res.hits_a, res.n_a, res.hits_b, res.n_b) == (5, 20, 1, 20)
    assert res.floor == res.attainable_floor and res.rate_a == 0.25


def test_input_validation():
    with pytest.raises(ValueError, match="missing"):
        stats.cluster_permutation_test(["a", None], [1, 0], [1, 0], [2, 2])
    with pytest.raises(ValueError, match="missing"):
        stats.cluster_permutation_test([1.0, float("nan")], [1, 0], [1, 0], [2, 2])
    with pytest.raises(ValueError, match="arm"):
        stats.cluster_permutation_test([1, 1], [2, 0], [1, 0], [2, 2])
    with pytest.raises(ValueError, match="hits"):
        stats.cluster_permutation_test([1, 1], [1, 0], [3, 0], [2, 2])
    with pytest.raises(ValueError, match="level"):
        stats.cluster_permutation_test([1, 1], [1, 0], [1, 0], [2, 2], level="prompt")
    with pytest.raises(ValueError, match="at most"):
        stats.cluster_permutation_test(np.zeros(22, int), np.arange(22) % 2, np.ones(22, int), np.ones(22, int) * 2,
                                       level="cell")


def test_floor_without_dynamic_programme_is_exact_or_a_lower_bound(monkeypatch):
    rng = np.random.default_rng(42)
    designs = [random_design(rng, max_clusters=4, max_cells=3, max_n=5) for _ in range(200)]
    exact = [call(d, level="cell") for d in designs]
    _budget_off(monkeypatch)
    for d, e in zip(designs, exact, strict=True):
        r = call(d, level="cell", n_resamples=10, seed=0)
        if r.floor_is_bound:
            assert r.attainable_floor <= e.attainable_floor + 1e-15
        else:
            assert r.attainable_floor == pytest.approx(e.attainable_floor, rel=1e-9)


def test_cell_level_counts_a_tiny_arrangement_space_whatever_the_trial_counts():
    """8 prompts x 2 cells of 20,000-34,000 trials: 256 arrangements, exact p = 2/256 (was Monte Carlo 0.00715)."""
    rng = np.random.default_rng(29)
    n = rng.integers(20_000, 34_001, 16)
    a = np.tile([1, 0], 8)
    h = np.where(a == 1, (0.31 * n).astype(int), (0.30 * n).astype(int))
    res = stats.cluster_permutation_test(np.repeat(np.arange(8), 2), a, h, n, level="cell")
    assert res.n_resamples is None and "256 arrangements" in res.method
    assert res.pvalue == 0.0078125 and res.attainable_floor == 0.0078125


def test_cell_level_enumeration_matches_brute_force_at_ten_million_trials():
    """12 prompts x 3 cells, 1.08e7 trials (531,441 arrangements): every arrangement counted, as by brute force."""
    rng = np.random.default_rng(2929)
    n = rng.integers(250_000, 350_001, (12, 3))
    rate = rng.uniform(0.2, 0.4, (12, 1)) * np.array([[1.004, 1.0, 0.998]])
    h = rng.binomial(n, rate)
    a = np.tile([1, 0, 0], 12)
    res = stats.cluster_permutation_test(np.repeat(np.arange(12), 3), a, h.ravel(), n.ravel(), level="cell")
    # brute force: which cell of each prompt carries the A label, for all 3^12 choices
    pick = np.array(np.unravel_index(np.arange(3**12), (3,) * 12)).T  # (531441, 12)
    x = h[np.arange(12), pick].sum(axis=1).astype(np.float64)
    t = n[np.arange(12), pick].sum(axis=1).astype(np.float64)
    big_n, big_h = float(n.sum()), float(h.sum())
    stat = np.abs(x / t - (big_h - x) / (big_n - t))
    obs = stat[0]  # pick 0 everywhere = the observed labels
    assert np.sum(np.abs(stat - obs) < 1e-12 * obs) == np.sum(stat == obs)  # no near-ties to blur the count
    assert res.n_resamples is None and "531,441 arrangements" in res.method
    assert res.pvalue == pytest.approx(np.mean(stat >= obs), rel=1e-12)
    assert res.attainable_floor == pytest.approx(np.mean(stat >= stat.max() * (1 - 1e-12)), rel=1e-12)


def _random_big_design(rng):
    """Random design with a few prompts and cells, counts from 1 to 10^5 (equal or unequal cell sizes)."""
    k = int(rng.integers(1, 7))
    top = int(10 ** rng.uniform(0, 5))
    cells = []
    for c in range(k):
        m = int(rng.integers(2, 4))
        equal = rng.random() < 0.5
        size = int(rng.integers(1, top + 1))
        for j in range(m):
            nn = size if equal else int(rng.integers(1, top + 1))
            cells.append((c, int(j == 0 or rng.random() < 0.3), int(rng.binomial(nn, rng.uniform(0, 1))), nn))
    if not any(c[1] == 0 for c in cells):
        cells[-1] = (cells[-1][0], 0, cells[-1][2], cells[-1][3])
    return cells


@pytest.mark.parametrize("level", ["trial", "cell"])
def test_no_route_reports_a_p_below_the_designs_floor(monkeypatch, level):
    """Property: p >= attainable_floor on every route (exact, enumeration, tilted, Monte Carlo), huge counts too."""
    rng = np.random.default_rng(290 if level == "trial" else 291)
    designs = [_random_big_design(rng) for _ in range(25)]
    designs.append([(c, a, 31 if a else 30, 100) for c in range(8) for a in (1, 0)])  # floor 2/256
    for cells in designs:
        for kw in ({}, {"n_resamples": 2000, "seed": 3}):
            res = call(cells, level=level, **kw)
            assert res.pvalue >= res.attainable_floor, (cells, kw, res.method)
    _budget_off(monkeypatch)
    for cells in designs[-6:]:
        res = call(cells, level=level, seed=4)
        assert res.pvalue >= res.attainable_floor, (cells, res.method)


def test_trial_level_with_trimmed_tables_equals_the_full_convolution():
    """Tables of thousands of trials (entries far below 1e-300 at their ends): trimming changes nothing."""
    n = np.array([3000, 2500, 1800, 2200, 900, 1500])
    h = np.array([900, 700, 400, 500, 300, 320])
    cl, a = np.array([0, 0, 1, 1, 2, 2]), np.array([1, 0, 1, 0, 1, 0])
    res = stats.cluster_permutation_test(cl, a, h, n, level="trial")
    dist = np.ones(1)
    lo = 0
    for c in range(3):
        tot, good, draws = n[2 * c] + n[2 * c + 1], h[2 * c] + h[2 * c + 1], n[2 * c]
        xs = np.arange(max(0, draws - (tot - good)), min(good, draws) + 1)
        dist = np.convolve(dist, sps.hypergeom.pmf(xs, tot, good, draws))
        lo += xs[0]
    x = lo + np.arange(dist.size)
    big_n, big_k, n_a = n.sum(), h.sum(), n[::2].sum()
    d_obs = abs(h[::2].sum() * big_n - big_k * n_a)
    assert "exact" in res.method
    assert res.pvalue == pytest.approx(dist[np.abs(x * big_n - big_k * n_a) >= d_obs].sum(), rel=1e-9)


def test_a_trial_floor_below_the_float_range_is_a_flagged_bound_with_its_log10():
    # 10 prompts, each 500 trials a side, arm A all hits and arm B none: the only arrangements as extreme put every
    # hit back in arm A in every prompt (or every one in arm B), each 1 / C(1000, 500) ≈ 1e-299.7, so ≈ 1e-2994 in all
    cells = [(f"p{c}", arm, 500 * arm, 500) for c in range(10) for arm in (1, 0)]
    res = call(cells, level="trial")
    assert res.attainable_floor == 0.0 and res.floor_is_bound and res.log10_floor is not None
    # brute force in integers: both extreme arrangements count (the statistic is symmetric here)
    exact = math.log10(2) - 10 * math.log10(math.comb(1000, 500))
    assert res.log10_floor == pytest.approx(exact, abs=1e-6)
    assert "log10 floor" in res.method and res.pvalue >= res.attainable_floor
    small = call([(f"p{c}", arm, 5 * arm, 5) for c in range(3) for arm in (1, 0)], level="trial")
    assert small.attainable_floor > 0 and not small.floor_is_bound and small.log10_floor is None

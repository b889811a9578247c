import numpy as np
import pytest
from scipy import stats as sps

import stats


def test_field_scores_and_empty_set_conventions():
    gold = {("t1", "city"), ("t1", "date"), ("t2", "id")}
    pred = {("t1", "city"), ("t2", "date")}
    s = stats.field_scores(pred, gold)
    assert (s.true_positives, s.false_positives, s.false_negatives) == (1, 1, 2)
    assert s.precision == 0.5 and s.recall == pytest.approx(1 / 3) and s.f1 == pytest.approx(0.4)
    assert (stats.field_scores([], []).precision, stats.field_scores([], []).recall, stats.field_scores([], []).f1) == (1, 1, 1)
    none_pred = stats.field_scores([], gold)
    assert (none_pred.precision, none_pred.recall, none_pred.f1) == (1.0, 0.0, 0.0)
    none_gold = stats.field_scores(pred, [])
    assert (none_gold.precision, none_gold.recall, none_gold.f1) == (0.0, 1.0, 0.0)
    # Same field name on different units is a different item.
    assert stats.field_scores({("t1", "id")}, {("t2", "id")}).true_positives == 0


def test_prompts_firing():
    assert stats.prompts_firing(["a", "a", "b", "c"], [0, 2, 0, 1]) == (2, 3)
    assert stats.prompts_firing([], []) == (0, 0)
    with pytest.raises(ValueError, match="missing"):
        stats.prompts_firing(["a", float("nan")], [1, 0])


def test_factorize_clusters():
    codes, uniques = stats.factorize_clusters(["b", "a", "b", "c"])
    assert codes.tolist() == [0, 1, 0, 2] and uniques.tolist() == ["b", "a", "c"]
    codes, uniques = stats.factorize_clusters(np.array([7, 3, 7, 9]))
    assert codes.tolist() == [0, 1, 0, 2] and uniques.tolist() == [7, 3, 9]
    codes, _ = stats.factorize_clusters([("m", 1), ("m", 2), ("m", 1)])
    assert codes.tolist() == [0, 1, 0]
    for bad in ([1, None], [1.0, np.nan], np.array(["a", None], dtype=object)):
        with pytest.raises(ValueError, match="position 1 is missing"):
            stats.factorize_clusters(bad)


def test_wilson_matches_scipy():
    rng = np.random.default_rng(40)
    for _ in range(200):
        n = int(rng.integers(1, 200))
        k = int(rng.integers(0, n + 1))
        cl = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        lo, hi = stats.wilson_interval(k, n, cl)
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=cl, method="wilson")
        assert float(lo) == pytest.approx(ref.low, abs=1e-12) and float(hi) == pytest.approx(ref.high, abs=1e-12)
    lo, hi = stats.wilson_interval(np.array([0, 3]), np.array([0, 10]))
    assert np.isnan(lo[0]) and np.isnan(hi[0]) and 0 < lo[1] < hi[1] < 1


def test_stats_imports_neither_runner_nor_cluster_nor_polars():
    import subprocess
    import sys

    code = "import sys, stats; bad = [m for m in ('runner', 'cluster', 'polars') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"

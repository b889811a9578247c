"""The cluster intervals are named for what they compute: ``cluster_rate_ci`` / ``cluster_rate_ci_many`` /
``ClusterIntervalResult`` (the default draws no resamples, so no name says bootstrap)."""

from __future__ import annotations

import importlib
from typing import get_args

import pytest

import stats
from stats.cluster_intervals import METHODS, IntervalMethod

CLUSTER, HITS, N = [0, 0, 1, 1, 2, 2, 3, 3], [3, 1, 0, 2, 5, 1, 2, 2], [6, 6, 5, 5, 9, 9, 4, 4]
ARM = [1, 0, 1, 0, 1, 0, 1, 0]


@pytest.mark.parametrize("module, name", [("stats", "cluster_bootstrap_ci"), ("stats", "cluster_bootstrap_many"),
                                          ("stats", "BootstrapResult"), ("stats.results", "BootstrapResult"),
                                          ("stats.bootstrap", "BootstrapResult"), ("stats.bootstrap", "METHODS")])
def test_names_from_before_the_release_are_gone(module: str, name: str) -> None:
    with pytest.raises(AttributeError, match=name):
        getattr(importlib.import_module(module), name)


def test_public_names_are_the_new_ones_only() -> None:
    assert {"cluster_rate_ci", "cluster_rate_ci_many", "ClusterIntervalResult", "IntervalMethod"} <= set(stats.__all__)
    assert not {"cluster_bootstrap_ci", "cluster_bootstrap_many", "BootstrapResult"} & set(stats.__all__)
    for name in stats.__all__:
        assert getattr(stats, name) is not None


def test_method_is_a_literal_of_the_methods_that_exist() -> None:
    assert METHODS == get_args(IntervalMethod) == ("korn-graubard-tilted", "korn-graubard", "t", "percentile")
    with pytest.raises(ValueError, match="method must be one of"):
        stats.cluster_rate_ci(CLUSTER, HITS, N, method="bca")  # type: ignore[arg-type]
    # every key a result can carry has a readable name for captions
    keys = get_args(stats.IntervalKey)
    assert set(keys) == set(stats.INTERVAL_NAMES)
    assert stats.INTERVAL_NAMES["korn-graubard-tilted"] == "tilted Korn–Graubard cluster interval"


@pytest.mark.parametrize("method", METHODS)
def test_a_result_says_whether_it_drew_resamples(method: IntervalMethod) -> None:
    res = stats.cluster_rate_ci(CLUSTER, HITS, N, method=method, n_resamples=250, seed=1)
    if method == "percentile":
        assert res.n_resamples == 250 and res.bootstrap_distribution.size == 250
        assert "bootstrap" in res.method and "250 resamples" in res.method
    else:
        assert res.n_resamples == 0 and res.bootstrap_distribution.size == 0
        assert "resample" not in res.method and "bootstrap" not in res.method
        assert res.interval_method == method

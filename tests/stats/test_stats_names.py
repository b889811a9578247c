"""The cluster intervals are named for what they compute, and the former names still work, with a warning.

``cluster_bootstrap_ci`` / ``cluster_bootstrap_many`` / ``BootstrapResult`` were named when the
percentile bootstrap was the default; the default is now analytic and draws no resamples, so the
names are ``cluster_rate_ci`` / ``cluster_rate_ci_many`` / ``ClusterIntervalResult``.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import get_args

import numpy as np
import pytest

import stats
from stats.cluster_intervals import DEFAULT_METHOD, METHODS, IntervalMethod

CLUSTER, HITS, N = [0, 0, 1, 1, 2, 2, 3, 3], [3, 1, 0, 2, 5, 1, 2, 2], [6, 6, 5, 5, 9, 9, 4, 4]
ARM = [1, 0, 1, 0, 1, 0, 1, 0]


def _same(a: stats.ClusterIntervalResult, b: stats.ClusterIntervalResult) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y or (x != x and y != y), f.name


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("arm", [None, ARM])
def test_the_old_function_name_warns_and_returns_the_same_result(method: IntervalMethod, arm: list[int] | None) -> None:
    new = stats.cluster_rate_ci(CLUSTER, HITS, N, arm=arm, method=method, n_resamples=300, seed=5)
    with pytest.warns(DeprecationWarning, match=r"cluster_bootstrap_ci is deprecated, use stats\.cluster_rate_ci"):
        old = stats.cluster_bootstrap_ci(CLUSTER, HITS, N, arm=arm, method=method, n_resamples=300, seed=5)
    assert type(old) is stats.ClusterIntervalResult
    _same(old, new)


@pytest.mark.parametrize("method", METHODS)
def test_the_old_many_name_warns_and_returns_the_same_results(method: IntervalMethod) -> None:
    hits = np.column_stack([HITS, np.array(HITS)[::-1]])
    kwargs = dict(differences=[(0, 1)], method=method, n_resamples=300, seed=2)
    new = stats.cluster_rate_ci_many(CLUSTER, hits, N, **kwargs)
    with pytest.warns(DeprecationWarning, match=r"use stats\.cluster_rate_ci_many"):
        old = stats.cluster_bootstrap_many(CLUSTER, hits, N, **kwargs)
    assert len(old) == len(new) == 3
    for a, b in zip(old, new, strict=True):
        _same(a, b)


@pytest.mark.parametrize(("module", "name", "new"), [
    ("stats", "BootstrapResult", stats.ClusterIntervalResult),
    ("stats.results", "BootstrapResult", stats.ClusterIntervalResult),
    ("stats.bootstrap", "BootstrapResult", stats.ClusterIntervalResult),
    ("stats.bootstrap", "METHODS", METHODS),
    ("stats.bootstrap", "DEFAULT_METHOD", DEFAULT_METHOD),
])
def test_the_old_names_of_types_and_constants_warn_on_access_and_are_the_same_object(module: str, name: str,
                                                                                    new: object) -> None:
    with pytest.warns(DeprecationWarning, match=f"{module}.{name} is deprecated"):
        value = getattr(importlib.import_module(module), name)
    assert value is new


def test_unknown_names_are_still_attribute_errors() -> None:
    import stats.bootstrap
    import stats.results

    assert stats.cluster_intervals.cluster_bootstrap_ci is stats.cluster_bootstrap_ci  # warns when called
    for module in (stats, stats.bootstrap, stats.results):
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = module.no_such_name


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

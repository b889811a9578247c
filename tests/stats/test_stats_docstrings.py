"""Every public ``stats`` name documents itself as ``scipy.stats`` does (numpydoc sections)."""

from __future__ import annotations

import doctest
import inspect
from itertools import pairwise

import pytest

import stats
import stats.cluster_intervals

FUNCTIONS = sorted(n for n in stats.__all__ if inspect.isfunction(getattr(stats, n)))
CLASSES = sorted(n for n in stats.__all__ if inspect.isclass(getattr(stats, n)))


def _sections(obj: object) -> dict[str, str]:
    """numpydoc section title → its underline, for every underlined title in the docstring."""
    lines = inspect.cleandoc(obj.__doc__ or "").splitlines()
    return {a.strip(): b.strip() for a, b in pairwise(lines)
            if b.strip() and set(b.strip()) == {"-"} and len(b.strip()) == len(a.strip())}


def test_the_lists_are_not_empty() -> None:
    assert {"cluster_rate_ci", "cluster_permutation_test", "wilson_interval"} <= set(FUNCTIONS)
    assert {"ClusterIntervalResult", "PermutationTestResult"} <= set(CLASSES)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_public_function_has_parameters_and_returns_sections(name: str) -> None:
    fn = getattr(stats, name)
    sections = _sections(fn)
    assert "Parameters" in sections and "Returns" in sections, f"stats.{name}: {sorted(sections)}"
    doc = inspect.getdoc(fn) or ""
    params = [p for p in inspect.signature(fn).parameters]
    missing = [p for p in params if not any(line.startswith(p) or f", {p}" in line.split(" : ")[0]
                                            for line in doc.splitlines())]
    assert not missing, f"stats.{name} does not document {missing}"
    assert "Notes" in sections, f"stats.{name}: state the method in a Notes section"


@pytest.mark.parametrize("name", CLASSES)
def test_every_public_result_type_has_an_attributes_section(name: str) -> None:
    assert "Attributes" in _sections(getattr(stats, name)), f"stats.{name}"


def test_the_examples_run() -> None:
    failed, tried = doctest.testmod(stats.cluster_intervals, verbose=False)
    assert tried >= 1 and failed == 0

"""The coverage benchmark loaded as a module, for the tests that check its exact floors and its seeded cells.

Why this exists: benchmarks/interval_coverage.py is a script, not a package module, and two test modules
(test_coverage_floor, test_coverage_band) read its simulation and floor functions; one fixture loads it once.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "interval_coverage.py"


@pytest.fixture(scope="session")
def bench() -> ModuleType:
    """benchmarks/interval_coverage.py, imported under a private name."""
    spec = importlib.util.spec_from_file_location("_interval_coverage_under_test", _PATH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod

"""Fixtures shared by the output tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import runner
from runner.config.sweep import load_sweep
from tests.helpers import quickstart_sweep


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sweep, a complete output of it): the quickstart, 2 runs a cell (234 trials), batches of 16 rows — many
    small batches, so per-batch records and checksums are exercised. One per test module."""
    tmp = tmp_path_factory.mktemp("built")
    sweep = quickstart_sweep(tmp, runs=2, engine={"batch_rows": 16})
    runner.run(load_sweep(sweep), tmp / "out", quiet=True)
    return sweep, tmp / "out"

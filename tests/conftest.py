"""Shared test fixtures: small sweeps built from the bundled quickstart files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

# Nothing a test starts may leave the machine: Ray probes cloud metadata addresses at
# start, so route any proxy-honouring client to a dead port, except loopback.
os.environ.setdefault("HTTP_PROXY", "http://127.0.0.1:9")
os.environ.setdefault("HTTPS_PROXY", "http://127.0.0.1:9")
os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost,::1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


def quickstart_dict() -> dict[str, Any]:
    data = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    for probe in data["probes"]:
        for key in ("cases", "catalogue"):
            probe[key] = str(CONFIGS / probe[key])
    return data


@pytest.fixture(scope="session")
def quickstart_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished quickstart run with 6 runs per cell, shared read-only by the tests that read one."""
    from runner.config.sweep import load_sweep
    from runner.execution.run import run_sweep

    tmp = tmp_path_factory.mktemp("quickstart")
    data = quickstart_dict()
    data["probes"][0]["runs"] = 6
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    run_sweep(load_sweep(path), tmp / "out", quiet=True)
    return tmp / "out"


@pytest.fixture
def write_sweep(tmp_path: Path) -> Callable[..., Path]:
    """Write a sweep (default: the quickstart with few runs) into tmp and return its path."""

    def _write(data: dict[str, Any] | None = None, *, runs: int = 3, name: str = "sweep.yaml", **top: Any) -> Path:
        sweep = data if data is not None else quickstart_dict()
        if data is None:
            for probe in sweep["probes"]:
                probe["runs"] = runs
        sweep.update(top)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(sweep, sort_keys=False))
        return path

    return _write

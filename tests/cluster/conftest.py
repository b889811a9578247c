"""Ray fixtures for cluster tests: loopback only, short temp paths, everything stopped after.

A private one-node Ray (``num_cpus=2``, no dashboard, node IP 127.0.0.1) is started
once per test module that asks for it, with its temp dir under a short ``/tmp/tg*``
path (Ray's Unix socket paths must stay under ~107 characters, which pytest's tmp
paths can exceed), and shut down and removed after the module.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import quickstart_dict


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    temp = tempfile.mkdtemp(prefix="tg", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp,
             log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


def http_sweep(base_url: str, *, runs: int = 2, concurrency: int = 16, params: dict[str, Any] | None = None,
               limits: dict[str, Any] | None = None, models: tuple[str, ...] = ("careful", "typical", "reckless"),
               batch_rows: int | None = None) -> dict[str, Any]:
    """The quickstart design, its models reached over HTTP (``provider: openai``) at ``base_url``."""
    data = quickstart_dict()
    data["models"] = [{"name": f"sim-{m}", "provider": "openai", "model": m, "base_url": base_url,
                       "api_key_env": None, "params": dict(params or {}), "concurrency": 64,
                       **({"limits": limits} if limits else {})} for m in models]
    for probe in data["probes"]:
        probe["runs"] = runs
    data["engine"] = {"concurrency": concurrency, "timeout_s": 60}
    if batch_rows:
        data["engine"]["batch_rows"] = batch_rows
    return data


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path

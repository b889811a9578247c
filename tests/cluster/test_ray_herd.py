"""The thundering herd through Ray: two workers, no ``limits:``, one learned pace shared by the limiter actor.

The same server as ``tests/providers/test_herd.py`` — ``trialgrid serve --rpm 300
--rpm-mode bucket`` in its own process, 10% 5xx, and no rate-limit headers, so
the pace can only be learned from 429s — and the same 117-trial sweep, run by two
Ray workers. Each worker sees only its own answers; the key's ``LimiterActor``
learns from both and grants their permits at one pace. Asserted from the server's
own log: every trial ok, and at least 90% of the limit used.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.helpers import write_yaml
from tests.providers.conftest import ServeProcess, http_sweep, limit_used, trials

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("ray_local")]

RPM = 300


def test_two_workers_learn_one_pace_and_lose_nothing(tmp_path: Path) -> None:
    server = ServeProcess("--rpm", str(RPM), "--rpm-mode", "bucket", "--fault", "500=0.05", "--fault", "503=0.05",
                          "--latency-ms", "20", "--no-rate-headers")
    try:
        data = http_sweep(server.url + "/v1", "openai", runs=1)  # 117 trials, no limits:
        loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", data))
        result = runner.run(loaded, tmp_path / "out", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 20})
        log = server.stats()["log"]
    finally:
        server.close()
    df = trials(tmp_path / "out")
    assert df.height == 117 and df.filter(pl.col("status") != "ok").is_empty(), \
        df.filter(pl.col("status") != "ok").select("error_kind", "error").head(5)
    assert result.counts == {"ok": 117}
    share = limit_used(log, RPM)
    assert 0.9 <= share <= 1.05, (share, {s: log["status"].count(s) for s in set(log["status"])})

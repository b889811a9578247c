"""The thundering herd: a sweep with no ``limits:`` learns a token-bucket limit and uses it, losing nothing.

The server is ``trialgrid serve`` in its own process (``--rpm 300 --rpm-mode bucket``:
a bucket of one second's worth of requests (5) refilled continuously, as the vendors
enforce per-minute limits, with 5% 500s and 5% 503s); the client is a full single-node
``runner.run`` of 117 trials, about 25 s at 300 rpm. (It ran at 60 rpm, two minutes a
case, until CI time ran short; the client learns the same way at either rate, and the
shares measured at 300 rpm were 0.98–1.03.) Both ways a client can learn the limit
are checked: from the rate-limit headers on every answer, and — without them —
from the 429s alone (AIMD). What is asserted comes from the server's own request
log: every trial ok, and the requests it admitted per minute at least 90% of its
limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.providers.conftest import ServeProcess, http_sweep, limit_used, trials, write

RPM = 300


@pytest.fixture
def bucket_server(request: pytest.FixtureRequest) -> Iterator[ServeProcess]:
    headers = "--rate-headers" if request.param else "--no-rate-headers"
    server = ServeProcess("--rpm", str(RPM), "--rpm-mode", "bucket", "--fault", "500=0.05", "--fault", "503=0.05",
                          "--latency-ms", "20", headers)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize("bucket_server", [True, False], ids=["with-headers", "without-headers"], indirect=True)
def test_no_limits_configured_learns_the_limit_and_loses_nothing(bucket_server: ServeProcess, tmp_path: Path) -> None:
    data = http_sweep(bucket_server.url + "/v1", "openai", runs=1)  # 117 trials, no limits:
    assert not any("limits" in m for m in data["models"])
    loaded = load_sweep(write(tmp_path, data))
    runner.run(loaded, tmp_path / "out", quiet=True)
    df = trials(tmp_path / "out")
    log = bucket_server.stats()["log"]
    assert df.height == 117 and df.filter(pl.col("status") != "ok").is_empty(), \
        df.filter(pl.col("status") != "ok").select("error_kind", "error").head(5)
    share = limit_used(log, RPM)
    statuses = {s: log["status"].count(s) for s in set(log["status"])}
    assert share >= 0.9, (share, statuses)
    assert share <= 1.05  # the bucket never admits more than its limit (one token of slack at the start)

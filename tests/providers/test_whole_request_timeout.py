"""A model's ``timeout_s`` bounds the whole request, not each read.

``trialgrid serve``'s ``drip`` fault sends an answer one byte every 100 ms: every read
is quick, the request is not (a quickstart answer takes tens of seconds). With a
per-read timeout such requests were all accepted, up to 54 s each.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from runner.sim.serve import ServerThread
from tests.helpers import invoke
from tests.providers.conftest import http_sweep, trials, write


def test_timeout_s_ends_a_dripping_answer_as_a_transient_request_timeout(
        serve: Callable[..., ServerThread], tmp_path: Path) -> None:
    server = serve(faults={"drip": 1.0})
    data = http_sweep(server.base_url, "openai", runs=1, concurrency=39, timeout_s=2, retry={"max_attempts": 1})
    data["models"] = data["models"][:1]  # 39 trials
    # the trial's deadline is far enough past the request's that only the request timeout can end a trial
    data["engine"] = {"concurrency": 39, "timeout_s": 30}
    out = tmp_path / "out"
    # --strict-params: no scout request per shape (a scout that fails transiently leaves the shape unverified,
    # so each request would go alone, 39 times 2 s)
    first = invoke("run", str(write(tmp_path, data)), "--out", str(out), "--no-report", "--strict-params")
    assert first.exit_code == 3, first.output
    rows = trials(out)
    assert rows.height == 39
    assert rows["status"].unique().to_list() == ["error"]
    assert rows["error_kind"].unique().to_list() == ["transient"]  # a timeout of the request: retryable
    assert rows["error"].str.contains("no answer within the 2 s request timeout").all()
    assert (rows["attempts"] == 1).all()
    # the tool's own record of the request: it waited out the 2 s request timeout, and the request timeout ended
    # it (the error above), not the drip's end (tens of seconds) nor the trial's 30 s deadline
    assert rows.select(pl.col("latency_ms").min()).item() >= 2000
    assert rows.select(pl.col("latency_ms").max()).item() < 30_000
    # serve counts a request when its handler ends: a dripping handler notices the client gone at its next write
    # (≤ drip_s later, longer on a loaded machine), so the count may lag the client's 39 timeouts briefly
    deadline = time.monotonic() + 10.0
    while server.stats()["by_tag"].get("fault:drip") != 39 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.stats()["by_tag"].get("fault:drip") == 39

    # the printed retry command, once the server answers normally again, finishes the run
    command = next(line for line in first.stderr.splitlines() if "--retry-errors" in line)
    server.set_faults({})
    again = invoke(*shlex.split(command.split("trialgrid ", 1)[1]), "--no-report")
    assert again.exit_code == 0, again.output

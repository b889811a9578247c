"""Which row of a trial is newest is decided by the writer's sessions, never by a clock.

A ``--retry-errors`` run under a clock set back an hour (``finished_at`` and the parts' mtimes before the
first run's) must still supersede the rows it re-attempted, for every reader: the same rows as on a true clock.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.core.errors import ErrorKind, ProviderError
from runner.core.types import ChatRequest, ChatResponse
from runner.sim import SimProvider
from tests.helpers.files import quickstart_dict, write_yaml

#: while True, the agent below fails every call with a retryable error
BROKEN = [True]
_SIM = SimProvider()


def agent(request: ChatRequest) -> ChatResponse:
    if BROKEN[0]:
        raise ProviderError(ErrorKind.TRANSIENT, "the server is warming up")
    return _SIM.respond(request)


@pytest.mark.parametrize("shift_s", [-3600, 3600])
def test_a_retry_under_a_stepped_clock_supersedes_what_it_retried(tmp_path: Path, shift_s: int,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 1
    data["models"] = [{"name": "flaky", "provider": "callable", "function": f"{__name__}:agent",
                       "retry": {"max_attempts": 1}}]
    sweep, out = write_yaml(tmp_path / "sweep.yaml", data), tmp_path / "out"
    BROKEN[0] = True
    first = runner.run(sweep, out, quiet=True)
    assert first.counts == {"error": 39} and first.exit_code == 3
    first_parts = set((out / "trials").glob("*.arrow"))

    BROKEN[0] = False
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + shift_s)  # the clock stepped between the two runs
    try:
        again = runner.run(sweep, out, quiet=True, retry_errors=["transient"])
    finally:
        monkeypatch.setattr(time, "time", real)
    # and the file times too: the retry's parts look older (or newer) than the first run's
    for part in set((out / "trials").glob("*.arrow")) - first_parts:
        stamp = os.stat(part).st_mtime + shift_s
        os.utime(part, (stamp, stamp))

    assert again.stats.done == 39 and again.exit_code == 0
    rows = runner.load(out).collect()
    assert rows.height == 39 and (rows["status"] == "ok").all()
    assert runner.load(out).select(pl.len()).collect().item() == 39
    written = pl.concat([pl.read_ipc(str(p)) for p in (out / "trials").glob("*.arrow")], how="diagonal_relaxed")
    ok_at = written.filter(pl.col("status") == "ok")["finished_at"].max()
    error_at = written.filter(pl.col("status") == "error")["finished_at"].min()
    assert (ok_at < error_at) == (shift_s < 0)  # the clock did step: by time, the retried rows look older
    summary = runner.load_summary(out)
    assert set(summary.conditions.group_by("rate").agg(pl.col("trials").sum())["trials"]) == {39}

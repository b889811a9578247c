"""A fifth of all responses faulted, every kind mixed: nothing lost, nothing duplicated, even across SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.execution.grid import grid_of
from runner.sim.serve import ServeOptions
from tests.conftest import ROOT, quickstart_dict
from tests.providers.conftest import CELL, OUTCOMES, http_sweep, outcomes, rows_over_messages_api, trials, write

# The client's timeout must tell a "slow" fault from a loaded machine by a wide margin on both sides: a healthy
# answer takes milliseconds, and still well under a second with the machine's cores busy elsewhere, so 2 s never
# cuts one off (a timed-out healthy answer is an extra error row, and is not "admitted" for the limiter's learned
# pace either, which then crawls); a "slow" answer is held 5 s by the server, so it always times out.
FAULTY = dict(faults=ServeOptions.mixed_faults(0.2), slow_s=5.0, fault_retry_after_s=0.05, fault_seed=11, latency_ms=2)
# two attempts per call: with 20% faults about 4% of trials run out of retries, so error rows are certain
CLIENT = dict(timeout_s=2.0, retry={"max_attempts": 2, "backoff_base_s": 0.005, "backoff_max_s": 0.02}, concurrency=64)


def _in_process(tmp_path: Path, runs: int) -> pl.DataFrame:
    data = quickstart_dict()
    data["probes"][0]["runs"] = runs
    runner.run(load_sweep(write(tmp_path, data, "sim.yaml")), tmp_path / "sim", quiet=True)
    return outcomes(trials(tmp_path / "sim"))


def _check(df: pl.DataFrame, loaded, reference: pl.DataFrame) -> None:  # type: ignore[no-untyped-def]
    assert df["trial_id"].n_unique() == df.height == len(grid_of(loaded))
    assert set(df["trial_id"]) == {s.trial_id for s in grid_of(loaded)}
    errors = df.filter(pl.col("status") == "error")
    assert errors.height > 0
    # 429s do not spend attempts (they are bounded by retry.max_wait_s): only transient faults run out
    assert set(errors["error_kind"]) == {"transient"}
    assert (errors["attempts"] >= 2).all() and errors["error"].str.contains(r"gave up after \d+ attempts").all()
    assert errors["decoy_called"].is_null().all() and errors["expected_called"].is_null().all()
    ok = df.filter(pl.col("status") == "ok")
    assert ok.height > 0.9 * df.height
    # an answered trial answered exactly as in-process, however many attempts it took
    joined = outcomes(ok).join(reference, on=CELL, suffix="_sim")
    assert joined.height == ok.height
    for column in OUTCOMES:
        if column not in CELL:
            assert joined[column].equals(joined[f"{column}_sim"], check_names=False), column


def test_mixed_faults_every_trial_once(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(**FAULTY)
    loaded = load_sweep(write(tmp_path, http_sweep(server.base_url, "openai", runs=3, **CLIENT)))
    result = runner.run(loaded, tmp_path / "out", quiet=True)
    df = trials(tmp_path / "out")
    _check(df, loaded, _in_process(tmp_path, 3))
    stats = server.stats()
    deadline = time.monotonic() + FAULTY["slow_s"] + 30  # a bound, not a measurement: only a stuck server reaches it
    while stats["in_flight"] and time.monotonic() < deadline:  # "slow" answers finish (to a client long gone)
        time.sleep(0.05)                                         # after the run: wait for them
        stats = server.stats()
    assert stats["in_flight"] == 0, "the server still holds answers long after their fault's delay"
    # every request the server saw is one of the rows' attempts; the client may count more: an
    # attempt that timed out while still waiting for a connection never reached the server
    assert 0 < stats["requests"] <= df["attempts"].sum()
    assert {t.split(":")[1] for t in stats["by_tag"] if t.startswith("fault:")} == set(FAULTY["faults"])
    assert result.counts["error"] == df.filter(pl.col("status") == "error").height


@pytest.mark.slow
def test_sigkill_and_resume_lose_and_duplicate_nothing(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = serve(**FAULTY)
    data = http_sweep(server.base_url, "anthropic", runs=6, **CLIENT)
    data["engine"] = {"batch_rows": 16, "flush_seconds": 0.05, "concurrency": 64}
    path = write(tmp_path, data)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "runner.cli.app", "run", str(path), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.stat().st_size > 2048 for p in (out / "trials").glob("*.arrows")) if (out / "trials").exists() else False:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed; make it longer"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # a bound against a hang, not a measurement: the whole sweep takes seconds idle, a minute or two on a loaded machine
    done = subprocess.run(cmd, cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=400)
    assert done.returncode == 3, done.stderr  # finished; the error rows a fifth of faults leave make it exit 3
    assert "--retry-errors" in done.stderr and "Traceback" not in done.stderr
    loaded = load_sweep(path)
    _check(trials(out), loaded, rows_over_messages_api(_in_process(tmp_path, 6)))  # an anthropic run

"""Issue 33 items 1–2: a stop that stops, and error kinds that tell the truth, against a throttled server.

A run whose trials wait on the key's limiter (a server admitting 120 requests a minute, far
fewer than the trials in flight) is where cancellation used to go wrong: a waiter cancelled in
the turnstile raised ``ValueError`` instead of ``CancelledError``, the trial became an
``internal`` row and the worker took its next spec, so SIGTERM left the run going at the paced
rate. These tests run a real ``trialgrid run`` process against ``trialgrid serve``.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.sim.serve import ServerThread
from tests.helpers import ROOT, invoke, serving, trialgrid, written_rows
from tests.providers.conftest import CELL, OUTCOMES, http_sweep, outcomes, write

#: what a stop must never print: a task left pending, a loop closed under a running task
NOISE = ("Task was destroyed", "Event loop is closed", "Traceback", "Task exception was never retrieved")


@pytest.fixture
def throttled() -> Iterator[ServerThread]:
    """``trialgrid serve`` admitting 120 requests a minute per key (a bucket of one second's worth)."""
    with serving(rpm=120, rpm_mode="bucket") as server:
        yield server


def _healthy(server: ServerThread) -> None:
    """The same server, its rate limit lifted (the account's limit was raised, the incident is over)."""
    server.call(lambda state: setattr(state.options, "rpm", None))


def _start(sweep: Path, out: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--out", str(out), "--quiet"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_answers(server: ServerThread, proc: subprocess.Popen[str], answers: int) -> None:
    """Until the server has answered ``answers`` requests (the run is throttled, trials queue in the limiter)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if server.stats()["by_status"].get("200", 0) >= answers:
            return
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before it could be stopped"
    raise AssertionError("the throttled run never got going")


def _no_internal(out: Path) -> pl.DataFrame:
    rows = written_rows(out)
    internal = rows.filter(pl.col("error_kind") == "internal")
    assert internal.height == 0, internal.select("trial_id", "error").to_dicts()[:3]
    return rows


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "sigint"])
def test_a_signal_stops_a_throttled_run_at_once_and_the_rerun_equals_an_uninterrupted_one(
        throttled: ServerThread, tmp_path: Path, sig: signal.Signals, code: int) -> None:
    sweep = write(tmp_path, http_sweep(throttled.base_url, "openai", runs=2, concurrency=64)
                  | {"engine": {"concurrency": 64, "flush_seconds": 0.05}})
    out = tmp_path / "out"
    proc = _start(sweep, out)
    try:
        _wait_for_answers(throttled, proc, 8)  # 64 trials in flight, most of them queued on the limiter
        sent_before = throttled.stats()["requests"]
        proc.send_signal(sig)
        # it used to go on taking specs at the paced rate for minutes; the bound here is generous, the stop is not
        returned = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert returned == code, stderr
    for noise in NOISE:
        assert noise not in stderr, stderr
    # nothing was taken after the stop: at most the requests already queued at the head went out
    assert throttled.stats()["requests"] - sent_before <= 4
    rows = _no_internal(out)
    assert 0 < rows.height < 234  # the finished trials are kept; the cancelled ones were not written

    _healthy(throttled)
    resumed = trialgrid("run", str(sweep), "--out", str(out), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    df = runner.load(out).collect()
    assert df.height == df["trial_id"].n_unique() == 234
    reference = tmp_path / "reference"
    assert trialgrid("run", str(sweep), "--out", str(reference), "--quiet").returncode == 0
    expected = outcomes(runner.load(reference).collect())
    assert outcomes(df).equals(expected), [c for c in OUTCOMES if not outcomes(df)[c].equals(expected[c])]
    assert set(CELL) <= set(df.columns)


def test_a_deadline_reached_in_the_limiter_queue_is_a_timeout_and_the_printed_retry_reaches_exit_0(
        throttled: ServerThread, tmp_path: Path) -> None:
    # 32 trials in flight at 2 requests a second (the limit configured, as the account's is known): most wait in
    # the key's queue past a 2 s deadline, and the deadline cancels the head of the queue and its waiters at once
    data = http_sweep(throttled.base_url, "openai", runs=1, concurrency=32, limits={"rpm": 120})
    data["models"] = data["models"][:1]  # 39 trials
    data["engine"] = {"concurrency": 32, "timeout_s": 2}
    sweep = write(tmp_path, data)
    out = tmp_path / "out"
    first = invoke("run", str(sweep), "--out", str(out), "--no-report")
    assert first.exit_code == 3, first.output
    rows = _no_internal(out)
    errors = rows.filter(pl.col("status") == "error")
    assert errors.height > 0
    assert set(errors["error_kind"]) <= {"timeout", "rate_limited"}, errors["error"].to_list()[:3]
    queued = errors.filter(pl.col("error_kind") == "timeout")
    assert (queued["attempts"] == 0).any()  # timed out in the queue: nothing was sent, and the row says so
    command = next(line for line in first.stderr.splitlines() if "--retry-errors" in line)
    args = shlex.split(command.split("trialgrid ", 1)[1])

    _healthy(throttled)
    for model in data["models"]:  # the account's limit was raised with it
        model.pop("limits")
    write(tmp_path, data)
    again = invoke(*args, "--no-report")
    assert again.exit_code == 0, again.output
    assert runner.load(out).filter(pl.col("status") == "ok").collect().height == 39

"""A stop that stops, and error kinds that tell the truth, against a throttled server.

A run whose trials wait on the key's limiter (a server admitting 120 requests a minute, far
fewer than the trials in flight) is where cancellation used to go wrong: a waiter cancelled in
the turnstile raised ``ValueError`` instead of ``CancelledError``, the trial became an
``internal`` row and the worker took its next spec, so SIGTERM left the run going at the paced
rate. These tests run a real ``trialgrid run`` process against ``trialgrid serve``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.sim.serve import ServerThread
from tests.helpers import ROOT, invoke, serving, written_rows
from tests.providers.conftest import OUTCOMES, http_sweep, outcomes, write

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


@pytest.mark.slow
def test_sigterm_stops_a_throttled_run_at_once_and_the_rerun_equals_an_uninterrupted_one(
        throttled: ServerThread, tmp_path: Path) -> None:
    # (SIGINT takes the same path: sigterm_as_interrupt turns SIGTERM into it; the exit status is what differs)
    sweep = write(tmp_path, http_sweep(throttled.base_url, "openai", runs=1, concurrency=64)
                  | {"engine": {"concurrency": 64, "flush_seconds": 0.05}})
    out = tmp_path / "out"
    proc = _start(sweep, out)
    try:
        _wait_for_answers(throttled, proc, 6)  # 64 trials in flight, most of them queued on the limiter
        sent_before = throttled.stats()["requests"]
        proc.send_signal(signal.SIGTERM)
        # it used to go on taking specs at the paced rate for minutes; the bound here is generous, the stop is not
        returned = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):  # closed here, not by the garbage collector (a ResourceWarning later)
        if pipe:
            pipe.close()
    assert returned == 143, stderr
    for noise in NOISE:
        assert noise not in stderr, stderr
    # nothing was taken after the stop: at most the requests already queued at the head went out
    assert throttled.stats()["requests"] - sent_before <= 4
    rows = _no_internal(out)
    assert 0 < rows.height < 117  # the finished trials are kept; the cancelled ones were not written

    _healthy(throttled)
    resumed = invoke("run", str(sweep), "--out", str(out), "--quiet")
    assert resumed.exit_code == 0, resumed.output
    df = runner.load(out).collect()
    assert df.height == df["trial_id"].n_unique() == 117
    reference = tmp_path / "reference"
    runner.run(load_sweep(sweep), reference, quiet=True)
    expected = outcomes(runner.load(reference).collect())
    assert outcomes(df).equals(expected), [c for c in OUTCOMES if not outcomes(df)[c].equals(expected[c])]


def test_time_in_the_key_queue_is_not_the_trials_time_and_no_row_is_internal(tmp_path: Path) -> None:
    # 39 trials in flight at 10 requests a second (the limit configured too, as the account's is known): the last
    # wait ~4 s for their turn, twice their 2 s deadline. That wait is the engine's admission, not the trial: the
    # deadline starts at the first request. It used to time them out with nothing sent, and the
    # deadline's cancellation, meeting the head of the queue and its waiters at once, made internal rows.
    with serving(rpm=600, rpm_mode="bucket") as server:
        data = http_sweep(server.base_url, "openai", runs=1, concurrency=39, limits={"rpm": 600})
        data["models"] = data["models"][:1]  # 39 trials
        data["engine"] = {"concurrency": 39, "timeout_s": 2}
        out = tmp_path / "out"
        result = invoke("run", str(write(tmp_path, data)), "--out", str(out), "--no-report")
    rows = _no_internal(out)
    errors = rows.filter(pl.col("status") == "error")
    assert errors.filter(pl.col("attempts") == 0).height == 0, errors.select("error_kind", "error").to_dicts()[:3]
    assert set(errors["error_kind"]) <= {"timeout", "rate_limited"}, errors["error"].to_list()[:3]
    assert result.exit_code == 0 and rows.height == 39, result.output


def test_a_budget_stop_cancels_the_trials_in_flight_and_they_run_on_resume(tmp_path: Path) -> None:
    # half the answers are held 30 s, far past the 3 s deadline: a stop that let the trials in flight finish wrote them
    # as timeout rows (and waited out their deadlines); a stop that stops cancels them, and they stay unwritten
    prices = {"input": 1.0, "output": 5.0}
    with serving(faults={"slow": 0.5}, slow_s=30, fault_seed=3) as server:
        data = http_sweep(server.base_url, "openai", runs=1, concurrency=16)
        data["engine"] = {"concurrency": 16, "timeout_s": 3, "flush_seconds": 0.05}
        data["prices"] = {m["name"]: prices for m in data["models"]}
        data["budget"] = {"usd": 1e-6}  # the first answer spends it
        sweep, out = write(tmp_path, data), tmp_path / "out"
        first = runner.run(load_sweep(sweep), out, quiet=True)
        assert first.status == "stopped_budget", first.status
        rows = _no_internal(out)
        assert rows.height >= 1 and set(rows["status"]) == {"ok"}, rows.select("error_kind", "error").to_dicts()[:3]
        assert rows.height < 16  # not the window: the trials in flight were cancelled, not written
        data["budget"] = {"usd": 100.0}
        data["engine"]["timeout_s"] = 60
        server.set_faults({})  # the incident is over
        resumed = runner.run(load_sweep(write(tmp_path, data)), out, quiet=True)
    assert resumed.status == "complete"
    df = runner.load(out).collect()
    assert df.height == df["trial_id"].n_unique() == first.total
    assert set(df["status"]) == {"ok"}


@pytest.mark.slow  # ~90 s: the key's 20 s pause, then the pace learned from the 429
def test_one_long_retry_after_makes_rate_limited_rows_not_timeouts_and_the_retry_reaches_exit_0(
        tmp_path: Path) -> None:
    # one injected 429 says "Retry-After: 100", past every trial's 8 s deadline and past the
    # model's retry.max_wait_s of 20 s. It used to pause the whole key 100 s: 33 of 39 trials timed out waiting, 5
    # were internal. Now the key pauses once, capped at max_wait_s; the trial it hit, and every trial whose next
    # request would wait past its deadline, is a retryable rate_limited row at once. (A lone 429 without rate
    # headers, as here, is an isolated blip to the learned pace and pauses no key: only the trial it hit is such a
    # row. tests/providers/test_providers_limiter.py holds the pause itself.)
    # (seed 156 at 1%: the 18th request is the only 429 of the first 200)
    with serving(faults={"429": 0.01}, fault_retry_after_s=100, fault_seed=156) as server:
        data = http_sweep(server.base_url, "openai", runs=1, concurrency=39, retry={"max_wait_s": 20})
        data["models"] = data["models"][:1]  # 39 trials
        data["engine"] = {"concurrency": 39, "timeout_s": 8}
        sweep, out = write(tmp_path, data), tmp_path / "out"
        first = invoke("run", str(sweep), "--out", str(out), "--no-report")
        rows = _no_internal(out)
        assert rows.height == 39, first.output
        kinds = rows.filter(pl.col("status") == "error")["error_kind"]
        assert len(kinds) and set(kinds) == {"rate_limited"}, rows["error"].drop_nulls().to_list()[:3]
        assert first.exit_code == 3 and "--retry-errors" in first.output, first.output
        server.set_faults({})  # the incident is over
        retried = invoke("run", str(sweep), "--out", str(out), "--no-report", "--retry-errors")
    assert retried.exit_code == 0, retried.output
    assert set(runner.load(out).collect()["status"]) == {"ok"}

"""SIGTERM to a ``--ray local`` driver of a throttled run is a clean stop.

``ray.init`` used to put its core worker's native SIGTERM handler over Python's, so the driver aborted
(exit 134, a native crash dump) instead of stopping as a single-node run does (143). Here a real
``trialgrid run --ray local --workers 2`` against ``trialgrid serve`` at 120 requests a minute gets a
SIGTERM once answers flow: exit 143, no ``internal`` row, no process of its session alive 10 s later.
Then, the server's limit lifted, a rerun through Ray completes the output: every trial exactly once,
and the rows' outcomes equal an uninterrupted run's (tests/execution/test_stop.py does the same
single-node).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from tests.cluster.conftest import ray_temp
from tests.helpers import ROOT, serving, written_rows
from tests.providers.conftest import OUTCOMES, http_sweep, outcomes, write

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _run(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """``trialgrid run ARGS`` in its own session: (exit status, stderr); its session is killed whatever happens."""
    proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=timeout)
        return proc.returncode, stderr
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


def _alive_in_session(sid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-a", "-s", str(sid)], capture_output=True, text=True).stdout
    return [line for line in found.splitlines() if line.strip()]


@contextmanager
def _throttled_ray_run(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                       name: str) -> Iterator[tuple[Any, subprocess.Popen[str], Path, Path, dict[str, str]]]:
    """A ``--ray local --workers 2`` driver in its own session against serve at 120 rpm, once answers flow:
    (server, driver, sweep, out, env). Its session is killed on exit, whatever happened."""
    with serving(rpm=120, rpm_mode="bucket") as server, ray_temp(tmp_path_factory, name) as temp:
        data = http_sweep(server.base_url, "openai", runs=1, concurrency=32)
        data["engine"] = {"concurrency": 32, "flush_seconds": 0.05}
        sweep, out = write(tmp_path, data), tmp_path / "out"
        env = dict(os.environ, RAY_TMPDIR=str(temp))
        proc = subprocess.Popen([sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--out", str(out), "-q",
                                 "--ray", "local", "--workers", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 150  # Ray's start on a loaded machine, then a few paced answers
            while time.monotonic() < deadline and proc.poll() is None \
                    and server.stats()["by_status"].get("200", 0) < 8:
                time.sleep(0.2)
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            yield server, proc, sweep, out, env
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for pipe in (proc.stdout, proc.stderr):  # closed here, not by the garbage collector
                if pipe and not pipe.closed:
                    pipe.close()


def test_sigterm_to_a_ray_driver_exits_143_leaves_no_process_and_the_rerun_is_whole(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    with _throttled_ray_run(tmp_path, tmp_path_factory, "rs") as (server, proc, sweep, out, env):
        proc.send_signal(signal.SIGTERM)
        returned = proc.wait(timeout=60)
        stderr = proc.stderr.read() if proc.stderr else ""
        assert returned == 143, stderr[-2000:]
        assert "SIGTERM received" not in stderr and "Traceback" not in stderr, stderr[-2000:]
        time.sleep(10)
        assert _alive_in_session(proc.pid) == []
        if list((out / "trials").glob("*.arrow")):  # a chunk may not have come back before the stop
            rows = written_rows(out)
            assert rows.filter(pl.col("error_kind") == "internal").height == 0
            assert rows.height < 117

        # the incident is over (the account's limit was raised): the rerun, through Ray again, finishes the output
        server.call(lambda state: setattr(state.options, "rpm", None))
        returned, stderr = _run([str(sweep), "--out", str(out), "-q", "--ray", "local", "--workers", "2"], env,
                                timeout=300)
        assert returned == 0, stderr[-2000:]
        df = runner.load(out).collect()
        assert df.height == df["trial_id"].n_unique() == 117  # every trial exactly once
        reference = tmp_path / "reference"
        runner.run(load_sweep(sweep), reference, quiet=True)
    expected = outcomes(runner.load(reference).collect())
    assert outcomes(df).equals(expected), [c for c in OUTCOMES if not outcomes(df)[c].equals(expected[c])]


def test_kill_9_to_a_ray_driver_leaves_no_process_of_its_private_ray(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A driver killed with SIGKILL runs no code of its own; Ray's parent checks left its dashboard and
    runtime-env agents alive 20 s later. The reaper (cluster.reaper) ends them."""
    with _throttled_ray_run(tmp_path, tmp_path_factory, "rk") as (_, proc, _, _, _):
        assert len(_alive_in_session(proc.pid)) > 3  # Ray's node processes, started by the driver
        proc.kill()
        proc.wait()
        time.sleep(10)
        assert _alive_in_session(proc.pid) == []

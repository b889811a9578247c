"""Every trial exactly once, or a clear reason why not — with real processes, sockets and files.

Retrying error rows in place, exit codes that tell the truth, one writer per output,
SIGTERM stopping like Ctrl-C, damaged and foreign parts, a damaged response cache, a
full disk and an unreachable Ray address: each ends in a repair or one line on
stderr, never a traceback and never a wrong count.

A real ``trialgrid`` process is started where the process is the point (a signal, a kill, two
writers at once, a full disk); the rest drive the same CLI in-process (``invoke``), which checks the
same exit codes and lines without paying an interpreter start each time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import TrialgridWarning, UserError
from runner.execution.grid import grid_of
from runner.output.lock import LOCK_FILE, lock_output
from runner.sim.serve import ServeOptions, ServerThread
from tests.conftest import on_ci
from tests.helpers import ROOT, error_line, invoke, quickstart_dict, quickstart_sweep, trialgrid
from tests.providers.conftest import CELL, OUTCOMES, http_sweep, outcomes, write


def sim_sweep(tmp_path: Path, runs: int = 2, name: str = "sweep.yaml", **engine: Any) -> Path:
    return quickstart_sweep(tmp_path, runs=runs, name=name, **({"engine": engine} if engine else {}))


def check_exactly_once(out: Path, sweep: Path) -> pl.DataFrame:
    """``runner.load`` has one row per trial of the grid, no more, no less."""
    df = runner.load(out).collect()
    grid = {s.trial_id for s in grid_of(load_sweep(sweep))}
    assert df["trial_id"].n_unique() == df.height == len(grid)
    assert set(df["trial_id"]) == grid
    return df


def reference(tmp_path: Path, sweep: Path) -> pl.DataFrame:
    runner.run(load_sweep(sweep), tmp_path / "reference", quiet=True)
    return outcomes(runner.load(tmp_path / "reference").collect())


# -- 3 and 4: --retry-errors, exit codes


@pytest.mark.slow
def test_error_rows_exit_3_then_retry_errors_after_recovery_exits_0(tmp_path: Path) -> None:
    faulty = ServerThread(ServeOptions(host="127.0.0.1", port=0, faults={"500": 0.4}, fault_seed=3)).start()
    port = faulty.port
    data = http_sweep(faulty.base_url, "openai", runs=2, retry={"max_attempts": 1}, concurrency=8)
    sweep = write(tmp_path, data)
    out = tmp_path / "out"
    try:
        first = trialgrid("run", str(sweep), "--out", str(out), "--no-report")
    finally:
        faulty.stop()
    assert first.returncode == 3, first.stderr
    assert "Traceback" not in first.stderr
    assert "ended as error rows: transient" in first.stderr
    assert f"--out {out} --retry-errors" in first.stderr  # the exact command to run next
    errors_before = runner.load(out).filter(pl.col("status") == "error").collect().height
    assert errors_before > 0

    healthy = ServerThread(ServeOptions(host="127.0.0.1", port=port)).start()  # recovered, same address
    try:
        second = trialgrid("run", str(sweep), "--out", str(out), "--no-report", "--retry-errors")
    finally:
        healthy.stop()
    assert second.returncode == 0, second.stderr
    assert f"retrying error rows of kind rate_limited, transient, timeout: {errors_before:,} transient" in second.stderr
    df = check_exactly_once(out, sweep)
    assert (df["status"] == "ok").all()
    joined = outcomes(df).join(reference(tmp_path, sim_sweep(tmp_path, runs=2, name="sim.yaml")), on=CELL,
                               suffix="_sim")
    assert joined.height == df.height
    for column in OUTCOMES:
        if column not in CELL:
            assert joined[column].equals(joined[f"{column}_sim"], check_names=False), column
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sessions"][-1]["retry_errors"] == ["rate_limited", "transient", "timeout"]
    assert manifest["sessions"][-1]["trials_run"] == errors_before
    assert manifest["counts"] == {"ok": df.height}
    # every reader sees the newest row: the report, diff and rescore count each trial once
    per_rate = runner.load_summary(out).conditions.group_by("rate").agg(pl.col("trials").sum())
    assert set(per_rate["trials"]) == {df.height}
    rescored = trialgrid("rescore", str(out), "--out", str(tmp_path / "rescored"), "--sweep", str(sweep))
    assert rescored.returncode == 0 and f"rescored {df.height:,} rows" in rescored.stderr, rescored.stderr
    assert trialgrid("diff", str(out), str(tmp_path / "rescored")).returncode == 0


def test_max_error_rate_tolerates_and_a_dead_model_gets_its_first_error(tmp_path: Path) -> None:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0)).start()
    try:
        data = http_sweep(server.url + "/wrong", "openai", runs=1, retry={"max_attempts": 1})
        sweep = write(tmp_path, data)
        done = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "--no-report")
        assert done.exit_code == 3, done.stderr
        assert "all 39 trials failed fatally; first error: HTTP 404" in done.stderr
        assert "base_url's path is wrong" in done.stderr
        assert "Traceback" not in done.stderr
        again = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "--no-report", "--max-error-rate", "1")
        assert again.exit_code == 0, again.stderr
        assert "within --max-error-rate 1" in again.stderr
    finally:
        server.stop()


def test_a_model_whose_server_is_not_running_gets_a_hint_not_only_a_retry_command(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port that nothing listens on once this socket is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = http_sweep(f"http://127.0.0.1:{port}/v1", "openai", runs=1,
                      retry={"max_attempts": 2, "backoff_base_s": 0.01, "backoff_max_s": 0.02})
    # --no-preflight: the server is gone during the run (the preflight says so before it: tests/providers)
    done = invoke("run", str(write(tmp_path, data)), "--out", str(tmp_path / "out"), "--no-report", "--no-preflight")
    assert done.exit_code == 3, done.stderr
    assert "all 39 trials ended as transient errors; first error: connection failed" in done.stderr
    assert "nothing answered at the model's base_url" in done.stderr
    assert "--retry-errors" in done.stderr and "Traceback" not in done.stderr


def test_anthropic_base_url_works_with_or_without_v1(tmp_path: Path) -> None:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0)).start()
    try:
        for i, base in enumerate((server.url, server.url + "/v1")):  # the SDK's way, and trialgrid's
            sweep = write(tmp_path, http_sweep(base, "anthropic", runs=1), f"s{i}.yaml")
            result = runner.run(load_sweep(sweep), tmp_path / f"out{i}", quiet=True)
            assert result.counts == {"ok": 117}
    finally:
        server.stop()


def test_unknown_retry_kind_is_one_line(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path)
    done = invoke("run", str(sweep), "--out", str(tmp_path / "out"), "--retry-errors=flaky")
    assert done.exit_code == 2
    assert "'flaky' is not an error kind" in error_line(done.stderr)


# -- 5: one writer per output


def test_the_lock_refuses_a_second_writer_and_frees_on_release(tmp_path: Path) -> None:
    held = lock_output(tmp_path / "out")
    with pytest.raises(UserError, match="is being written by trialgrid run"):
        lock_output(tmp_path / "out")
    held.release()
    lock_output(tmp_path / "out").release()


def test_a_holder_that_has_not_yet_described_itself_is_named_once_it_has(tmp_path: Path) -> None:
    """The race a second `trialgrid run` met on CI: the lock taken, the holder's line not yet written."""
    import fcntl
    import threading

    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, and the file still empty
        threading.Timer(0.1, os.pwrite, (fd, b"trialgrid run (pid 1 on host, since then)\n", 0)).start()
        with pytest.raises(UserError, match=r"is being written by trialgrid run \(pid 1 on host"):
            lock_output(out)
    finally:
        os.close(fd)


def test_wait_takes_the_lock_once_the_holder_lets_go(tmp_path: Path) -> None:
    import threading

    out = tmp_path / "out"
    held = lock_output(out)
    released = threading.Event()

    def let_go() -> None:
        held.release()
        released.set()

    threading.Timer(0.3, let_go).start()
    waited = lock_output(out, wait=True, what="rescore", poll_s=0.05, timeout_s=30)
    try:
        assert released.is_set() and not held.held  # it waited for the holder, it did not take the lock beside it
        assert waited.held and f"trialgrid rescore (pid {os.getpid()} " in (out / LOCK_FILE).read_text()
        with pytest.raises(UserError, match=r"is being written by trialgrid rescore"):
            lock_output(out)  # and what it took is the lock: a third writer is refused
    finally:
        waited.release()
    lock_output(out).release()


@pytest.mark.slow
def test_two_runs_on_one_output_write_every_trial_exactly_once(tmp_path: Path) -> None:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0, latency_ms=20)).start()
    try:
        sweep = write(tmp_path, http_sweep(server.base_url, "openai", runs=4, concurrency=8))
        out = tmp_path / "out"
        cmd = [sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--out", str(out), "--quiet"]
        procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        results = [(p.wait(timeout=180), p.stderr.read() if p.stderr else "") for p in procs]
        for code, stderr in results:
            assert "Traceback" not in stderr, stderr
            assert code in (0, 2), stderr
            if code == 2:
                assert "is being written by trialgrid run" in stderr and stderr.count("error:") == 1
        check_exactly_once(out, sweep)
        # with --wait the later one waits, then finds nothing left to run
        waited = trialgrid("run", str(sweep), "--out", str(out), "--quiet", "--wait")
        assert waited.returncode == 0, waited.stderr
        check_exactly_once(out, sweep)
    finally:
        server.stop()


def test_rescore_holds_the_lock_of_its_destination(tmp_path: Path) -> None:
    from runner.execution.rescore import rescore

    sweep = sim_sweep(tmp_path, runs=1)
    runner.run(load_sweep(sweep), tmp_path / "out", quiet=True)
    with lock_output(tmp_path / "dest"), pytest.raises(UserError, match="is being written by"):
        rescore(tmp_path / "out", tmp_path / "dest", sweep)
    assert rescore(tmp_path / "out", tmp_path / "dest", sweep).rows == 117


# -- 6: SIGTERM stops like SIGINT, sessions are accurate


@pytest.mark.slow
def test_sigterm_flushes_finalizes_and_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0, latency_ms=40)).start()
    try:
        data = http_sweep(server.base_url, "openai", runs=6, concurrency=4)
        data["engine"] = {"batch_rows": 16, "flush_seconds": 0.05, "concurrency": 4}
        sweep = write(tmp_path, data)
        out = tmp_path / "out"
        cmd = [sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--out", str(out), "--quiet"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            streams = list((out / "trials").glob("*.arrows")) if (out / "trials").is_dir() else []
            if streams and streams[0].stat().st_size > 4096:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        stderr = proc.stderr.read() if proc.stderr else ""
        assert code == 143, stderr
        assert "Traceback" not in stderr and "terminated (SIGTERM)" in stderr
        assert not list((out / "trials").glob("*.arrows"))  # finalized, not left as a stream
        manifest = json.loads((out / "manifest.json").read_text())
        session = manifest["sessions"][-1]
        assert session["status"] == "interrupted" and session["finished_at"]
        written = runner.load(out).collect().height
        assert 0 < written < 702 and session["trials_run"] == written
        # the stop says how many were kept
        assert f"{written:,} trials run in this session are saved, {written:,} of 702 in {out}" in stderr

        resumed = trialgrid("run", str(sweep), "--out", str(out), "--quiet")
        assert resumed.returncode == 0, resumed.stderr
        df = check_exactly_once(out, sweep)
    finally:
        server.stop()
    expected = reference(tmp_path, sim_sweep(tmp_path, runs=6, name="sim.yaml"))
    joined = outcomes(df).join(expected, on=CELL, suffix="_sim")
    assert joined.height == df.height == 702
    for column in OUTCOMES:
        if column not in CELL:
            assert joined[column].equals(joined[f"{column}_sim"], check_names=False), column


@pytest.mark.slow
def test_a_kill_9_resends_no_answered_trial(tmp_path: Path) -> None:
    """Answers in the batch not yet written survive a kill -9 in the journal and are replayed.

    The server's request count is the proof: after the resume it has answered each of the 702 trials once, plus
    at most the requests in flight at the kill (concurrency 8), whose answers never reached the run. The flush is
    the default (2 s or 4,096 rows), so without the journal every answer of the last 2 s was sent twice.
    """
    server = ServerThread(ServeOptions(host="127.0.0.1", port=0, latency_ms=5)).start()
    try:
        assert server.state is not None
        stats = server.state.stats
        data = http_sweep(server.base_url, "openai", runs=6)
        data["engine"] = {"concurrency": 8}
        sweep = write(tmp_path, data)
        out = tmp_path / "out"
        cmd = [sys.executable, "-m", "runner.cli.app", "run", str(sweep), "--out", str(out), "--quiet", "--no-report"]
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and stats.requests < 250:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.kill()  # SIGKILL: nothing of the run's own gets to run
        proc.wait(timeout=30)
        if proc.stderr:  # closed here, not by the garbage collector (a ResourceWarning in whichever test runs then)
            proc.stderr.close()
        assert list((out / "trials").glob("journal-*.jsonl")), "the kill left no journal"
        resumed = trialgrid("run", str(sweep), "--out", str(out), "--no-report")
        assert resumed.returncode == 0, resumed.stderr
        assert "replayed" in resumed.stderr and "answered trials" in resumed.stderr, resumed.stderr
        df = check_exactly_once(out, sweep)
        time.sleep(0.2)  # the killed run's last requests end on the server
        resent = stats.requests - df.height
    finally:
        server.stop()
    assert 0 <= resent <= 8, f"{resent} trials were sent twice"
    assert not list((out / "trials").glob("journal-*.jsonl"))
    expected = reference(tmp_path, sim_sweep(tmp_path, runs=6, name="sim.yaml"))
    joined = outcomes(df).join(expected, on=CELL, suffix="_sim")
    assert joined.height == df.height == 702
    for column in OUTCOMES:
        if column not in CELL:
            assert joined[column].equals(joined[f"{column}_sim"], check_names=False), column


def test_a_session_a_kill_left_running_is_marked_crashed(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=1)
    out = tmp_path / "out"
    runner.run(load_sweep(sweep), out, quiet=True)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["sessions"][-1]["status"] = "running"  # what SIGKILL leaves
    (out / "manifest.json").write_text(json.dumps(manifest))
    runner.run(load_sweep(sweep), out, quiet=True)
    sessions = json.loads((out / "manifest.json").read_text())["sessions"]
    assert [s["status"] for s in sessions] == ["crashed", "complete"]
    assert sessions[0]["trials_run"] == 117 and sessions[1]["trials_run"] == 0


# -- 7: damaged and foreign parts


def test_a_torn_finished_part_is_refused_by_report_and_repaired_by_resume(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=4, batch_rows=50)
    out = tmp_path / "out"
    runner.run(load_sweep(sweep), out, quiet=True)
    [part] = list((out / "trials").glob("*.arrow"))
    part.write_bytes(part.read_bytes()[:-5])

    report = invoke("report", str(out))
    assert report.exit_code == 2
    assert "damaged trial part" in error_line(report.stderr) and part.name in report.stderr
    with pytest.raises(UserError, match="damaged trial part"):
        runner.load(out)

    resumed = invoke("run", str(sweep), "--out", str(out), "--quiet")
    assert resumed.exit_code == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr and f"damaged part {part.name}" in resumed.stderr
    assert (out / "trials" / "damaged" / part.name).exists()
    check_exactly_once(out, sweep)


def test_a_foreign_part_is_refused_by_report_and_set_aside_by_resume(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=2)
    other = quickstart_dict()
    other["seed"] = 999
    other["probes"][0]["runs"] = 1  # another sweep's part is foreign whatever its size (it was 20 runs: 2,340 rows)
    other_sweep = write(tmp_path, other, "other.yaml")
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    runner.run(load_sweep(sweep), out, quiet=True)
    runner.run(load_sweep(other_sweep), elsewhere, quiet=True)
    [foreign] = list((elsewhere / "trials").glob("*.arrow"))
    shutil.copy(foreign, out / "trials" / "part-copied-00000.arrow")

    report = invoke("report", str(out))
    assert report.exit_code == 2 and "foreign trial part" in error_line(report.stderr)

    resumed = invoke("run", str(sweep), "--out", str(out), "--no-report")
    assert resumed.exit_code == 0, resumed.stderr
    assert "moved part-copied-00000.arrow to trials/foreign/" in resumed.stderr
    assert "234 of 234 trials already written" in resumed.stderr
    check_exactly_once(out, sweep)
    assert invoke("report", str(out)).exit_code == 0


# -- 8: response cache damage


def test_a_replaced_cache_table_is_set_aside_and_never_becomes_error_rows(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=1)
    cache = tmp_path / "cache"
    first = invoke("run", str(sweep), "--out", str(tmp_path / "a"), "--cache", str(cache), "--quiet")
    assert first.exit_code == 0, first.stderr
    with sqlite3.connect(cache / "responses.sqlite") as db:
        db.execute("DROP TABLE responses")
        db.execute("CREATE TABLE responses (k TEXT, v TEXT)")
    second = invoke("run", str(sweep), "--out", str(tmp_path / "b"), "--cache", str(cache), "--no-report")
    assert second.exit_code == 0, second.stderr
    assert "the response cache" in second.stderr and "has another shape" in second.stderr
    df = check_exactly_once(tmp_path / "b", sweep)
    assert (df["status"] == "ok").all()
    assert list(cache.glob("damaged/responses.sqlite.damaged-*"))  # set aside inside the cache's own folder


def test_a_malformed_cached_value_is_a_miss(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=1)
    cache = tmp_path / "cache"
    runner.run(load_sweep(sweep), tmp_path / "a", quiet=True, cache=cache)
    with sqlite3.connect(cache / "responses.sqlite") as db:
        db.execute("UPDATE responses SET value = X'7b2274657874223a317d'")  # {"text":1}
    with pytest.warns(TrialgridWarning, match="failed to read an answer"):
        result = runner.run(load_sweep(sweep), tmp_path / "b", quiet=True, cache=cache)
    assert result.counts == {"ok": 117}


def test_a_cache_file_that_is_not_a_database_is_rebuilt(tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=1)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "responses.sqlite").write_bytes(os.urandom(8192))  # corrupt pages from the first byte
    with pytest.warns(TrialgridWarning, match="is damaged.*started an empty cache"):
        result = runner.run(load_sweep(sweep), tmp_path / "out", quiet=True, cache=cache)
    assert result.counts == {"ok": 117}
    again = runner.run(load_sweep(sweep), tmp_path / "again", quiet=True, cache=cache)
    assert again.counts == {"ok": 117}  # the rebuilt cache works


# -- 9: disk full


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        if on_ci():
            pytest.fail(f"cannot mount a tmpfs on CI: {done.stderr!r}")
        pytest.skip("mounting a 5 MB tmpfs needs root (mount -t tmpfs)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_resume_recovers_once_space_is_freed(tiny_disk: Path, tmp_path: Path) -> None:
    sweep = sim_sweep(tmp_path, runs=4, batch_rows=20, flush_seconds=0.01)
    out = tiny_disk / "out"
    filler = tiny_disk / "filler"
    free = shutil.disk_usage(tiny_disk).free
    with filler.open("wb") as fh:  # leave ~24 KB: the manifest fits, the trials do not
        fh.write(b"\0" * (free - 24 * 1024))
    full = trialgrid("run", str(sweep), "--out", str(out), "--quiet")
    assert full.returncode == 2, full.stderr
    line = error_line(full.stderr)
    assert "no space left on the device" in line and str(out) in line and "MiB" in line
    assert not list(out.glob("*.tmp"))
    filler.unlink()
    resumed = trialgrid("run", str(sweep), "--out", str(out), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    check_exactly_once(out, sweep)
    assert not list((out / "trials").glob("*.arrows"))


# -- 10: an unreachable Ray address


@pytest.mark.slow
def test_an_unreachable_ray_address_fails_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sweep = sim_sweep(tmp_path, runs=1)
    out = tmp_path / "out"
    done = trialgrid("run", str(sweep), "--out", str(out), "--ray", f"127.0.0.1:{port}", timeout=60)
    assert done.returncode == 2
    assert f"cannot reach Ray at 127.0.0.1:{port}" in error_line(done.stderr)
    assert not (out / "manifest.json").exists()

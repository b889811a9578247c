"""A budget and the response cache across Ray workers (one-node Ray: a second node adds nothing here).

The budget: one spend meter actor, every worker's finished trials feed it; the run
stops within one engine window of the budget, resumes when the budget is raised, and
ends with the trial set and spend of the single-node run given the same budget steps.
The cache: one actor owns the SQLite file; a cached rerun through Ray sends nothing,
with the same keys as single-node (a single-node rerun on a Ray-filled cache sends
nothing either), and a worker killed mid-run loses only the answers it had in flight.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import runner
from cluster.records import ray_record
from runner.config.sweep import load_sweep
from runner.core.manifest import read_manifest
from runner.execution.grid import grid_of
from runner.providers.cache import ResponseCache
from runner.sim.serve import ServeOptions
from runner.sim.serve.thread import ServerThread
from tests.cluster.conftest import http_sweep, kill_a_worker_after
from tests.cluster.test_ray_run import OUTCOMES
from tests.conftest import quickstart_dict
from tests.helpers import write_yaml
from tests.helpers.messages import heard

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("ray_local")]

PRICES = {"sim-careful": {"input": 1.0, "output": 5.0}, "sim-typical": {"input": 3.0, "output": 15.0},
          "sim-reckless": {"input": 10.0, "output": 30.0}}
CONCURRENCY = 16


def _budget_sweep(tmp_path: Path, usd: float, name: str) -> Path:
    data = quickstart_dict()
    data["probes"][0]["runs"] = 8  # 936 trials, $3.14 in all
    data["prices"] = PRICES
    data["budget"] = {"usd": usd}
    data["engine"] = {"concurrency": CONCURRENCY}
    return write_yaml(tmp_path / name, data)


def _trials(out: Path) -> pl.DataFrame:
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()


def _costs(frame: pl.DataFrame) -> list[float]:
    return [(r["input_tokens"] * PRICES[r["model"]]["input"] + r["output_tokens"] * PRICES[r["model"]]["output"]) / 1e6
            for r in frame.select("model", "input_tokens", "output_tokens").iter_rows(named=True)]


def test_budget_stops_within_one_window_resumes_and_ends_like_single_node(tmp_path: Path) -> None:
    steps = [1.0, 1.0, 2.0, 1000.0]
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"
    ray_results, ray_spent = [], []
    for i, usd in enumerate(steps):
        ray_results.append(runner.run(load_sweep(_budget_sweep(tmp_path, usd, f"r{i}.yaml")), ray_out, mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 64}))
        ray_spent.append(sum(_costs(_trials(ray_out))))
    for i, usd in enumerate(steps):
        runner.run(load_sweep(_budget_sweep(tmp_path, usd, f"l{i}.yaml")), local_out, quiet=True)
    ray_df, local_df = _trials(ray_out), _trials(local_out)
    max_trial = max(_costs(local_df))
    first = ray_results[0]
    assert first.status == "stopped_budget" and first.stopped and "budget of $1.00 reached" in first.stopped
    # each stop reached its budget and overshot by at most one engine window of trials (the meter
    # knows every trial of the run but at most engine.concurrency ones: see cluster.spend)
    for usd, result, spent in zip(steps[:3], ray_results[:3], ray_spent[:3], strict=True):
        assert result.status == "stopped_budget", (usd, result)
        assert usd <= spent <= usd + CONCURRENCY * max_trial, (usd, spent, max_trial)
    assert ray_results[1].stats.done == 0  # the same budget again: nothing more
    assert ray_results[2].stats.done > 0  # raised: it went on
    last = ray_results[-1]
    assert last.status == "complete" and last.stopped is None
    # the end of the same budget steps equals single-node's: every trial once, the same spend
    assert ray_df.height == local_df.height == last.total == ray_df["trial_id"].n_unique()
    assert set(ray_df["trial_id"]) == set(local_df["trial_id"])
    assert ray_spent[-1] == pytest.approx(sum(_costs(local_df)), rel=1e-9)
    manifest = read_manifest(ray_out)
    assert manifest is not None
    assert [s.status for s in manifest.sessions] == ["stopped_budget"] * 3 + ["complete"]
    record = ray_record(manifest.sessions[0])
    watch = record.watch if record is not None else None  # the spend meter's final word, as the driver showed it
    assert watch is not None and watch.budget == "$1.00"
    assert watch.spent_usd == pytest.approx(ray_spent[0], rel=1e-9)


def test_cached_rerun_through_ray_sends_nothing_and_shares_keys_with_single_node(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with ServerThread(ServeOptions(port=0, latency_ms=2.0)) as server:
        loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=2, concurrency=16)))
        total = len(grid_of(loaded))
        first = runner.run(loaded, tmp_path / "a", mode="ray", workers=2, quiet=True, cache=cache, backend_options={"chunk_size": 32})
        sent = server.stats()["requests"]
        again = runner.run(loaded, tmp_path / "b", mode="ray", workers=2, quiet=True, cache=cache, backend_options={"chunk_size": 32})
        after_ray = server.stats()["requests"]
        runner.run(loaded, tmp_path / "c", quiet=True, cache=cache)  # single-node on the Ray-filled cache
        after_local = server.stats()["requests"]
    assert first.status == again.status == "complete"
    assert sent == total and after_ray == sent and after_local == sent  # the reruns sent 0 requests
    a, b, c = (_trials(tmp_path / x).sort("trial_id").select(OUTCOMES) for x in ("a", "b", "c"))
    assert a.equals(b) and a.equals(c)
    assert (_trials(tmp_path / "b")["cache_hits"] > 0).all()
    manifest = read_manifest(tmp_path / "b")
    assert manifest is not None and manifest.sessions[-1].cache is not None
    assert manifest.sessions[-1].cache.hits == total and manifest.sessions[-1].cache.misses == 0
    assert manifest.cache_hits == total
    stored = ResponseCache(cache)
    try:
        assert len(stored) == total
    finally:
        stored.close()


def test_killed_worker_loses_no_stored_answer_but_those_in_flight(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with ServerThread(ServeOptions(port=0, latency_ms=25.0)) as server:
        loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=6, concurrency=12)))
        total = len(grid_of(loaded))
        killed: list[int] = []

        killer = kill_a_worker_after(server, 150, killed)
        with heard() as said:
            result = runner.run(loaded, tmp_path / "out", mode="ray", workers=2, quiet=True, cache=cache, backend_options={"chunk_size": 40})
        killer.join(5)
        sent = server.stats()["requests"]
        assert killed and any(" lost (" in line for line in said), said
        rerun = runner.run(loaded, tmp_path / "again", mode="ray", workers=2, quiet=True, cache=cache, backend_options={"chunk_size": 40})
        after = server.stats()["requests"]
    assert result.status == rerun.status == "complete"
    stored = ResponseCache(cache)
    try:
        kept = len(stored)
    finally:
        stored.close()
    assert kept == total  # every trial's answer is stored once the run is complete
    # requests answered but not stored (so asked again by the re-queued chunk): at most the killed
    # worker's requests in flight — its share of engine.concurrency (6 of 12)
    assert sent - total <= 6
    assert after == sent  # and the rerun sends nothing
    manifest = read_manifest(tmp_path / "out")
    record = ray_record(manifest.sessions[-1]) if manifest is not None else None
    assert record is not None and record.watch is not None
    watch = record.watch
    assert watch.workers_lost == 1 and watch.requeued_chunks >= 1 and watch.done == total


def test_the_driver_logs_what_each_worker_does(tmp_path: Path) -> None:
    with ServerThread(ServeOptions(port=0, latency_ms=20.0)) as server:
        loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", http_sweep(
            server.base_url, runs=4, concurrency=16, models=("careful",), limits={"max_concurrent": 4})))
        with heard() as said:
            result = runner.run(loaded, tmp_path / "out", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 16, "watch_interval_s": 0.2})
    assert result.status == "complete"
    lines = [line for line in said if "trials/s; workers w0:" in line]
    assert len(lines) >= 2, said  # as it goes, and once at the end
    assert any(" 0 in flight" not in line for line in lines[:-1]), lines  # requests were out while it ran
    manifest = read_manifest(tmp_path / "out")
    record = ray_record(manifest.sessions[-1]) if manifest is not None else None
    assert record is not None and record.watch is not None
    watch = record.watch
    assert watch.done == watch.total == len(grid_of(loaded))
    # 16 trials in flight, 4 sends at a time on the shared key: sends waited, and were counted
    assert sum(w.limiter_waits for w in watch.workers) > 0
    assert watch.spent_usd is None and watch.cache_hits is None  # no budget, no cache: not shown

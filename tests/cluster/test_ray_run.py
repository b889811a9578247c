"""Ray mode on a private one-node Ray: same outcomes as single-node, worker loss, shared limits and remedies."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import runner
from cluster.records import ray_record
from runner.config.sweep import load_sweep
from runner.core.manifest import read_manifest
from runner.execution.grid import grid_of
from runner.output import Output
from runner.sim.serve import ServeOptions, parse_rule
from runner.sim.serve.thread import ServerThread
from tests.cluster.conftest import http_sweep, kill_a_worker_after
from tests.helpers import write_yaml
from tests.helpers.messages import heard

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("ray_local")]

OUTCOMES = ["trial_id", "model", "case_id", "condition", "run", "seed", "status", "error_kind", "decoy_called",
            "expected_called", "asked", "tools_called", "catalogue_order", "tool_calls", "response_text"]


def _trials(out: Path) -> pl.DataFrame:
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()


def _outcomes(out: Path) -> pl.DataFrame:
    return _trials(out).sort("trial_id").select(OUTCOMES)


def test_ray_output_equals_single_node_and_resumes_either_way(write_sweep, tmp_path: Path) -> None:
    loaded = load_sweep(write_sweep(runs=4))
    with heard() as said:
        result = runner.run(loaded, tmp_path / "ray", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 50})
    runner.run(loaded, tmp_path / "local", quiet=True)
    ray_df = _trials(tmp_path / "ray")
    assert ray_df.height == len(grid_of(loaded)) == ray_df["trial_id"].n_unique()
    assert _outcomes(tmp_path / "ray").equals(_outcomes(tmp_path / "local"))
    assert result.status == "complete" and result.counts == {"ok": ray_df.height}
    assert any("2 workers" in line for line in said)
    # the same directory format: a single-node rerun finds nothing left to do, and vice versa
    again = runner.run(loaded, tmp_path / "ray", quiet=True)
    assert again.skipped == ray_df.height and again.stats.done == 0
    manifest = read_manifest(tmp_path / "ray")
    record = ray_record(manifest.sessions[0]) if manifest is not None else None
    assert record is not None and record.address == "auto"
    assert all(p.name.startswith("part-ray-") for p in (tmp_path / "ray" / "trials").glob("*.arrow"))


def test_killed_worker_has_its_chunks_requeued_and_every_trial_once(tmp_path: Path) -> None:
    with ServerThread(ServeOptions(port=0, latency_ms=25.0)) as server:
        sweep = write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=6, concurrency=12))
        loaded = load_sweep(sweep)
        killed: list[int] = []

        killer = kill_a_worker_after(server, 150, killed)
        with heard() as said:
            result = runner.run(loaded, tmp_path / "out", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 40})
        killer.join(5)
    df = _trials(tmp_path / "out")
    assert killed, "no worker process found to kill"
    assert any("lost" in line for line in said), said
    assert result.status == "complete"
    assert df.height == len(grid_of(loaded)) == df["trial_id"].n_unique()
    assert set(df["trial_id"]) == {s.trial_id for s in grid_of(loaded)}


def _max_in_window(times: np.ndarray, window: float) -> int:
    times = np.sort(times)
    ends = np.searchsorted(times, times + window, side="left")  # requests in [t, t + window)
    return int((ends - np.arange(len(times))).max()) if len(times) else 0


def test_rpm_shared_by_four_workers_holds_in_every_window(tmp_path: Path) -> None:
    window, rpm = 2.0, 80  # "rpm" per a 2 s window here, so the test takes seconds, not minutes
    with ServerThread(ServeOptions(port=0, latency_ms=5.0)) as server:
        sweep = write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=3, concurrency=64,
                                                               models=("careful",), limits={"rpm": rpm}))
        loaded = load_sweep(sweep)
        started = time.monotonic()
        result = runner.run(loaded, tmp_path / "out", mode="ray", workers=4, quiet=True, backend_options={"chunk_size": 16, "limiter_window_s": window})
        elapsed = time.monotonic() - started
        log = server.stats(with_log=True)["log"]
    times = np.array(log["t"])
    assert result.counts == {"ok": len(grid_of(loaded))} and len(times) == len(grid_of(loaded))
    assert _max_in_window(times, window) <= rpm
    # sustained: the limiter's margin costs (window + margin) / window; it must not starve the run. 0.6: four Ray
    # workers on 2 cores beside the suite's other xdist worker measured 0.695 once (0.7 was the bound); a starved
    # run is far below (one window's worth of requests per two windows is 0.5)
    span = times.max() - times.min()
    assert len(times) / span >= 0.6 * rpm / window, (len(times), span, elapsed)


def test_remedy_learned_once_is_shared_by_workers(tmp_path: Path) -> None:
    rule = parse_rule("drop:temperature")
    with ServerThread(ServeOptions(port=0, latency_ms=10.0, rules=[rule])) as server:
        sweep = write_yaml(tmp_path / "sweep.yaml", http_sweep(server.base_url, runs=2, concurrency=32,
                                                               params={"temperature": 0.3}))
        loaded = load_sweep(sweep)
        with heard(notes=True) as notes:
            result = runner.run(loaded, tmp_path / "out", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 32})
        stats = server.stats()
    assert result.counts == {"ok": len(grid_of(loaded))}
    rejected = [n for models in stats["rejections"].values() for params in models.values() for n in params.values()]
    assert rejected and max(rejected) <= 2  # at most one per (model, parameter) per worker, 2 workers
    manifest = read_manifest(tmp_path / "out")
    assert manifest is not None
    learned = {(r.model_id, r.param) for r in manifest.remedies}
    assert learned == {(m, "temperature") for m in ("careful", "typical", "reckless")}
    assert len(manifest.remedies) == 3 and len(notes) == 3  # announced once each, not once per worker
    assert _trials(tmp_path / "out")["remedies"].drop_nulls().len() > 0


def test_retry_errors_through_ray_repairs_error_rows_as_single_node_does(tmp_path: Path) -> None:
    """``--retry-errors --ray``: error rows re-run into the same output, the newest row wins."""
    faulty = ServerThread(ServeOptions(host="127.0.0.1", port=0, faults={"500": 0.4}, fault_seed=3)).start()
    port = faulty.port
    data = http_sweep(faulty.base_url, runs=2, concurrency=8)
    for model in data["models"]:
        model["retry"] = {"max_attempts": 1}
    loaded = load_sweep(write_yaml(tmp_path / "sweep.yaml", data))
    out = tmp_path / "out"
    try:
        first = runner.run(loaded, out, mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 20})
    finally:
        faulty.stop()
    errors = first.counts.get("error", 0)
    assert errors > 0
    healthy = ServerThread(ServeOptions(host="127.0.0.1", port=port)).start()  # recovered, same address
    try:
        second = runner.run(loaded, out, mode="ray", workers=2, quiet=True, retry_errors=("rate_limited", "transient", "timeout"), backend_options={"chunk_size": 20})
    finally:
        healthy.stop()
    assert second.counts == {"ok": len(grid_of(loaded))}
    df = runner.load(out).collect()
    assert df.height == df["trial_id"].n_unique() == len(grid_of(loaded)) and (df["status"] == "ok").all()
    manifest = read_manifest(out)
    assert manifest is not None and manifest.sessions[-1].retry_errors == ["rate_limited", "transient", "timeout"]
    assert manifest.sessions[-1].trials_run == errors


def test_the_oracle_passes_every_case_on_ray_workers_too(tmp_path: Path) -> None:
    """Each Ray worker builds its own trial runner from the shipped sweep, and learns the oracle's answer
    keys there (runner.execution.run), so a sweep proved passable in one process is passable across processes."""
    from runner.analysis.proof import unpassable_cases
    from runner.config.prove import oracle_sweep
    from tests.helpers.files import bundled_sweep

    proof = oracle_sweep(load_sweep(bundled_sweep(tmp_path, "quickstart.yaml", runs=2)))
    result = runner.run(proof.loaded, tmp_path / "ray", mode="ray", workers=2, quiet=True, backend_options={"chunk_size": 40})
    assert result.status == "complete"
    rows = _trials(tmp_path / "ray")
    assert rows.height == sum(p.n_cells for p in proof.loaded.probes) and (rows["status"] == "ok").all()
    asked, failed = unpassable_cases(Output.open(tmp_path / "ray"),
                                     {p.name: p.kind for p in proof.loaded.probes})
    assert failed == [] and asked == rows.height

"""End to end on one machine: sweep → grid → sim → probe → Arrow, resume, errors as rows."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import runner
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.core.schema import COMMON_FIELDS
from runner.core.types import ChatRequest, ChatResponse
from runner.execution.grid import Grid, grid_of
from runner.providers import PROVIDERS, ErrorKind, ProviderError
from runner.sim import SimProvider
from tests.conftest import ROOT, quickstart_dict
from tests.helpers.rows import write_part

OUTCOMES = ["trial_id", "model", "case_id", "condition", "run", "seed", "status", "decoy_called", "expected_called",
            "asked", "tools_called", "catalogue_order", "tool_calls", "response_text"]


def _trials(out: Path) -> pl.DataFrame:
    return pl.scan_ipc(str(out / "trials" / "*.arrow")).collect()


def test_one_row_per_grid_trial_with_unique_ids(write_sweep, tmp_path: Path) -> None:
    loaded = load_sweep(write_sweep(runs=4))
    result = runner.run(loaded, tmp_path / "out", quiet=True)
    df = _trials(tmp_path / "out")
    grid_ids = {s.trial_id for s in grid_of(loaded)}
    assert df.height == len(grid_of(loaded)) == len(grid_ids) == 3 * 13 * 3 * 4
    assert df["trial_id"].n_unique() == df.height
    assert set(df["trial_id"]) == grid_ids
    assert result.counts == {"ok": df.height}
    assert [f.name for f in COMMON_FIELDS] == df.columns[: len(COMMON_FIELDS)]


def test_same_sweep_twice_gives_identical_outcomes(write_sweep, tmp_path: Path) -> None:
    path = write_sweep(runs=3)
    runner.run(load_sweep(path), tmp_path / "a", quiet=True)
    runner.run(load_sweep(path), tmp_path / "b", quiet=True)
    a = _trials(tmp_path / "a").sort("trial_id").select(OUTCOMES)
    b = _trials(tmp_path / "b").sort("trial_id").select(OUTCOMES)
    assert a.equals(b)


def test_conditions_differ_and_personas_differ(write_sweep, tmp_path: Path) -> None:
    runner.run(load_sweep(write_sweep(runs=10)), tmp_path / "out", quiet=True)
    rates = (_trials(tmp_path / "out").group_by("model", "condition").agg(pl.col("decoy_called").mean())
             .pivot(on="condition", index="model", values="decoy_called"))
    for row in rates.iter_rows(named=True):
        assert row["ungroundable"] > row["groundable_known"], row
    by_model = {r["model"]: r["ungroundable"] for r in rates.iter_rows(named=True)}
    assert by_model["sim-careful"] < by_model["sim-typical"] < by_model["sim-reckless"]


def test_rerun_into_same_output_skips_everything(write_sweep, tmp_path: Path) -> None:
    path = write_sweep(runs=2)
    first = runner.run(load_sweep(path), tmp_path / "out", quiet=True)
    second = runner.run(load_sweep(path), tmp_path / "out", quiet=True)
    assert second.skipped == first.total and second.stats.done == 0
    assert _trials(tmp_path / "out").height == first.total


def test_a_different_sweep_into_the_same_output_is_refused(write_sweep, tmp_path: Path) -> None:
    runner.run(load_sweep(write_sweep(runs=2)), tmp_path / "out", quiet=True)
    other = write_sweep(runs=3, name="other.yaml")
    result = CliRunner().invoke(app, ["run", str(other), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2
    assert "holds a different sweep" in result.output


@pytest.mark.slow
def test_sigkill_then_rerun_completes_without_duplicates(write_sweep, tmp_path: Path) -> None:
    """Kill a real run at a random point; rerunning the same command completes it exactly."""
    data = quickstart_dict()
    data["probes"][0]["runs"] = 250
    data["engine"] = {"batch_rows": 400, "flush_seconds": 0.05}
    path = write_sweep(data)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "runner.cli.app", "run", str(path), "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    trials = out / "trials"
    deadline = time.monotonic() + 60
    # wait until some batches are on disk, then kill at a random moment shortly after
    while time.monotonic() < deadline and not any(p.stat().st_size > 50_000 for p in trials.glob("*.arrows")):
        if proc.poll() is not None:
            pytest.fail(f"run ended before it could be killed: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
        time.sleep(0.01)
    time.sleep(random.Random(7).uniform(0.0, 0.3))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list(trials.glob("*.arrows")), "the kill should leave a stream part to repair"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    resumed = _trials(out)
    loaded = load_sweep(path)
    assert resumed["trial_id"].n_unique() == resumed.height == len(grid_of(loaded))
    runner.run(loaded, tmp_path / "clean", quiet=True)
    clean = _trials(tmp_path / "clean").sort("trial_id").select(OUTCOMES)
    assert resumed.sort("trial_id").select(OUTCOMES).equals(clean)


class _Flaky:
    """A provider whose failures depend on the trial seed: fatal, crash, hang, or answer."""

    name = "flaky"

    def __init__(self) -> None:
        self._sim = SimProvider()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        kind = (request.seed or 0) % 5
        if kind == 0:
            raise ProviderError(ErrorKind.FATAL, "401 invalid credentials")
        if kind == 1:
            raise RuntimeError("decoder exploded")
        if kind == 2:
            await asyncio.sleep(30)
        return self._sim.respond(ChatRequest("typical", request.messages, request.tools, {}, request.seed))

    async def aclose(self) -> None:
        return None


@pytest.mark.internal_rows  # a provider raising a plain exception is the case `internal` exists for
def test_errors_become_rows_never_passes_or_fails(write_sweep, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "flaky", (_Flaky, lambda model: None))
    data = quickstart_dict()
    data["models"] = [{"name": "flaky", "provider": "flaky", "model": "x", "concurrency": 64}]
    data["probes"][0]["runs"] = 2
    data["engine"] = {"timeout_s": 0.2, "concurrency": 64}
    loaded = load_sweep(write_sweep(data))
    runner.run(loaded, tmp_path / "out", quiet=True)
    df = _trials(tmp_path / "out")
    assert df.height == len(grid_of(loaded)) and df["trial_id"].n_unique() == df.height
    kinds = df.with_columns((pl.col("seed") % 5).alias("k"))
    expected = {0: ErrorKind.FATAL.value, 1: ErrorKind.INTERNAL.value, 2: ErrorKind.TIMEOUT.value}
    for k, kind in expected.items():
        sub = kinds.filter(pl.col("k") == k)
        assert sub.height > 0
        assert (sub["status"] == "error").all() and (sub["error_kind"] == kind).all()
        assert sub["decoy_called"].is_null().all() and sub["expected_called"].is_null().all()
    ok = kinds.filter(pl.col("k") > 2)
    assert (ok["status"] == "ok").all() and ok["decoy_called"].is_not_null().all()
    assert "decoder exploded" in kinds.filter(pl.col("k") == 1)["error"][0]


def test_grid_streams_without_materialising() -> None:
    from runner.probes.misselection import MisselectionProbe  # noqa: F401 — type only

    class _Probe:
        name = "p"
        runs = 1_000_000
        n_cells = 10

        def cells(self):  # type: ignore[no-untyped-def]
            return iter([(f"c{i}", "x") for i in range(10)])

    grid = Grid("sweep", 1, ["m"], [_Probe()])  # type: ignore[list-item]
    assert len(grid) == 10_000_000
    it = iter(grid)
    first = [next(it) for _ in range(3)]
    assert [s.run for s in first] == [0, 1, 2]
    assert len({s.trial_id for s in first}) == 3


def test_trial_seed_does_not_depend_on_provider_settings(write_sweep) -> None:
    """The same cell asked of the same model label gets the same seed whatever the provider config."""
    a = load_sweep(write_sweep(runs=2))
    data = quickstart_dict()
    data["probes"][0]["runs"] = 2
    data["models"][0]["params"] = {"temperature": 0}
    b = load_sweep(write_sweep(data, name="b.yaml"))
    assert a.sweep_id != b.sweep_id
    seeds_a = {(s.model, s.case_id, s.condition, s.run): s.seed for s in grid_of(a)}
    seeds_b = {(s.model, s.case_id, s.condition, s.run): s.seed for s in grid_of(b)}
    assert seeds_a == seeds_b


def test_unit_seed_is_shared_across_conditions_and_follows_the_sweep_seed(write_sweep) -> None:
    a = list(grid_of(load_sweep(write_sweep(runs=2))))
    units: dict[tuple, set[int]] = {}
    for s in a:
        units.setdefault((s.model, s.case_id, s.run), set()).add(s.unit_seed)
    assert all(len(v) == 1 for v in units.values())
    assert len({next(iter(v)) for v in units.values()}) == len(units)
    b = list(grid_of(load_sweep(write_sweep(runs=2, name="b.yaml", seed=7))))
    assert {s.unit_seed for s in a}.isdisjoint({s.unit_seed for s in b})


def test_resume_into_parts_of_another_schema_is_refused(write_sweep, tmp_path: Path) -> None:
    path = write_sweep(runs=2)
    runner.run(load_sweep(path), tmp_path / "out", quiet=True)
    part = next((tmp_path / "out" / "trials").glob("*.arrow"))
    write_part(part, pl.read_ipc(part).drop("response_text").to_arrow())  # a part of another version's schema
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2
    assert "different row schema" in result.output and "response_text" in result.output


def test_a_session_finishes_once_with_a_typed_status_however_it_ends(write_sweep, tmp_path: Path) -> None:
    """Before ``begin`` an exception is ``failed``; after it (or a Ctrl-C at any point) ``interrupted``; the lock is
    released each time, and the manifest keeps the bare strings old outputs have."""
    import json

    from runner.core.manifest import RunStatus, read_manifest
    from runner.execution.session import Session

    loaded = load_sweep(write_sweep(runs=1))
    out = tmp_path / "out"

    def ended(error: BaseException, *, begin: bool) -> str:
        with pytest.raises(type(error)), Session(loaded, out) as session:
            if begin:
                session.begin()
            raise error
        session.finish()  # a second finish does nothing
        manifest = read_manifest(out)
        assert manifest is not None and manifest.status == session.status
        return session.status

    assert ended(RuntimeError("setup"), begin=False) == RunStatus.FAILED
    assert ended(RuntimeError("mid-run"), begin=True) == RunStatus.INTERRUPTED
    assert ended(KeyboardInterrupt(), begin=False) == RunStatus.INTERRUPTED
    result = runner.run(loaded, out, quiet=True)  # the lock was released every time
    assert result.status is RunStatus.COMPLETE and result.status == "complete"
    sessions = json.loads((out / "manifest.json").read_text())["sessions"]
    assert [s["status"] for s in sessions] == ["failed", "interrupted", "interrupted", "complete"]
    assert "stopped" not in sessions[-1]  # written only when a session stopped early

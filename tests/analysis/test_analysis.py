"""The report's numbers: per-cell counts from polars, statistics from ``stats``, errors kept apart."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import runner
import stats
from runner.analysis.cells import N_RESAMPLES, analyze
from runner.config.sweep import load_sweep
from runner.output import Output
from tests.conftest import quickstart_dict
from tests.helpers.rows import write_part


@pytest.mark.slow
def test_cell_counts_match_a_plain_python_count(quickstart_out: Path) -> None:
    rows = pl.scan_ipc(str(quickstart_out / "trials" / "*.arrow")).collect().to_dicts()
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        c = counts[(r["model"], r["case_id"], r["condition"])]
        c[0] += 1
        c[1] += int(r["decoy_called"])
    [a] = analyze(quickstart_out)
    got = {(r["model"], r["case_id"], r["condition"]): [r["n"], r["decoy_called"]] for r in a.cells.to_dicts()}
    assert got == dict(counts)


def test_contrast_p_values_are_the_stats_core_on_those_counts(quickstart_out: Path) -> None:
    [a] = analyze(quickstart_out)
    cells = a.cells.filter(pl.col("model") == "sim-typical")
    arm = cells["condition"].is_in(["ungroundable", "groundable_unknown"]).cast(pl.Int64).to_numpy()
    args = (cells["case_id"].to_numpy(), arm, cells["decoy_called"].to_numpy(), cells["n"].to_numpy())
    row = a.contrasts.filter((pl.col("model") == "sim-typical") & (pl.col("outcome") == "decoy_called")).row(0, named=True)
    trial = stats.cluster_permutation_test(*args, level="trial")
    cell = stats.cluster_permutation_test(*args, level="cell")
    assert row["p_trial"] == trial.pvalue and row["floor_trial"] == trial.attainable_floor
    assert row["p_cell"] == cell.pvalue and row["floor_cell"] == cell.attainable_floor
    assert row["difference"] == pytest.approx(trial.statistic)
    assert row["ci_lo"] <= row["difference"] <= row["ci_hi"]


def test_condition_intervals_are_the_stats_default_korn_graubard_and_deterministic(quickstart_out: Path) -> None:
    first, second = analyze(quickstart_out)[0], analyze(quickstart_out)[0]
    assert first.conditions.equals(second.conditions)
    row = first.conditions.row(0, named=True)
    sub = first.cells.filter((pl.col("model") == row["model"]) & (pl.col("condition") == row["condition"]))
    ci = stats.cluster_rate_ci(sub["case_id"].to_numpy(), sub["decoy_called"].to_numpy(), sub["n"].to_numpy(),
                               n_resamples=N_RESAMPLES, seed=20261129 % 2**32).confidence_interval
    assert (row["decoy_called_cluster_lo"], row["decoy_called_cluster_hi"]) == (ci.low, ci.high)
    assert row["decoy_called_interval_method"] == "korn-graubard-tilted"
    contrast = first.contrasts.row(0, named=True)
    assert contrast["interval_method"] == "mover-korn-graubard-tilted" and contrast["arm_a"] == ["ungroundable",
                                                                                         "groundable_unknown"]
    lo, _hi = stats.wilson_interval(row["decoy_called_hits"], row["ok"])
    assert row["decoy_called_wilson_lo"] == pytest.approx(float(lo))


def test_error_rows_are_counted_as_errors_not_trials_of_the_rate(tmp_path: Path, write_sweep, monkeypatch) -> None:
    from runner.providers import PROVIDERS, ErrorKind, ProviderError
    from runner.sim import SimProvider

    class HalfBroken(SimProvider):
        async def complete(self, request):  # type: ignore[no-untyped-def]
            if (request.seed or 0) % 2:
                raise ProviderError(ErrorKind.TRANSIENT, "503 upstream")
            return self.respond(request)

    monkeypatch.setitem(PROVIDERS, "halfbroken", (HalfBroken, lambda m: None))
    data = quickstart_dict()
    data["models"] = [{"name": "hb", "provider": "halfbroken", "model": "typical"}]
    data["probes"][0]["runs"] = 4
    runner.run(load_sweep(write_sweep(data)), tmp_path / "out", quiet=True)
    [a] = analyze(tmp_path / "out")
    trials = Output.open(tmp_path / "out").scan().collect()
    errors = int((trials["status"] == "error").sum())
    assert 0 < errors < trials.height
    assert int(a.conditions["errors"].sum()) == errors
    assert int(a.conditions["ok"].sum()) == trials.height - errors
    ok = trials.filter(pl.col("status") == "ok")
    assert int(a.conditions["decoy_called_hits"].sum()) == int(ok["decoy_called"].sum())
    assert np.isfinite(a.conditions["decoy_called_rate"].to_numpy()).all()


def test_a_null_outcome_is_not_a_miss(tmp_path: Path, write_sweep) -> None:
    """Rates use their own denominator: ok trials where the outcome exists."""
    runner.run(load_sweep(write_sweep(runs=2)), tmp_path / "out", quiet=True)
    part = next((tmp_path / "out" / "trials").glob("*.arrow"))
    frame = pl.read_ipc(part)
    blanked = frame.with_columns(pl.when(pl.col("condition") == "groundable_known").then(None)
                                 .otherwise(pl.col("asked")).alias("asked"))
    write_part(part, blanked.to_arrow())
    [a] = analyze(tmp_path / "out")
    known = a.conditions.filter(pl.col("condition") == "groundable_known")
    assert (known["asked_n"] == 0).all() and known["asked_rate"].is_nan().all()
    assert (known["decoy_called_n"] == known["ok"]).all()
    other = a.conditions.filter(pl.col("condition") != "groundable_known")
    assert (other["asked_n"] == other["ok"]).all()


def test_an_output_from_before_newer_outcome_columns_still_reports(quickstart_out: Path, tmp_path: Path) -> None:
    """Outputs written by an earlier version lack the outcome columns added since (here the reply columns):
    every report format reads them, on the columns they have."""
    import shutil

    import pyarrow as pa
    import pyarrow.ipc as ipc
    from typer.testing import CliRunner

    from runner.cli.app import app

    newer = ("empty_reply", "unparsable_call", "unknown_tool", "calls_from_text")
    old = tmp_path / "old"
    shutil.copytree(quickstart_out, old)
    for part in (old / "trials").glob("*.arrow"):
        with pa.OSFile(str(part), "rb") as source:
            table = ipc.open_file(source).read_all()
        write_part(part, table.drop_columns([c for c in newer if c in table.column_names]))  # schema metadata kept
    [a] = analyze(old)
    assert "decoy_called" in a.rates and not set(newer) & set(a.rates)
    [current] = analyze(quickstart_out)
    same = [c for c in current.conditions.columns if not c.startswith(newer)]
    assert a.conditions.columns == same and a.conditions.equals(current.conditions.select(same))
    assert a.contrasts.equals(current.contrasts)
    done = CliRunner().invoke(app, ["report", str(old), "--json", str(tmp_path / "s.json"),
                                    "--csv", str(tmp_path / "csv"), "--html", str(tmp_path / "r.html")])
    assert done.exit_code == 0, done.output
    assert "decoy_called" in done.output and (tmp_path / "r.html").stat().st_size > 0


def test_a_trial_floor_below_the_float_range_keeps_its_size_in_the_contrast_table() -> None:
    """10 prompts of 500 trials a side, every hit in arm A: the trial floor (≈ 1e-2994) is reported as the bound 0
    and carried in log10 beside it; the cell floor is an ordinary number with its own log10."""
    import math

    from runner.analysis.cells import _contrast_table
    from runner.probes.base import Contrast

    cells = pl.DataFrame([{"model": "m", "case_id": f"p{c}", "condition": cond, "hit": 500 * (cond == "a"),
                           "n_hit": 500} for c in range(10) for cond in ("a", "b")])
    row = _contrast_table(cells, (Contrast(label="a vs b", outcome="hit", arm_a=("a",), arm_b=("b",)),),
                          seed=1).row(0, named=True)
    exact = math.log10(2) - 10 * math.log10(math.comb(1000, 500))
    assert row["floor_trial"] == 0.0 and row["floor_log10_trial"] == pytest.approx(exact, abs=1e-6)
    assert row["floor_cell"] > 0 and row["floor_log10_cell"] == pytest.approx(math.log10(row["floor_cell"]))

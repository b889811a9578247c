"""`trialgrid import trials`: another harness's per-trial CSV/Parquet → a run the report reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import runner
import stats
from runner.analysis.leaderboard import summarize
from runner.cli.app import app

cli = CliRunner()


def leaderboard_like_csv(path: Path, seed: int = 0, errors: int = 3) -> pl.DataFrame:
    """The shape of the ungrounded leaderboard's per-model CSVs: 12 triples × 3 conditions × 20 runs."""
    rng = np.random.default_rng(seed)
    rates = {"ungroundable": 0.2, "groundable_unknown": 0.15, "groundable_known": 0.02}
    rows = []
    for t in range(12):
        shift = rng.normal(0, 1)
        for cond, r in rates.items():
            p = 1 / (1 + np.exp(-(np.log(r / (1 - r)) + shift)))
            for run in range(20):
                rows.append({"triple_id": f"T{t:02d}", "condition": cond, "run": run,
                             "decoy_called": int(rng.random() < p), "expected_called": int(rng.random() < 0.5),
                             "status": "OK", "error": ""})
    for i in range(errors):
        rows[i * 7].update(status="ERROR", error="HTTP 529 overloaded", decoy_called="")
    frame = pl.DataFrame(rows, schema_overrides={"decoy_called": pl.String})
    frame.write_csv(path)
    return frame


ARGS = ["--model-name", "m1", "--cluster", "triple_id", "--condition", "condition", "--run", "run",
        "--status", "status", "--ok", "OK", "--error", "error", "--outcome", "decoy_called",
        "--outcome", "correct=expected_called",
        "--contrast", "decoy:decoy_called:ungroundable+groundable_unknown:groundable_known"]


def test_import_then_report_is_the_stats_core_on_the_file(tmp_path: Path) -> None:
    src = tmp_path / "m1.csv"
    frame = leaderboard_like_csv(src)
    result = cli.invoke(app, ["import", "trials", str(src), "--out", str(tmp_path / "run"), *ARGS])
    assert result.exit_code == 0, result.output
    trials = runner.load(tmp_path / "run").collect()
    assert trials.height == 720 and (trials["status"] == "error").sum() == 3
    assert trials.filter(pl.col("status") == "error")["decoy_called"].null_count() == 3  # never a pass or fail
    s = summarize([tmp_path / "run"])
    row = s.leaderboard.row(0, named=True)
    ok = frame.filter(pl.col("status") == "OK").with_columns(pl.col("decoy_called").cast(pl.Int64))
    cells = ok.group_by("triple_id", "condition").agg(pl.col("decoy_called").sum().alias("h"), pl.len().alias("n"))
    arm = cells["condition"].is_in(["ungroundable", "groundable_unknown"]).cast(pl.Int64).to_numpy()
    expect = stats.cluster_permutation_test(cells["triple_id"].to_numpy(), arm, cells["h"].to_numpy(),
                                            cells["n"].to_numpy(), level="cell")
    assert row["p"] == pytest.approx(expect.pvalue) and row["errors"] == 3 and row["headline"] == "decoy_called"
    assert set(s.conditions["rate"]) == {"decoy_called", "correct"}
    # the same file imported again gives the same trial ids
    again = cli.invoke(app, ["import", "trials", str(src), "--out", str(tmp_path / "again"), *ARGS])
    assert again.exit_code == 0
    ids = lambda d: sorted(runner.load(d).select("trial_id").collect()["trial_id"].to_list())  # noqa: E731
    assert ids(tmp_path / "run") == ids(tmp_path / "again")


def test_parquet_and_a_known_kind_use_that_probes_rates(tmp_path: Path) -> None:
    frame = leaderboard_like_csv(tmp_path / "x.csv", errors=0)
    frame.with_columns(pl.col("decoy_called").cast(pl.Int64)).write_parquet(tmp_path / "x.parquet")
    missing = cli.invoke(app, ["import", "trials", str(tmp_path / "x.parquet"), "--out", str(tmp_path / "k"),
                               "--kind", "misselection", "--model-name", "m", "--cluster", "triple_id",
                               "--condition", "condition", "--outcome", "decoy_called"])
    assert missing.exit_code == 2 and "map expected_called, asked" in missing.output
    frame.with_columns(pl.col("decoy_called").cast(pl.Int64), pl.lit(0).alias("asked")).write_parquet(
        tmp_path / "x.parquet")
    ok = cli.invoke(app, ["import", "trials", str(tmp_path / "x.parquet"), "--out", str(tmp_path / "k"),
                          "--kind", "misselection", "--model-name", "m", "--cluster", "triple_id",
                          "--condition", "condition", "--outcome", "decoy_called", "--outcome", "expected_called",
                          "--outcome", "asked"])
    assert ok.exit_code == 0, ok.output
    s = summarize([tmp_path / "k"])
    assert set(s.contrasts["contrast"]) == {"decoy", "correct tool"}  # misselection's own contrasts


def test_bad_mappings_are_clear_errors(tmp_path: Path) -> None:
    src = tmp_path / "m.csv"
    leaderboard_like_csv(src, errors=0)
    base = ["import", "trials", str(src), "--out", str(tmp_path / "o"), "--model-name", "m", "--condition", "condition"]
    r = cli.invoke(app, [*base, "--cluster", "nosuch", "--outcome", "decoy_called"])
    assert r.exit_code == 2 and "no column 'nosuch'" in r.output
    r = cli.invoke(app, [*base, "--cluster", "triple_id", "--outcome", "condition"])
    assert r.exit_code == 2 and "not boolean" in r.output
    r = cli.invoke(app, [*base, "--cluster", "triple_id", "--outcome", "decoy_called"])
    assert r.exit_code == 0, r.output
    r = cli.invoke(app, [*base, "--cluster", "triple_id", "--outcome", "decoy_called"])
    assert r.exit_code == 2 and "already holds a run" in r.output


def test_import_force_never_replaces_a_run_another_process_is_writing(tmp_path: Path) -> None:
    from runner.output.lock import lock_output

    src = tmp_path / "m1.csv"
    leaderboard_like_csv(src)
    assert cli.invoke(app, ["import", "trials", str(src), "--out", str(tmp_path / "run"), *ARGS]).exit_code == 0
    with lock_output(tmp_path / "run"):  # a run (or another import) holds the output
        result = cli.invoke(app, ["import", "trials", str(src), "--out", str(tmp_path / "run"), *ARGS, "--force"])
        assert result.exit_code == 2 and "is being written by trialgrid run" in result.output
    result = cli.invoke(app, ["import", "trials", str(src), "--out", str(tmp_path / "run"), *ARGS, "--force"])
    assert result.exit_code == 0, result.output
    assert runner.load(tmp_path / "run").collect().height == 720

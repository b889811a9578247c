"""`trialgrid report OUT…`: leaderboard over many runs, JSON valid against its shipped schema, CSV tables."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

import runner
import stats
from runner.analysis.leaderboard import summarize
from runner.analysis.scorecard import scorecard_table
from runner.cli.app import app
from runner.config.sweep import load_sweep
from runner.reporting.summary_json import schema_path
from tests.conftest import CONFIGS, quickstart_dict

cli = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A priced quickstart (3 runs per cell) and a second sweep sharing one model name."""
    tmp = tmp_path_factory.mktemp("board")
    first = quickstart_dict()
    first["probes"][0]["runs"] = 3
    first["prices"] = {"sim-typical": {"input": 3.0, "output": 15.0}, "sim-careful": {"input": 1.0, "output": 5.0}}
    second = quickstart_dict()
    second["name"] = "second"
    second["models"] = [{"name": "sim-typical", "provider": "sim", "model": "typical-b"}]
    second["probes"][0]["runs"] = 3
    outs = []
    for data in (first, second):
        path = tmp / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data))
        runner.run(load_sweep(path), tmp / data["name"], quiet=True)
        outs.append(tmp / data["name"])
    return outs


def test_leaderboard_rows_are_the_stats_core_on_the_cells(runs: list[Path]) -> None:
    s = summarize(runs)
    assert s.leaderboard.height == 4 and set(s.leaderboard["run"]) == {"quickstart", "second"}
    row = s.leaderboard.filter((pl.col("run") == "quickstart") & (pl.col("model") == "sim-typical")).row(0, named=True)
    cells = s.cells.filter((pl.col("run") == "quickstart") & (pl.col("model") == "sim-typical")
                           & (pl.col("rate") == "decoy_called"))
    arm = cells["condition"].is_in(["ungroundable", "groundable_unknown"]).cast(pl.Int64).to_numpy()
    cell = stats.cluster_permutation_test(cells["case_id"].to_numpy(), arm, cells["hits"].to_numpy(),
                                          cells["n"].to_numpy(), level="cell")
    assert row["p"] == cell.pvalue and row["floor"] == cell.attainable_floor and row["method"] == cell.method
    firing = stats.prompts_firing(cells["case_id"].to_numpy()[arm == 1], cells["hits"].to_numpy()[arm == 1])
    assert row["firing"] == firing.firing and row["prompts"] == 13


def test_cost_is_tokens_times_prices_and_null_without_a_price(runs: list[Path]) -> None:
    s = summarize(runs)
    trials = runner.load(runs[0]).filter(pl.col("model") == "sim-typical").collect()
    expected = (trials["input_tokens"].sum() * 3.0 + trials["output_tokens"].sum() * 15.0) / 1e6
    m = {(r["run"], r["model"]): r for r in s.models.iter_rows(named=True)}
    assert m[("quickstart", "sim-typical")]["cost_usd"] == pytest.approx(expected)
    assert m[("quickstart", "sim-typical")]["cost_per_trial_usd"] == pytest.approx(expected / trials.height)
    assert m[("quickstart", "sim-reckless")]["cost_usd"] is None  # no price: unknown, not free
    assert m[("second", "sim-typical")]["cost_usd"] is None


def test_cli_writes_json_valid_against_the_shipped_schema_and_csv(runs: list[Path], tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    result = cli.invoke(app, ["report", *map(str, runs), "--json", str(tmp_path / "s.json"),
                              "--csv", str(tmp_path / "csv"), "--no-details"])
    assert result.exit_code == 0, result.output
    assert "leaderboard" in result.output and "second" in result.output
    schema = json.loads(schema_path().read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads((tmp_path / "s.json").read_text())
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    board = data["probes"][0]["leaderboard"]
    assert board[0]["test"]["level"] == "cell" and board[0]["test"]["method"].startswith("exact")
    assert {p["run"] for p in data["probes"]} == {"quickstart", "second"}
    verdicts = {(p["run"], v["model"]): v["verdict"] for p in data["probes"] for v in p["scorecard"]}
    assert len(verdicts) == 4 and data["settings"]["scorecard"]["alpha"] == 0.05
    # the intervals draw no resamples: the summary names their method instead of a resample count
    assert data["settings"]["interval_method"] == "korn-graubard-tilted" and "bootstrap_resamples" not in data["settings"]
    assert verdicts == {(r["run"], r["model"]): r["verdict"] for r in scorecard_table(summarize(runs)).to_dicts()}
    for name in ("runs", "models", "leaderboard", "conditions", "contrasts", "cells"):
        assert pl.read_csv(tmp_path / "csv" / f"{name}.csv").height > 0
    # stable: the same runs give the same summary
    again = cli.invoke(app, ["report", *map(str, runs), "--json", str(tmp_path / "t.json"), "-q"])
    assert again.exit_code == 0
    assert (tmp_path / "t.json").read_text() == (tmp_path / "s.json").read_text()


def test_schema_rejects_a_summary_missing_a_required_field(runs: list[Path]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from runner.reporting.summary_json import summary_dict

    data = summary_dict(summarize(runs[:1]))
    del data["probes"][0]["leaderboard"][0]["test"]["floor"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(schema_path().read_text()), cls=jsonschema.Draft202012Validator)
    data = summary_dict(summarize(runs[:1]))
    data["probes"][0]["scorecard"][0]["verdict"] = "fine"  # not one of the scorecard's verdicts
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json.loads(schema_path().read_text()), cls=jsonschema.Draft202012Validator)


def test_load_returns_the_documented_columns(runs: list[Path]) -> None:
    from runner.core.schema import COMMON_FIELDS

    frame = runner.load(runs[0])
    names = frame.collect_schema().names()
    assert names[:len(COMMON_FIELDS)] == [f.name for f in COMMON_FIELDS]
    assert "decoy_called" in names
    summary = runner.load_summary(*runs)
    assert isinstance(summary.leaderboard, pl.DataFrame) and isinstance(summary.conditions, pl.DataFrame)


def test_bundled_sweeps_all_report_together(tmp_path: Path) -> None:
    """Every bundled sweep, at 1 run per cell, reports in one leaderboard (probes without contrasts too)."""
    outs = []
    for sweep in sorted(CONFIGS.glob("*.yaml")):
        data = yaml.safe_load(sweep.read_text())
        if any(m.get("provider") != "sim" for m in data["models"]):
            continue  # a starter sweep for a real server (local-model.yaml): nothing listens here
        for p in data["probes"]:
            p["runs"] = 1
            for key in ("cases", "catalogue", "traces", "tasks", "labels"):
                if isinstance(p.get(key), str):
                    p[key] = str(CONFIGS / p[key])
        path = tmp_path / sweep.name
        path.write_text(yaml.safe_dump(data))
        try:
            loaded = load_sweep(path)
        except runner.UserError:
            continue  # a sweep naming files this test does not rewrite; the others still count
        runner.run(loaded, tmp_path / sweep.stem, quiet=True)
        outs.append(tmp_path / sweep.stem)
    assert len(outs) >= 2
    result = cli.invoke(app, ["report", *map(str, outs)])
    assert result.exit_code == 0, result.output

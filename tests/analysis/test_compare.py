"""Model against model, paired on the case: the numbers are the stats calls on matched cells, Holm across the family,
and every rendering (terminal, JSON, CSV, HTML forest plot, runner.load_summary) carries them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import runner
import stats
from runner.cli.app import app
from tests.helpers.files import quickstart_sweep


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The quickstart (3 models × 13 cases × 3 conditions) at 5 runs per cell, twice with different seeds."""
    tmp = tmp_path_factory.mktemp("compare")
    outs = []
    for seed in (1, 2):
        out = tmp / f"out{seed}"
        runner.run(quickstart_sweep(tmp, runs=5, name=f"s{seed}.yaml", seed=seed), out, quiet=True)
        outs.append(out)
    return outs


def test_each_pair_and_rate_is_the_paired_test_and_interval_on_matched_cells(runs: list[Path]) -> None:
    summary = runner.load_summary(runs[0])
    comp = summary.comparisons
    pairs = set(zip(comp["model_a"], comp["model_b"], strict=True))
    assert pairs == {("sim-careful", "sim-typical"), ("sim-careful", "sim-reckless"), ("sim-typical", "sim-reckless")}
    assert set(comp["rate"]) == {"decoy_called", "expected_called", "asked"} and comp.height == 9
    row = comp.filter((pl.col("model_a") == "sim-careful") & (pl.col("model_b") == "sim-reckless")
                      & (pl.col("rate") == "decoy_called")).row(0, named=True)
    cells = summary.cells.filter(pl.col("rate") == "decoy_called")
    a = cells.filter(pl.col("model") == "sim-careful").sort("case_id", "condition")
    b = cells.filter(pl.col("model") == "sim-reckless").sort("case_id", "condition")
    assert a.select("case_id", "condition").equals(b.select("case_id", "condition"))
    case = a["case_id"].to_numpy()
    test = stats.paired_permutation_test(case, a["hits"].to_numpy(), a["n"].to_numpy(), b["hits"].to_numpy(),
                                         b["n"].to_numpy())
    ci = stats.cluster_rate_ci(np.concatenate([case, case]), np.concatenate([a["hits"], b["hits"]]),
                               np.concatenate([a["n"], b["n"]]), arm=np.repeat([1, 0], case.size))
    assert row["difference"] == pytest.approx(test.statistic) and row["p"] == test.pvalue
    assert row["floor"] == pytest.approx(2 / 2**13) and row["cases"] == 13 and row["cells"] == 39
    assert (row["ci_lo"], row["ci_hi"]) == pytest.approx(tuple(ci.confidence_interval))
    assert row["difference"] < 0 and row["verdict"] == "B higher"  # the reckless agent calls the decoy more
    assert comp["p_holm"].to_list() == pytest.approx(stats.holm(comp["p"].to_numpy()).tolist())
    assert set(comp["family"]) == {9}
    assert all(v == "no evidence" for v, q in zip(comp["verdict"], comp["p_holm"], strict=True) if q > 0.05)


def test_runs_given_together_are_compared_across_runs_too(runs: list[Path]) -> None:
    comp = runner.load_summary(*runs).comparisons
    assert comp.height == 15 * 3  # 6 (run, model) sides: 15 pairs, 3 rates each
    same = comp.filter((pl.col("model_a") == pl.col("model_b")) & (pl.col("rate") == "decoy_called"))
    assert same.height == 3 and (same["run_a"] != same["run_b"]).all()
    # the same agent under another seed: no evidence of a difference
    assert set(same["verdict"]) == {"no evidence"}


def test_terminal_json_csv_and_html_carry_the_comparisons(runs: list[Path], tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from runner.reporting.summary_json import schema_path

    result = CliRunner().invoke(app, ["report", str(runs[0]), "--json", str(tmp_path / "s.json"), "--csv",
                                      str(tmp_path / "csv"), "--html", str(tmp_path / "r.html"), "--no-details"])
    assert result.exit_code == 0, result.output
    assert "model against model (paired on the case)" in result.output and "Holm" in result.output
    data = json.loads((tmp_path / "s.json").read_text())
    jsonschema.validate(data, json.loads(schema_path().read_text()), cls=jsonschema.Draft202012Validator)
    assert len(data["model_comparisons"]) == 9 and {"ci", "p_holm", "floor"} <= set(data["model_comparisons"][0])
    csv = pl.read_csv(tmp_path / "csv" / "comparisons.csv")
    assert csv.height == 9 and "p_holm" in csv.columns
    page = (tmp_path / "r.html").read_text()
    assert 'data-section="comparisons"' in page and "model against model" in page and "<svg" in page

"""Model against model, paired on the case: the numbers are the stats calls on matched cells, Holm across the family,
and every rendering (terminal, JSON, CSV, HTML forest plot, runner.load_summary) carries them; pass^k consistency;
`report --gate` thresholds on interval bounds. One quickstart fixture serves them all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

import runner
import stats
from runner.analysis.gates import check_gates, parse_gate
from runner.analysis.leaderboard import Summary
from runner.cli.app import app
from runner.core.errors import UserError
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


@pytest.fixture(scope="module")
def summary(runs: list[Path]) -> Summary:
    """The first run's summary, built once for the tests that read it."""
    return runner.load_summary(runs[0])


def test_each_pair_and_rate_is_the_paired_test_and_interval_on_matched_cells(summary: Summary) -> None:
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
    section = page[page.index('<section data-section="comparisons"'):]
    section = section[:section.index("</section>")]
    assert 'aria-label="model against model"' in section and section.count("<circle") == 9  # one dot per row


def test_consistency_is_pass_hat_k_of_the_headline_success_per_model_and_condition(summary: Summary) -> None:
    con = summary.consistency
    assert con["model"].unique(maintain_order=True).to_list() == ["sim-careful", "sim-typical", "sim-reckless"]
    assert set(con["k"]) == {1, 2, 3, 4, 5} and set(con["success"]) == {"no decoy_called"}
    cells = summary.cells.filter((pl.col("rate") == "decoy_called") & (pl.col("model") == "sim-reckless")
                                 & (pl.col("condition") == "ungroundable"))
    clean = (cells["n"] - cells["hits"]).to_numpy()
    for k in (1, 3, 5):
        row = con.filter((pl.col("model") == "sim-reckless") & (pl.col("condition") == "ungroundable")
                         & (pl.col("k") == k)).row(0, named=True)
        ref = stats.pass_hat_k(cells["case_id"].to_numpy(), clean, cells["n"].to_numpy(), k)
        assert row["pass_k"] == pytest.approx(ref.statistic) and row["cases"] == 13
        assert (row["ci_lo"], row["ci_hi"]) == pytest.approx(tuple(ref.confidence_interval))
        assert row["every_run"] == pytest.approx(float(np.mean(clean == cells["n"].to_numpy())))
    k1 = con.filter((pl.col("k") == 1) & (pl.col("model") == "sim-reckless") & (pl.col("condition") == "ungroundable"))
    board = summary.conditions.filter((pl.col("model") == "sim-reckless") & (pl.col("condition") == "ungroundable")
                                      & (pl.col("rate") == "decoy_called"))
    assert k1["pass_k"][0] == pytest.approx(1 - board["value"][0])  # equal runs per case: pass^1 = 1 − the rate


def test_a_gate_on_the_upper_bound_fails_exactly_the_rows_past_it_and_names_them(runs: list[Path],
                                                                                  summary: Summary) -> None:
    rows = summary.conditions.filter((pl.col("rate") == "decoy_called") & (pl.col("condition") == "ungroundable"))
    threshold = float(rows["cluster_hi"].median())  # type: ignore[arg-type]
    gate = parse_gate(f"upper(decoy_called | ungroundable) <= {threshold:.6f}")
    failures = check_gates(summary, [gate])
    past = rows.filter(pl.col("cluster_hi") > round(threshold, 6))["model"].to_list()
    assert past and [f.split(": ")[1].split(" · ")[0] for f in failures] == past
    assert all("upper" in f and "95% interval" in f for f in failures)
    result = CliRunner().invoke(app, ["report", str(runs[0]), "-q", "--gate", gate.text])
    assert result.exit_code == 1 and past[0] in result.output
    ok = CliRunner().invoke(app, ["report", str(runs[0]), "-q", "--gate", "upper(decoy_called) <= 100%"])
    assert ok.exit_code == 0 and "0 failing" in ok.output


def test_a_malformed_gate_is_bad_input_with_the_form_expected(runs: list[Path]) -> None:
    for text in ("decoy_called < 0.2", "upper(decoy_called) < 1.5", "mean(x) < 0.1"):
        with pytest.raises(UserError):
            parse_gate(text)
    assert parse_gate("lower( passed|negative )>=95%").threshold == pytest.approx(0.95)
    result = CliRunner().invoke(app, ["report", str(runs[0]), "-q", "--gate", "decoy_called < 0.2"])
    assert result.exit_code == 2 and "--gate" in result.output and "BOUND(RATE | CONDITION)" in result.output


def test_a_gate_on_an_unknown_rate_is_refused_not_passed(summary: Summary) -> None:
    with pytest.raises(UserError, match="matches no rate"):
        check_gates(summary, [parse_gate("lower(no_such_rate) > 0.1")])


def test_run_gate_is_checked_after_the_run_and_a_malformed_one_before_anything_runs(tmp_path: Path) -> None:
    sweep = quickstart_sweep(tmp_path, runs=2)
    bad = CliRunner().invoke(app, ["run", str(sweep), "--out", str(tmp_path / "bad"), "-q", "--gate", "decoy < 1"])
    assert bad.exit_code == 2 and "is not a gate" in bad.output and not (tmp_path / "bad").exists()
    failing = CliRunner().invoke(app, ["run", str(sweep), "--out", str(tmp_path / "out"), "-q",
                                       "--gate", "upper(decoy_called | ungroundable) <= 0%"])
    assert failing.exit_code == 1, failing.output
    assert "GATE upper(decoy_called | ungroundable) <= 0%: sim-reckless" in failing.output
    assert (tmp_path / "out" / "manifest.json").exists()  # the gate judged a finished run; the rerun resumes it
    again = CliRunner().invoke(app, ["run", str(sweep), "--out", str(tmp_path / "out"), "-q",
                                     "--gate", "upper(decoy_called | ungroundable) <= 100%"])
    assert again.exit_code == 0 and "0 failing row(s)" in again.output


def test_a_sweeps_gates_are_checked_for_form_at_load_and_by_run_and_leave_its_identity(tmp_path: Path) -> None:
    from runner.config.sweep import load_sweep
    from tests.helpers.files import quickstart_dict, write_yaml

    data = quickstart_dict()
    for probe in data["probes"]:
        probe["runs"] = 2
    plain = load_sweep(write_yaml(tmp_path / "plain.yaml", data))
    data["gates"] = ["upper(decoy_called | ungroundable) <= 0%"]
    gated = write_yaml(tmp_path / "gated.yaml", data)
    assert load_sweep(gated).sweep_id == plain.sweep_id  # a gate judges a run; it does not make a new one
    result = CliRunner().invoke(app, ["run", str(gated), "--out", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 1 and "GATE upper(decoy_called | ungroundable) <= 0%: sim-reckless" in result.output
    data["gates"] = ["upper(decoy_called) <= 0.2", "decoy_called < 0.2"]
    bad = CliRunner().invoke(app, ["validate", str(write_yaml(tmp_path / "bad.yaml", data))])
    assert bad.exit_code == 2 and "gates[1]" in bad.output and "is not a gate" in bad.output, bad.output

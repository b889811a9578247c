"""Probe views reach every output: judge kappas and calibration, propagation's stages and hop rates,
phantom's field scores — in the JSON (schema-validated), the CSV files, the HTML page and the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml
from rich.console import Console

import runner
from runner.analysis.leaderboard import Summary, summarize
from runner.config.sweep import load_sweep
from runner.core.views import FIELDS, STAGES, ProbeView
from runner.output import Output
from runner.probes.judge.report import human_references, kappas, rater_table, read_human_labels
from runner.probes.propagation.report import _rows, hop_rates
from runner.reporting.html import render_html
from runner.reporting.listings import write_listings
from runner.reporting.summary_csv import write_csv
from runner.reporting.summary_json import schema_path, summary_dict
from runner.reporting.terminal import print_report
from runner.reporting.viewformat import cell_parts
from tests.helpers import bundled_sweep

TRACES = {"traces": [
    {"id": "t1", "task": "Temperature in Lisbon on 2024-05-22?", "candidate": "It was 19.9 C.", "reference": "19.9"},
    {"id": "t2", "task": "Total of ORD-10234?", "candidate": "The total is 429.", "reference": "100.8"},
    {"id": "t3", "task": "Status of ORD-10237?", "candidate": "It has shipped.", "reference": "shipped"},
    {"id": "t4", "task": "Refund of ORD-10240?", "candidate": "No refund was issued.", "reference": "refund of 12.50"},
]}
LABELS = "trace_id,annotator,label\nt1,ann,YES\nt2,ann,NO\nt3,ann,YES\nt4,ann,NO\nt1,bob,YES\nt2,bob,NO\nt4,bob,YES\n"




@pytest.fixture(scope="module")
def outs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("views")
    (tmp / "traces.yaml").write_text(yaml.safe_dump(TRACES))
    (tmp / "labels.csv").write_text(LABELS)
    judge = {"name": "judging", "seed": 3, "models": [{"name": f"j-{p}", "provider": "sim", "model": p}
                                                     for p in ("careful", "typical", "reckless")],
             "probes": [{"kind": "judge", "traces": "traces.yaml", "human_labels": ["labels.csv"], "runs": 3}]}
    (tmp / "judge.yaml").write_text(yaml.safe_dump(judge))
    paths = {"judge": tmp / "judge.yaml", "propagation": bundled_sweep(tmp, "propagation.yaml", 1),
             "phantom": bundled_sweep(tmp, "phantom.yaml", 1)}
    result = {}
    for name, path in paths.items():
        runner.run(load_sweep(path), tmp / name, quiet=True)
        result[name] = tmp / name
    return result


@pytest.fixture(scope="module")
def summary(outs: dict[str, Path]) -> Summary:
    return summarize(list(outs.values()))


def views_of(summary: Summary, kind: str) -> dict[str, ProbeView]:
    run = next(r for r in summary.runs if any(a.kind == kind for a in r.probes))
    probe = next(a.probe for a in run.probes if a.kind == kind)
    return {v.key: v for v in summary.probe_views(run, probe)}


def test_views_are_the_probe_computations(summary: Summary, outs: dict[str, Path]) -> None:
    judge = views_of(summary, "judge")
    assert set(judge) == {"kappas", "calibration", "replies"}  # replies: every probe (runner.analysis.replies)
    trials = Output.open(outs["judge"]).scan()
    raters = rater_table(trials, "judge", None)
    humans = human_references(read_human_labels([outs["judge"].parent / "labels.csv"]))
    assert judge["kappas"].table.equals(kappas(raters, humans))
    assert set(judge["calibration"].table["rater"]) == {c for c in raters.columns if c != "case_id"}
    prop = views_of(summary, "propagation")
    assert {"hop_rates", "rejection_recovery", "fabrication", "interceptor", STAGES} <= set(prop)
    rows = _rows(Output.open(outs["propagation"]).scan(), "propagation")
    assert prop["hop_rates"].table.equals(hop_rates(rows))  # deterministic: the same intervals twice
    assert summary.stages.filter(pl.col("kind") == "propagation").drop("run", "probe", "kind").equals(
        prop[STAGES].table)
    phantom = views_of(summary, "phantom")
    assert {FIELDS, "auditor_errors", "disagreements"} <= set(phantom) and phantom["disagreements"].listing
    assert summary.fields.drop("run", "probe", "kind").equals(phantom[FIELDS].table)
    assert set(summary.fields["scorer"]) == {"auditor", "baseline"}


def test_json_holds_every_view_and_validates(summary: Summary) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    data = json.loads(json.dumps(summary_dict(summary)))
    schema = json.loads(schema_path().read_text())
    jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)
    by_kind = {p["kind"]: {v["key"]: v for v in p["views"]} for p in data["probes"]}
    kap = by_kind["judge"]["kappas"]
    assert kap["rows"] and {"rater", "reference", "n", "kappa", "lo", "hi"} <= set(kap["rows"][0])
    assert {c["format"] for c in kap["columns"]} >= {"score", "count"}
    cal = by_kind["judge"]["calibration"]["rows"]
    assert cal and all(r["reference"] == "majority" for r in cal)
    assert by_kind["propagation"]["stages"]["rows"] and by_kind["propagation"]["hop_rates"]["rows"]
    assert by_kind["phantom"]["fields"]["rows"]
    # the schema knows the judge's views: a kappa row without its kappa, or out of range, is rejected
    for breaking in (lambda r: r.pop("kappa"), lambda r: r.update(kappa=1.5)):
        bad = json.loads(json.dumps(data))
        row = next(v for p in bad["probes"] if p["kind"] == "judge" for v in p["views"] if v["key"] == "kappas")
        breaking(row["rows"][0])
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)
    bad = json.loads(json.dumps(data))
    cal_view = next(v for p in bad["probes"] if p["kind"] == "judge" for v in p["views"] if v["key"] == "calibration")
    cal_view["rows"][0]["point"] = -0.2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema, cls=jsonschema.Draft202012Validator)


def test_csv_writes_one_file_per_view(summary: Summary, tmp_path: Path) -> None:
    write_csv(summary, tmp_path)
    kap = pl.read_csv(tmp_path / "view.judge.kappas.csv")
    assert kap.height == views_of(summary, "judge")["kappas"].table.height and kap.columns[:2] == ["run", "kind"]
    assert pl.read_csv(tmp_path / "view.judge.calibration.csv").height > 0
    assert pl.read_csv(tmp_path / "view.propagation.stages.csv").height > 0
    assert pl.read_csv(tmp_path / "view.propagation.hop_rates.csv").height > 0
    assert pl.read_csv(tmp_path / "view.phantom.fields.csv").height > 0
    assert pl.read_csv(tmp_path / "stages.csv").height > 0 and pl.read_csv(tmp_path / "fields.csv").height > 0


def _cells(view: ProbeView) -> list[str]:
    """Every value text a renderer prints for a view (intervals included)."""
    out = []
    for row in view.table.iter_rows(named=True):
        for col in view.columns:
            value, interval = cell_parts(row, col)
            out += [t for t in (value, interval) if t]
    return out


def test_html_draws_every_view_escaped(summary: Summary) -> None:
    html = render_html(summary)
    from html import escape

    for kind in ("judge", "propagation", "phantom"):
        for view in views_of(summary, kind).values():
            assert escape(view.title) in html
            if not view.listing:
                for text in _cells(view):
                    assert escape(text) in html, (view.key, text)
    assert "Cohen&#x27;s kappa" in html and "calibrated correct-rate" in html
    assert "<script>" not in html.split("<main>", 1)[1].split("</main>", 1)[0]


def test_listings_are_written_only_where_asked_one_file_per_run_probe_and_view(summary: Summary,
                                                                               tmp_path: Path) -> None:
    written = write_listings(summary, tmp_path / "l")
    # of the three runs, only phantom has listing views: its disagreements, and the two directions
    assert {(p, k) for _, p, k in written} == {("phantom", "disagreements"), ("phantom", "auditor_phantom"),
                                               ("phantom", "baseline_phantom")}
    [(run, probe, key)] = [k for k in written if k[2] == "disagreements"]
    assert written[(run, probe, key)] == tmp_path / "l" / f"{run}.phantom.disagreements.jsonl"  # several runs
    lines = written[(run, probe, key)].read_text().splitlines()
    assert len(lines) == views_of(summary, "phantom")["disagreements"].table.height
    assert all(not list(r.out.glob("*.jsonl")) for r in summary.runs)


def test_terminal_prints_every_view_with_its_numbers(outs: dict[str, Path]) -> None:
    console = Console(record=True, width=400)
    summary = print_report(list(outs.values()), console)
    text = console.export_text()
    for heading in ("Cohen's kappa", "calibrated correct-rate", "hop rates", "rejection vs recovery",
                    "fabricated tool use", "interceptor (arm − its control", "stage reach", "field-level scores"):
        assert heading in text
    for kind in ("judge", "propagation", "phantom"):
        for view in views_of(summary, kind).values():
            if not view.listing:
                for t in _cells(view):
                    assert t in text, (view.key, t)
    assert not list(outs["phantom"].glob("*.jsonl"))  # a reader never writes into the run
    assert "write them with `trialgrid report --listings DIR`" in text

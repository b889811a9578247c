"""The judge probe: verdict parsing, the substring heuristic, human labels, kappas, calibrated rates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

import runner
from runner.config.sweep import load_sweep
from runner.core.errors import UserError
from runner.probes.judge import heuristic_verdict, parse_verdict
from runner.probes.judge.report import calibrated_rate, human_references, kappas, rater_table, read_human_labels


def test_parse_verdict_takes_the_last_verdict_line() -> None:
    assert parse_verdict("Reasoning...\nVERDICT: CORRECT") is True
    assert parse_verdict("verdict: **incorrect**") is False
    assert parse_verdict("VERDICT: CORRECT?\nOn reflection, VERDICT: INCORRECT") is False
    assert parse_verdict("I think it is right.") is None


def test_substring_heuristic() -> None:
    assert heuristic_verdict("It was 19.9 °C on 2024-05-22.", "19.9 on 2024-05-22")
    assert not heuristic_verdict("It was 119.9 °C.", "19.9")
    assert heuristic_verdict("Weather analysis for Toronto: cold.", "Weather analysis for Toronto.")
    assert not heuristic_verdict("I will check shortly.", "Weather analysis for Toronto.")


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_human_labels_are_read_and_bad_values_located(tmp_path: Path) -> None:
    a = write(tmp_path / "a.csv", "session_id,annotator,label\nt1,ann,YES\nt2,ann,no\n")
    labels = read_human_labels([a])
    assert labels.to_dicts() == [{"trace_id": "t1", "annotator": "ann", "label": True},
                                 {"trace_id": "t2", "annotator": "ann", "label": False}]
    bad = write(tmp_path / "bad.csv", "session_id,annotator,label\nt1,ann,YES\nt2,ann,maybe\n")
    with pytest.raises(UserError, match=r"bad.csv:3 label: label 'maybe'"):
        read_human_labels([bad])
    with pytest.raises(UserError, match="trace id column"):
        read_human_labels([write(tmp_path / "x.csv", "who,label\n1,YES\n")])


def test_consensus_and_majority() -> None:
    labels = pl.DataFrame({"trace_id": ["t1", "t1", "t1", "t2", "t2", "t3"],
                           "annotator": ["a", "b", "c", "a", "b", "a"],
                           "label": [True, True, False, True, True, False]})
    refs = human_references(labels).sort("case_id")
    assert refs["consensus"].to_list() == [None, True, None]   # t1 split, t2 unanimous, t3 one label only
    assert refs["majority"].to_list() == [True, True, False]


def test_raters_ensemble_and_kappa_against_it() -> None:
    rows = []
    verdicts = {"j1": [1, 1, 0, 0, 1, 0], "j2": [1, 0, 0, 1, 1, 0], "j3": [1, 1, 1, 0, 0, 0]}
    for judge, vs in verdicts.items():
        for i, v in enumerate(vs):
            rows.append({"probe": "judges", "status": "ok", "model": judge, "case_id": f"t{i}", "verdict": bool(v),
                         "heuristic_verdict": i % 2 == 0})
    raters = rater_table(pl.DataFrame(rows), "judges", ["j1", "j2", "j3"]).sort("case_id")
    assert raters["ensemble"].to_list() == [True, True, False, False, True, False]
    k = kappas(raters, pl.DataFrame(schema={"case_id": pl.String}))
    def kappa(rater: str) -> float:
        return k.filter((pl.col("rater") == rater) & (pl.col("reference") == "ensemble"))["kappa"][0]

    assert kappa("j1") == pytest.approx(1.0)  # j1 happens to equal the majority
    assert kappa("j2") == pytest.approx(1 / 3)  # 4 of 6 agree; p_e = 0.5 → (4/6 - 1/2) / (1/2)


def test_calibrated_rate() -> None:
    # judge says correct on 60% of traces; people agree with 'correct' 3/4 of the time and find 1/4 of
    # its 'incorrect' verdicts correct after all: 0.6 * 0.75 + 0.4 * 0.25 = 0.55
    verdicts = np.array([1] * 6 + [0] * 4)
    lv = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    lh = np.array([1, 1, 1, 0, 1, 0, 0, 0])
    res = calibrated_rate(verdicts, lv, lh, n_resamples=500, seed=1)
    assert res["point"] == pytest.approx(0.55)
    assert res["lo"] <= 0.55 <= res["hi"]
    assert np.isnan(calibrated_rate(verdicts, np.array([1, 1]), np.array([1, 0]))["point"])  # no 'incorrect' labelled


def test_judge_sweep_with_sim_judges_and_human_labels(tmp_path: Path) -> None:
    traces = {"traces": [
        {"id": "t1", "task": "Temperature in Lisbon on 2024-05-22?", "candidate": "It was 19.9 C.", "reference": "19.9"},
        {"id": "t2", "task": "Total of ORD-10234?", "candidate": "The total is 429.", "reference": "100.8"},
        {"id": "t3", "task": "Status of ORD-10237?", "candidate": "It has shipped.", "reference": "shipped"},
    ]}
    (tmp_path / "traces.yaml").write_text(yaml.safe_dump(traces))
    write(tmp_path / "labels.csv", "trace_id,annotator,label\nt1,ann,YES\nt2,ann,NO\nt3,ann,YES\n")
    sweep = {"name": "judging", "seed": 3, "models": [{"name": f"j-{p}", "provider": "sim", "model": p}
                                                     for p in ("careful", "typical", "reckless")],
             "probes": [{"kind": "judge", "traces": "traces.yaml", "human_labels": ["labels.csv"], "runs": 3}]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    runner.run(load_sweep(tmp_path / "sweep.yaml"), tmp_path / "out", quiet=True)
    rows = pl.scan_ipc(str(tmp_path / "out" / "trials" / "*.arrow")).collect()
    assert rows.height == 27 and set(rows["status"]) == {"ok"} and rows["parse_failed"].sum() == 0
    raters = rater_table(rows, "judge", None)
    assert "ensemble" in raters.columns
    from rich.console import Console

    from runner.reporting.terminal import print_report

    console = Console(record=True, width=160)
    print_report(tmp_path / "out", console)
    text = console.export_text()
    assert "Cohen's kappa" in text and "calibrated correct-rate" in text


def test_a_judge_entry_may_name_its_own_condition(tmp_path: Path) -> None:
    # the kind's conditions are declared once (JudgeProbe.all_conditions); the config validates against them
    from runner.probes import PROBES

    (tmp_path / "traces.yaml").write_text(yaml.safe_dump({"traces": [
        {"id": "t1", "task": "Total?", "candidate": "It is 5.", "reference": "5"}]}))
    sweep = {"name": "judging", "models": [{"name": "j", "provider": "sim", "model": "careful"}],
             "probes": [{"kind": "judge", "traces": "traces.yaml", "conditions": ["llm"]}]}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    [probe] = load_sweep(tmp_path / "sweep.yaml").probes
    assert probe.conditions == ("llm",)
    sweep["probes"][0]["conditions"] = ["human"]
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    with pytest.raises(UserError, match="unknown condition 'human': expected some of llm"):
        load_sweep(tmp_path / "sweep.yaml")
    for kind, probe_cls in PROBES.items():
        assert probe_cls.config_model.known_conditions == probe_cls.all_conditions != (), kind

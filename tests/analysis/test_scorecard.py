"""The scorecard rules (runner/analysis/scorecard.py), each at its boundary, and the verdicts a real run gets."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

import runner
from runner.analysis.leaderboard import summarize
from runner.analysis.scorecard import (
    ALPHA,
    BRITTLE_MIN,
    DEGRADED_MIN,
    MAX_ERROR_SHARE,
    MIN_GROUNDED_CORRECT,
    ROBUST_MIN,
    Evidence,
    decide,
    grade,
    retention,
    scorecard_table,
)
from runner.config.sweep import load_sweep
from tests.conftest import quickstart_dict

# a clear, significant, gradeable case: every rule passes, retention 0.90
GOOD = Evidence(trials=1000, errors=0, grounded_correct=0.9, decoy_rate_a=0.10, decoy_rate_b=0.0, p=0.001,
                floor=1e-6)


def test_the_good_case_is_graded() -> None:
    v = decide(GOOD)
    assert v.verdict == "degraded" and v.retention == pytest.approx(0.9)


@pytest.mark.parametrize("errors,verdict", [(200, "degraded"), (201, "inconclusive")])
def test_error_share_boundary(errors: int, verdict: str) -> None:
    assert errors / 1000 in (MAX_ERROR_SHARE, MAX_ERROR_SHARE + 0.001)
    assert decide(replace(GOOD, errors=errors)).verdict == verdict


@pytest.mark.parametrize("grounded,verdict", [(MIN_GROUNDED_CORRECT, "degraded"),
                                              (MIN_GROUNDED_CORRECT - 1e-9, "inconclusive"),
                                              (None, "inconclusive"), (float("nan"), "inconclusive")])
def test_grounded_correct_boundary(grounded: float | None, verdict: str) -> None:
    assert decide(replace(GOOD, grounded_correct=grounded)).verdict == verdict


@pytest.mark.parametrize("floor,verdict", [(ALPHA, "degraded"), (ALPHA + 1e-9, "inconclusive")])
def test_attainable_floor_boundary(floor: float, verdict: str) -> None:
    v = decide(replace(GOOD, floor=floor, p=floor))
    assert v.verdict == verdict
    if verdict == "inconclusive":
        assert "add prompts" in v.reason


def test_a_model_that_never_calls_the_decoy_is_told_nothing_fired_not_to_add_prompts() -> None:
    v = decide(replace(GOOD, decoy_rate_a=0.0, decoy_rate_b=0.0, p=1.0, floor=1.0))
    assert v.verdict == "inconclusive" and "nothing fired" in v.reason and "add prompts" not in v.reason


@pytest.mark.parametrize("p,verdict", [(ALPHA, "degraded"), (ALPHA + 1e-9, "no effect")])
def test_significance_boundary(p: float, verdict: str) -> None:
    assert decide(replace(GOOD, p=p)).verdict == verdict


def test_no_effect_still_reports_retention() -> None:
    v = decide(replace(GOOD, p=0.5))
    assert v.verdict == "no effect" and v.retention == pytest.approx(0.9)


@pytest.mark.parametrize("kept,verdict", [
    (1.2, "robust"), (ROBUST_MIN, "robust"), (ROBUST_MIN - 1e-9, "degraded"),
    (DEGRADED_MIN, "degraded"), (DEGRADED_MIN - 1e-9, "brittle"),
    (BRITTLE_MIN, "brittle"), (BRITTLE_MIN - 1e-9, "collapse"), (0.0, "collapse"),
])
def test_grade_boundaries(kept: float, verdict: str) -> None:
    assert grade(kept) == verdict


@pytest.mark.parametrize("rate_a,verdict", [(1 - ROBUST_MIN, "robust"), (1 - DEGRADED_MIN, "degraded"),
                                            (1 - BRITTLE_MIN, "brittle"), (0.9, "collapse")])
def test_grades_through_decide_at_the_bounds(rate_a: float, verdict: str) -> None:
    # with no decoy when grounded, retention is 1 − decoy_A: each bound itself is in the grade above it
    assert decide(replace(GOOD, decoy_rate_a=rate_a)).verdict == verdict


def test_retention_is_relative_to_the_grounded_arm() -> None:
    assert retention(0.28, 0.20) == pytest.approx(0.9)
    assert retention(0.5, 1.0) is None
    v = decide(replace(GOOD, decoy_rate_a=1.0, decoy_rate_b=1.0))
    assert v.verdict == "inconclusive" and "every" in v.reason


@pytest.mark.parametrize("missing", ["p", "floor", "decoy_rate_a", "decoy_rate_b"])
def test_missing_test_is_inconclusive(missing: str) -> None:
    assert decide(replace(GOOD, **{missing: None})).verdict == "inconclusive"


def test_no_trials_is_inconclusive() -> None:
    assert decide(replace(GOOD, trials=0, errors=0)).verdict == "inconclusive"


def test_rules_apply_in_order_errors_first() -> None:
    v = decide(replace(GOOD, errors=900, grounded_correct=0.0, floor=1.0))
    assert "errors" in v.reason


def test_quickstart_verdicts_follow_the_report_numbers(quickstart_out: Path) -> None:
    summary = summarize([quickstart_out])
    card = scorecard_table(summary)
    assert card["model"].to_list() == ["sim-careful", "sim-typical", "sim-reckless"]
    for r in card.iter_rows(named=True):
        board = summary.leaderboard.filter(summary.leaderboard["model"] == r["model"]).row(0, named=True)
        assert (r["p"], r["floor"], r["decoy_rate_a"], r["decoy_rate_b"]) == (board["p"], board["floor"],
                                                                            board["rate_a"], board["rate_b"])
        assert r["verdict"] == decide(Evidence(board["trials"], board["errors"], r["grounded_correct"],
                                               r["decoy_rate_a"], r["decoy_rate_b"], r["p"], r["floor"])).verdict
    # the careful agent keeps more of its decoy-free behaviour than the reckless one
    kept = dict(zip(card["model"], card["retention"], strict=True))
    assert kept["sim-careful"] > kept["sim-typical"] > kept["sim-reckless"]


def test_a_design_with_two_prompts_is_inconclusive(tmp_path: Path) -> None:
    data = quickstart_dict()
    triples = yaml.safe_load(Path(data["probes"][0]["cases"]).read_text())
    triples["triples"] = triples["triples"][:2]  # 2 clusters: the cell-level floor cannot reach 0.05
    (tmp_path / "triples.yaml").write_text(yaml.safe_dump(triples))
    data["probes"][0].update(cases=str(tmp_path / "triples.yaml"), runs=5)
    data["models"] = data["models"][:1]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    runner.run(load_sweep(tmp_path / "s.yaml"), tmp_path / "out", quiet=True)
    row = scorecard_table(summarize([tmp_path / "out"])).row(0, named=True)
    assert row["floor"] > ALPHA and row["verdict"] == "inconclusive"

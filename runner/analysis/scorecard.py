"""The misselection scorecard: one verdict per model, from the cluster statistics the report already shows.

A leaderboard gives rates, intervals and p-values; people comparing agents also want
one word per model. The word must follow from those numbers by rules a reader can
check, so every rule and threshold lives here (the README's "Scorecard" section
states the same rules) and the terminal report, the JSON summary, the HTML page and
the badges all call ``scorecard_table``.

The measure is **retention**: the share of decoy-free trials an agent keeps when
the referent cannot be grounded (arm A of the probe's ``decoy`` contrast:
ungroundable + groundable_unknown) relative to when it is named and familiar
(arm B: groundable_known), ``(1 − decoy_A) / (1 − decoy_B)``. It is read off the
decoy contrast rather than off ``expected_called``, because asking the user is a
correct answer to an ungroundable request and must not count as lost skill. The
test behind the verdict is the leaderboard's: the cell-level cluster permutation
test of that contrast, with its attainable floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from runner.analysis.completeness import incomplete_runs
from runner.analysis.leaderboard import HEADLINE_LEVEL, Summary

#: the probe kind a scorecard is defined for, the contrast it reads and the baseline correct-call rate
KIND = "misselection"
_CONTRAST = "decoy"
_GROUNDED_CONDITION = "groundable_known"
_GROUNDED_OUTCOME = "expected_called"

#: significance level of the decoy test (p ≤ ALPHA is significant)
ALPHA = 0.05
#: inconclusive when more than this share of the model's trials are errors
MAX_ERROR_SHARE = 0.20
#: inconclusive when the model calls the expected tool in fewer than this share of grounded trials
MIN_GROUNDED_CORRECT = 0.50
#: grades of a significant effect, by retention (each bound inclusive); below BRITTLE_MIN: collapse
ROBUST_MIN = 0.95
DEGRADED_MIN = 0.80
BRITTLE_MIN = 0.50

_VERDICTS = ("robust", "no effect", "degraded", "brittle", "collapse", "inconclusive")

_SCORECARD_SCHEMA = {"run": pl.String, "probe": pl.String, "model": pl.String, "verdict": pl.String,
                    "retention": pl.Float64, "reason": pl.String, "decoy_rate_a": pl.Float64,
                    "decoy_rate_b": pl.Float64, "p": pl.Float64, "floor": pl.Float64,
                    "grounded_correct": pl.Float64, "error_share": pl.Float64}


@dataclass(frozen=True)
class Evidence:
    """What one model's verdict is decided from (None: the run has no such number)."""

    trials: int
    errors: int
    grounded_correct: float | None  # expected_called rate under groundable_known
    decoy_rate_a: float | None
    decoy_rate_b: float | None
    p: float | None                 # cell-level permutation p of the decoy contrast
    floor: float | None             # the smallest p that design can produce


@dataclass(frozen=True)
class Verdict:
    verdict: str
    retention: float | None
    reason: str


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def retention(decoy_rate_a: float, decoy_rate_b: float) -> float | None:
    """(1 − decoy_A) / (1 − decoy_B); None when the grounded arm is all decoy (nothing to retain)."""
    kept_b = 1.0 - decoy_rate_b
    if kept_b <= 0:
        return None
    return round((1.0 - decoy_rate_a) / kept_b, 12)  # so 0.95 / 1.0 grades as 0.95, not 0.9499999


def grade(kept: float) -> str:
    """The grade of a significant effect with retention ``kept``."""
    if kept >= ROBUST_MIN:
        return "robust"
    if kept >= DEGRADED_MIN:
        return "degraded"
    if kept >= BRITTLE_MIN:
        return "brittle"
    return "collapse"


def decide(e: Evidence) -> Verdict:
    """The rules, in order; the first that applies decides."""
    if e.trials <= 0:
        return Verdict("inconclusive", None, "no trials")
    share = e.errors / e.trials
    if share > MAX_ERROR_SHARE:
        return Verdict("inconclusive", None, f"{share:.0%} of trials are errors (more than {MAX_ERROR_SHARE:.0%})")
    if _missing(e.grounded_correct):
        return Verdict("inconclusive", None, f"no {_GROUNDED_CONDITION} trials to compare with")
    assert e.grounded_correct is not None
    if e.grounded_correct < MIN_GROUNDED_CORRECT:
        return Verdict("inconclusive", None, f"calls the expected tool in only {e.grounded_correct:.0%} of "
                                             f"{_GROUNDED_CONDITION} trials (less than {MIN_GROUNDED_CORRECT:.0%})")
    if _missing(e.p) or _missing(e.floor) or _missing(e.decoy_rate_a) or _missing(e.decoy_rate_b):
        return Verdict("inconclusive", None, "no decoy test: an arm of the contrast has no trials")
    assert e.p is not None and e.floor is not None and e.decoy_rate_a is not None and e.decoy_rate_b is not None
    if e.decoy_rate_a == 0 and e.decoy_rate_b == 0:  # no event to permute: more prompts cannot make a test
        return Verdict("inconclusive", None, "no trial called the decoy (nothing fired), so there is no effect to "
                                             "test; more prompts would not change that")
    if e.floor > ALPHA:
        return Verdict("inconclusive", None, f"the design's smallest attainable p ({e.floor:.2g}) is above "
                                             f"alpha {ALPHA:g}: add prompts")
    kept = retention(e.decoy_rate_a, e.decoy_rate_b)
    if kept is None:
        return Verdict("inconclusive", None, f"calls the decoy in every {_GROUNDED_CONDITION} trial")
    if e.p > ALPHA:
        return Verdict("no effect", kept, f"decoy test not significant (p {e.p:.2g} > {ALPHA:g})")
    return Verdict(grade(kept), kept, f"keeps {kept:.0%} of decoy-free trials (p {e.p:.2g})")


def _evidence(summary: Summary, run: str, probe: str, model: str, board: dict[str, Any]) -> Evidence:
    grounded = summary.conditions.filter(
        (pl.col("run") == run) & (pl.col("probe") == probe) & (pl.col("model") == model)
        & (pl.col("condition") == _GROUNDED_CONDITION) & (pl.col("rate") == _GROUNDED_OUTCOME)).to_dicts()
    contrast = summary.contrasts.filter(
        (pl.col("run") == run) & (pl.col("probe") == probe) & (pl.col("model") == model)
        & (pl.col("contrast") == _CONTRAST)).to_dicts()
    c = contrast[0] if contrast else {}
    return Evidence(trials=board["trials"], errors=board["errors"],
                    grounded_correct=grounded[0]["value"] if grounded else None,
                    decoy_rate_a=c.get("rate_a"), decoy_rate_b=c.get("rate_b"),
                    p=c.get(f"p_{HEADLINE_LEVEL}"), floor=c.get(f"floor_{HEADLINE_LEVEL}"))


def scorecard_table(summary: Summary) -> pl.DataFrame:
    """One row per run × misselection probe × model, in report order."""
    rows = []
    unfinished = {run: (done, total) for run, done, total in incomplete_runs(summary)}
    for board in summary.leaderboard.filter(pl.col("kind") == KIND).iter_rows(named=True):
        e = _evidence(summary, board["run"], board["probe"], board["model"], board)
        v = decide(e)
        if board["run"] in unfinished:  # a verdict on part of a grid grades prompts the rest would change
            done, total = unfinished[board["run"]]
            v = Verdict("inconclusive", None, f"the grid is incomplete: {done:,} of {total:,} trials written; "
                                              "a scorecard grades only a finished grid (rerun to finish it)")
        rows.append({"run": board["run"], "probe": board["probe"], "model": board["model"], "verdict": v.verdict,
                     "retention": v.retention, "reason": v.reason, "decoy_rate_a": e.decoy_rate_a,
                     "decoy_rate_b": e.decoy_rate_b, "p": e.p, "floor": e.floor,
                     "grounded_correct": e.grounded_correct, "error_share": e.errors / e.trials if e.trials else None})
    return pl.DataFrame(rows, schema=_SCORECARD_SCHEMA)


def settings() -> dict[str, Any]:
    """The thresholds, as the JSON summary records them."""
    return {"kind": KIND, "contrast": _CONTRAST, "level": HEADLINE_LEVEL, "alpha": ALPHA,
            "max_error_share": MAX_ERROR_SHARE, "min_grounded_correct": MIN_GROUNDED_CORRECT,
            "robust_min": ROBUST_MIN, "degraded_min": DEGRADED_MIN, "brittle_min": BRITTLE_MIN}

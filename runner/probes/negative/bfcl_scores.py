"""BFCL's per-category accuracy for an imported run, beside trialgrid's verdict, and why they differ.

A run of ``trialgrid import bfcl`` cases carries two verdicts per trial. BFCL's leaderboard
reports, per category, the plain mean of its verdict over entries; that is ``bfcl acc`` here
(over trials, which is the same with one run per case). trialgrid's ``passed`` rate sits
beside it with a 95% tilted Korn–Graubard cluster interval (cases are the clusters). The
disagreement table counts trials where the verdicts differ, by direction and reason, so a
user sees which of trialgrid's stances (docs/bfcl.md) moved the number.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from runner.core.constants import INTERVAL_METHOD
from runner.core.views import Format, ProbeView, ViewColumn
from stats import INTERVAL_NAMES, cluster_rate_ci

_COLUMNS = ("model", "case_id", "status", "passed", "reasons", "bfcl_passed", "bfcl_category", "bfcl_error")


def _bfcl_rows(frame: Any, probe_name: str) -> pl.DataFrame:
    """The probe's scored BFCL trials (``frame``: the run's trials, lazy or not)."""
    lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    if "bfcl_category" not in lazy.collect_schema().names():
        return pl.DataFrame()
    return (lazy.filter((pl.col("probe") == probe_name) & (pl.col("status") == "ok")
                        & pl.col("bfcl_category").is_not_null())
            .select(_COLUMNS).collect())


_CATEGORY_COLUMNS = (
    ViewColumn("model", "model"), ViewColumn("category", "category"),
    ViewColumn("cases", "cases", Format.COUNT), ViewColumn("trials", "trials", Format.COUNT),
    ViewColumn("bfcl_accuracy", "bfcl acc", Format.RATE),
    ViewColumn("passed", "passed", Format.RATE, lo="passed_lo", hi="passed_hi"),
    ViewColumn("differ", "differ", Format.COUNT),
)
_REASON_COLUMNS = (ViewColumn("model", "model"), ViewColumn("category", "category"), ViewColumn("reason", "reason"),
                  ViewColumn("trials", "trials", Format.COUNT))


def _category_table(rows: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """Per model × BFCL category: cases, trials, BFCL's accuracy, trialgrid's passed rate and its interval."""
    out = []
    for (model, category), group in rows.sort("model", "bfcl_category").group_by(
            ["model", "bfcl_category"], maintain_order=True):
        cells = group.group_by("case_id").agg(pl.len().alias("n"), pl.col("passed").cast(pl.Int64).sum().alias("hits"),
                                              pl.col("bfcl_passed").cast(pl.Int64).sum().alias("bfcl_hits"))
        ci = cluster_rate_ci(np.arange(cells.height), cells["hits"].to_numpy(), cells["n"].to_numpy(),
                             method=INTERVAL_METHOD, seed=seed)
        out.append({"model": model, "category": category, "cases": cells.height, "trials": group.height,
                    "bfcl_accuracy": group["bfcl_passed"].mean(), "passed": group["passed"].mean(),
                    "passed_lo": ci.confidence_interval.low, "passed_hi": ci.confidence_interval.high,
                    "differ": int((group["passed"] != group["bfcl_passed"]).sum())})
    return pl.DataFrame(out)


def _disagreement_reason(passed: bool, reasons: list[str] | None, bfcl_error: str | None) -> str:
    """Why the two verdicts differ on one trial, as a short label."""
    if passed:
        return f"BFCL fails it: {bfcl_error}"
    first = (reasons or ["?"])[0]
    if "arguments do not parse" in first:
        return "trialgrid fails it: unparsable call is a call, not an abstention"
    if first.startswith("action no_call, expected ask_user"):
        return "trialgrid fails it: no call but no question either (must-ask)"
    if first.startswith("unrequested field"):
        return "trialgrid fails it: unrequested field"
    if " missing (expected" in first:
        return "trialgrid fails it: argument missing"
    if "(expected" in first:
        return "trialgrid fails it: value differs under trialgrid's normalisation"
    return "trialgrid fails it: " + first.split(":")[0][:60]


def _disagreement_table(rows: pl.DataFrame) -> pl.DataFrame:
    differ = rows.filter(pl.col("passed") != pl.col("bfcl_passed"))
    if differ.height == 0:
        return pl.DataFrame({"model": [], "category": [], "reason": [], "trials": []},
                            schema={"model": pl.String, "category": pl.String, "reason": pl.String, "trials": pl.Int64})
    labelled = differ.with_columns(pl.struct("passed", "reasons", "bfcl_error").map_elements(
        lambda r: _disagreement_reason(r["passed"], r["reasons"], r["bfcl_error"]), return_dtype=pl.String).alias("reason"))
    return (labelled.group_by("model", pl.col("bfcl_category").alias("category"), "reason")
            .agg(pl.len().cast(pl.Int64).alias("trials")).sort("model", "category", "trials", descending=[False, False, True]))


def bfcl_views(probe_name: str, frame: Any, *, seed: int) -> list[ProbeView]:
    """BFCL's per-category accuracy beside ``passed``, and the disagreements by reason (none for other runs)."""
    rows = _bfcl_rows(frame, probe_name)
    if rows.height == 0:
        return []
    return [
        ProbeView("bfcl_categories", f"{probe_name} · BFCL categories: BFCL's own accuracy beside trialgrid's passed",
                  "bfcl acc is BFCL's verdict averaged per category (its leaderboard's accuracy); passed is "
                  f"trialgrid's strict verdict with a 95% {INTERVAL_NAMES[INTERVAL_METHOD]} over cases; differ counts "
                  "trials where the two verdicts differ (docs/bfcl.md).",
                  _category_table(rows, seed), _CATEGORY_COLUMNS),
        ProbeView("bfcl_disagreements", f"{probe_name} · trials where the verdicts differ, by reason",
                  "Which rule made the two verdicts differ: a BFCL rule trialgrid does not apply (types, null "
                  "or empty extras), or one of trialgrid's stances (docs/bfcl.md).",
                  _disagreement_table(rows), _REASON_COLUMNS),
    ]

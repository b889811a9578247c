"""Run-to-run consistency of each model: pass^k per probe × model × condition, cases as the unit.

Why this exists: a headline rate says how often, not how reliably. pass^k (``stats.pass_hat_k``,
tau-bench's C(c, k) / C(n, k) per case, averaged over cases with an interval over cases) is the
chance that k runs of one case all succeed. "Success" is the headline rate's good outcome: a
pass for a pass/fail probe (``passed``), else a trial *without* the headline event (no decoy
call, no wrong answer). ``every_run`` is the share of cases that succeeded in every one of their
runs (pass^n at each case's own n): for pass/fail probes, the share that pass a CI gate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE

if TYPE_CHECKING:
    from runner.analysis.leaderboard import RunAnalysis

CONSISTENCY_SCHEMA = pl.Schema({
    "run": pl.String(), "probe": pl.String(), "kind": pl.String(), "model": pl.String(), "condition": pl.String(),
    "success": pl.String(), "k": pl.Int64(), "pass_k": pl.Float64(), "ci_lo": pl.Float64(), "ci_hi": pl.Float64(),
    "cases": pl.Int64(), "every_run": pl.Float64(),
})


def success_label(head: str, success_rates: frozenset[str]) -> str:
    """What one run must do to count as a success for pass^k."""
    return head if head in success_rates else f"no {head}"


def consistency_table(runs: Sequence[RunAnalysis], success_rates: frozenset[str]) -> pl.DataFrame:
    """One row per run × probe × model × condition × k (1 … the most runs any case has there)."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        for a in run.probes:
            head = a.rates[0]
            good = head in success_rates
            cells = a.cells.filter(pl.col(f"n_{head}") > 0)
            for model, condition in a.conditions.select("model", "condition").iter_rows():  # report order
                sub = cells.filter((pl.col("model") == model) & (pl.col("condition") == condition))
                if sub.height == 0:
                    continue
                n = sub[f"n_{head}"].to_numpy()
                hits = sub[head].to_numpy()
                c = hits if good else n - hits
                case = sub["case_id"].to_numpy()
                every = float(np.mean(c == n))
                for k in range(1, int(n.max()) + 1):
                    res = stats.pass_hat_k(case, c, n, k, confidence_level=CONFIDENCE)
                    rows.append({"run": run.label, "probe": a.probe, "kind": a.kind, "model": model,
                                 "condition": condition, "success": success_label(head, success_rates), "k": k,
                                 "pass_k": res.statistic, "ci_lo": res.confidence_interval.low,
                                 "ci_hi": res.confidence_interval.high, "cases": res.n_cases, "every_run": every})
    return pl.DataFrame(rows, schema=CONSISTENCY_SCHEMA)

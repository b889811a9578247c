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
from typing import TYPE_CHECKING

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


#: every k up to this is in the table; past it, powers of two and the largest k. A 1M-trial quickstart has
#: hundreds of runs a case: every k made the table 77,000 rows, a third of the report's CPU to write as JSON,
#: for values no one reads between pass^64 and pass^427.
K_EVERY = 16


def kept_ks(k: np.ndarray, top: int) -> np.ndarray:
    """The mask of the k the table keeps: 1 … ``K_EVERY``, then powers of two, and ``top`` itself."""
    return (k <= K_EVERY) | ((k & (k - 1)) == 0) | (k == top)


def success_label(head: str, success_rates: frozenset[str]) -> str:
    """What one run must do to count as a success for pass^k."""
    return head if head in success_rates else f"no {head}"


def consistency_table(runs: Sequence[RunAnalysis], success_rates: frozenset[str]) -> pl.DataFrame:
    """One row per run × probe × model × condition × k: k = 1 … ``K_EVERY``, then powers of two, and the most
    runs any case has there (``kept_ks``)."""
    blocks: list[pl.DataFrame] = []
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
                # every k at once: exact C(c, k) / C(n, k) per k grows as (runs a case)² big-number operations
                top = int(n.max())
                curve = stats.pass_hat_k_curve(case, c, n, top, confidence_level=CONFIDENCE)
                keep = kept_ks(np.asarray(curve.k), top)
                size = int(keep.sum())
                blocks.append(pl.DataFrame({
                    "run": [run.label] * size, "probe": [a.probe] * size, "kind": [a.kind] * size,
                    "model": [model] * size, "condition": [condition] * size,
                    "success": [success_label(head, success_rates)] * size, "k": np.asarray(curve.k)[keep],
                    "pass_k": np.asarray(curve.statistic)[keep], "ci_lo": np.asarray(curve.low)[keep],
                    "ci_hi": np.asarray(curve.high)[keep], "cases": np.asarray(curve.n_cases)[keep],
                    "every_run": np.full(size, every)}, schema=CONSISTENCY_SCHEMA))
    return pl.concat(blocks) if blocks else pl.DataFrame(schema=CONSISTENCY_SCHEMA)

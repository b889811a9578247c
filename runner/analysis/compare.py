"""Paired comparisons on shared cases: one model against another, and (for ``diff``) one run against another.

Why this exists: "is model X better than model Y on our cases?" has one honest
answer, on the cases both answered, paired and clustered on the case. Each
comparison here matches cells on (case, condition), keeps the cells both sides
have, and reports the difference of pooled rates A − B with

- the report's own A − B cluster interval (``stats.cluster_rate_ci`` with ``arm``,
  the interval every contrast of the report uses, on the matched per-cell counts:
  whatever that interval learns about pairing flows through here unchanged);
- the paired cluster permutation p (``stats.paired_permutation_test``: A and B
  labels swapped within case, exact where the design allows) and its floor;
- Holm's adjustment across the family (every pair of models × every rate of every
  probe the summary holds), and the verdict at ``ALPHA`` on the adjusted p.

``paired_contrast`` is the one place a paired difference is computed; ``diff``
(``runner.analysis.diff``) calls it for OLD against NEW.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.probes import PROBES

if TYPE_CHECKING:
    from runner.analysis.leaderboard import RunAnalysis

#: family-wise error rate of the model comparisons' verdicts (Holm across the family)
ALPHA = 0.05


@dataclass(frozen=True)
class PairedContrast:
    """A − B on matched (case, condition) cells: the difference, its interval, the paired test and its floor."""

    rate_a: float
    rate_b: float
    difference: float
    ci_lo: float
    ci_hi: float
    interval_method: str
    p: float
    floor: float
    floor_log10: float | None
    method: str
    mc_se: float | None
    cases: int
    cells: int
    #: half-width of the interval at the family's strictest level: a smaller observed change cannot be told from 0
    detectable: float


def paired_contrast(case: np.ndarray, hits_a: np.ndarray, n_a: np.ndarray, hits_b: np.ndarray, n_b: np.ndarray, *,
                    family_level: float, seed: int) -> PairedContrast:
    """A − B on matched cells (one entry per (case, condition) both sides have; ``case`` ids repeat).

    ``family_level`` is the two-sided level of the strictest test of the family (Holm's first step, α / m):
    ``detectable`` is half the width of the same interval at confidence 1 − that level.
    """
    cluster = np.concatenate([case, case])
    arm = np.concatenate([np.ones(case.size, np.int64), np.zeros(case.size, np.int64)])
    hits = np.concatenate([hits_a, hits_b])
    n = np.concatenate([n_a, n_b])
    ci = stats.cluster_rate_ci(cluster, hits, n, arm=arm, confidence_level=CONFIDENCE, method=INTERVAL_METHOD)
    wide = stats.cluster_rate_ci(cluster, hits, n, arm=arm, confidence_level=1.0 - family_level,
                                 method=INTERVAL_METHOD)
    test = stats.paired_permutation_test(case, hits_a, n_a, hits_b, n_b, seed=seed)
    lo, hi = wide.confidence_interval
    return PairedContrast(
        rate_a=test.rate_a, rate_b=test.rate_b, difference=test.statistic,
        ci_lo=ci.confidence_interval.low, ci_hi=ci.confidence_interval.high, interval_method=ci.interval_method,
        p=test.pvalue, floor=test.attainable_floor, floor_log10=test.floor_log10, method=test.method,
        mc_se=test.mc_stderr, cases=test.n_clusters, cells=int(case.size), detectable=float((hi - lo) / 2),
    )


COMPARISON_SCHEMA = pl.Schema({
    "probe": pl.String(), "kind": pl.String(), "rate": pl.String(), "model_a": pl.String(), "run_a": pl.String(),
    "model_b": pl.String(), "run_b": pl.String(), "cases": pl.Int64(), "cells": pl.Int64(),
    "rate_a": pl.Float64(), "rate_b": pl.Float64(), "difference": pl.Float64(), "ci_lo": pl.Float64(),
    "ci_hi": pl.Float64(), "interval_method": pl.String(), "p": pl.Float64(), "floor": pl.Float64(),
    "floor_log10": pl.Float64(), "method": pl.String(), "mc_se": pl.Float64(), "p_holm": pl.Float64(), "family": pl.Int64(),
    "detectable": pl.Float64(), "verdict": pl.String(),
})

#: the caption every rendering of the comparisons quotes
RULE = (f"A − B on the cases both answered, matched on case × condition; interval: the report's A − B cluster "
        f"interval; p: paired cluster permutation (A and B swapped within case, exact where the design allows); "
        f"Holm across every pair × rate × probe shown (family-wise rate {ALPHA:g}); A higher / B higher only "
        f"when the Holm-adjusted p ≤ {ALPHA:g}.")


def _verdict(diff: float, p_holm: float) -> str:
    """Which side's rate is higher, under the family rule (whether higher is better depends on the rate)."""
    if not p_holm <= ALPHA or diff == 0 or np.isnan(diff):
        return "no evidence"
    return "A higher" if diff > 0 else "B higher"


def _diagnostics(kind: str) -> frozenset[str]:
    """A probe's reply rates (empty replies, broken calls): what the model sent, not what it found; not compared."""
    cls = PROBES.get(kind)
    return frozenset(cls.reply_rates) if cls is not None else frozenset()


def model_comparisons(runs: Sequence[RunAnalysis], seed: int) -> pl.DataFrame:
    """Every pair of (run, model) sides that share cases of one probe, for every rate (but the probe's reply
    diagnostics): one row each, Holm-adjusted across all of them.

    Sides of different runs are compared when the runs hold the same probe name (runs given together to
    ``report``); a pair with no (case, condition) cell in common is left out.
    """
    sides: dict[str, list[tuple[str, str, str, pl.DataFrame, tuple[str, ...]]]] = {}
    for run in runs:
        for a in run.probes:
            for model in a.conditions["model"].unique(maintain_order=True).to_list():  # sweep order
                sub = a.cells.filter(pl.col("model") == model)
                sides.setdefault(a.probe, []).append((run.label, str(model), a.kind, sub, a.rates))
    pending: list[tuple[dict[str, Any], tuple[np.ndarray, ...]]] = []
    for probe, members in sides.items():
        for (run_a, model_a, kind, cells_a, rates), (run_b, model_b, _, cells_b, rates_b) in \
                itertools.combinations(members, 2):
            joined = cells_a.join(cells_b, on=["case_id", "condition"], suffix="_b")
            if joined.height == 0:
                continue
            for rate in (r for r in rates if r in rates_b and r not in _diagnostics(kind)):
                keep = joined.filter((pl.col(f"n_{rate}") > 0) & (pl.col(f"n_{rate}_b") > 0))
                if keep.height == 0:
                    continue
                arrays = (keep["case_id"].to_numpy(), keep[rate].to_numpy(), keep[f"n_{rate}"].to_numpy(),
                          keep[f"{rate}_b"].to_numpy(), keep[f"n_{rate}_b"].to_numpy())
                pending.append(({"probe": probe, "kind": kind, "rate": rate, "model_a": model_a, "run_a": run_a,
                                 "model_b": model_b, "run_b": run_b}, arrays))
    m = len(pending)
    rows = []
    for key, (case, ha, na, hb, nb) in pending:
        c = paired_contrast(case, ha, na, hb, nb, family_level=ALPHA / m, seed=seed)
        rows.append({**key, "cases": c.cases, "cells": c.cells, "rate_a": c.rate_a, "rate_b": c.rate_b,
                     "difference": c.difference, "ci_lo": c.ci_lo, "ci_hi": c.ci_hi,
                     "interval_method": c.interval_method, "p": c.p, "floor": c.floor, "floor_log10": c.floor_log10,
                     "method": c.method, "mc_se": c.mc_se, "family": m, "detectable": c.detectable})
    adjusted = stats.holm([r["p"] for r in rows]) if rows else np.zeros(0)
    for r, q in zip(rows, adjusted, strict=True):
        r["p_holm"] = float(q)
        r["verdict"] = _verdict(r["difference"], float(q))
    return pl.DataFrame(rows, schema=COMPARISON_SCHEMA)

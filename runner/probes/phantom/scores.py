"""Field-level scores of the phantom probe: auditor and containment baseline side by side.

Units are (trace, run, field) tuples, so the same field of two traces (or of two
audits of one trace) counts separately: each trial stores its own ``<scorer>_tp/_fp/_fn``
counts (``PhantomProbe.run``), and ``field_table`` pools them per model × condition
with the empty-set conventions of ``stats.field_scores`` (nothing predicted →
precision 1; nothing to find → recall 1) and tilted Korn–Graubard cluster intervals over
traces (``INTERVAL_METHOD``; analytic, no resamples).
This is the one place field precision / recall is computed: ``Summary.fields`` is
this view. Auditor errors are counted in their own view and left out of the
scores — an unparsable reply is not an empty prediction — and the baseline is
scored on the same trials, so the two compare like with like. The disagreement
listing holds every audit where the auditor and the baseline flagged different
fields (or the auditor errored); the report writes it, when asked, to
``<probe>.disagreements.jsonl`` (``trialgrid report --listings DIR``, or beside ``--csv``), never into the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD
from runner.core.views import FIELD_SCHEMA, FIELDS, Format, ProbeView, ViewColumn

#: the scorers whose ``<scorer>_tp/_fp/_fn`` columns a phantom trial writes
_SCORERS = ("auditor", "baseline")
_COLUMNS = ("model", "condition", "case_id", "run", "pred_fields", "baseline_fields", "gold_fields",
            "auditor_error", "auditor_error_detail")
#: written since gold became optional; a run written before has no flag-rate or agreement views
_FIELD_UNIT_COLUMNS = ("call_fields", "conversation")
_LISTING_SCHEMA = pl.Schema({"model": pl.String(), "trace": pl.String(), "condition": pl.String(), "run": pl.Int64(),
                   "auditor_error": pl.String(), "detail": pl.String(), "auditor_only": pl.List(pl.String),
                   "baseline_only": pl.List(pl.String), "auditor": pl.List(pl.String),
                   "baseline": pl.List(pl.String), "gold": pl.List(pl.String)})
_ERROR_SCHEMA = pl.Schema({"model": pl.String, "condition": pl.String, "trials": pl.Int64, "scored": pl.Int64,
                 "auditor_errors": pl.Int64, "parse_errors": pl.Int64, "transport_errors": pl.Int64})


def _pooled_scores(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and F1 of pooled counts, with ``stats.field_scores``' empty-set conventions."""
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, (2 * precision * recall / (precision + recall) if precision + recall else 0.0)


def _ratio_ci(cluster: np.ndarray, num: np.ndarray, den: np.ndarray, seed: int) -> tuple[float, float]:
    if den.sum() == 0:
        return float("nan"), float("nan")
    ci = stats.cluster_rate_ci(cluster, num, den, confidence_level=CONFIDENCE, seed=seed,
                               method=INTERVAL_METHOD).confidence_interval
    return ci.low, ci.high


def field_table(trials: pl.LazyFrame | pl.DataFrame, probe: str, seed: int,
                scorers: Sequence[str] = _SCORERS) -> pl.DataFrame:
    """Pooled field-level precision / recall per model × condition × scorer, with cluster intervals over traces.

    Scored on the trials where every scorer scored (an auditor error is not an empty
    prediction, and the baseline is held to the same trials).
    """
    lazy = trials.lazy() if isinstance(trials, pl.DataFrame) else trials
    present = lazy.collect_schema().names()
    scorers = [s for s in scorers if all(f"{s}_{k}" in present for k in ("tp", "fp", "fn"))]
    if not scorers:
        return pl.DataFrame(schema=FIELD_SCHEMA)
    cols = [f"{s}_{k}" for s in scorers for k in ("tp", "fp", "fn")]
    per_cell = (lazy.filter((pl.col("probe") == probe) & (pl.col("status") == "ok"))
                .filter(pl.all_horizontal([pl.col(c).is_not_null() for c in cols]))
                .group_by("model", "condition", "case_id")
                .agg([pl.len().alias("trials")] + [pl.col(c).cast(pl.Int64).sum() for c in cols])
                .sort("model", "condition", "case_id").collect())
    rows = []
    for (model, condition), sub in per_cell.group_by("model", "condition", maintain_order=True):
        cluster = sub["case_id"].to_numpy()
        for s in scorers:
            tp, fp, fn = (sub[f"{s}_{k}"].to_numpy() for k in ("tp", "fp", "fn"))
            t, f_p, f_n = int(tp.sum()), int(fp.sum()), int(fn.sum())
            precision, recall, f1 = _pooled_scores(t, f_p, f_n)
            p_lo, p_hi = _ratio_ci(cluster, tp, tp + fp, seed)
            r_lo, r_hi = _ratio_ci(cluster, tp, tp + fn, seed)
            rows.append({"model": model, "condition": condition, "scorer": s, "trials": int(sub["trials"].sum()),
                         "tp": t, "fp": f_p, "fn": f_n, "precision": precision, "precision_lo": p_lo,
                         "precision_hi": p_hi, "recall": recall, "recall_lo": r_lo, "recall_hi": r_hi, "f1": f1})
    return pl.DataFrame(rows, schema=FIELD_SCHEMA)


def error_table(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per model × condition: trials, trials scored, auditor errors (parse / transport)."""
    out = []
    for (model, condition), group in rows.group_by(["model", "condition"], maintain_order=True):
        errors = group["auditor_error"]
        out.append({"model": model, "condition": condition, "trials": group.height,
                    "scored": int(errors.is_null().sum()), "auditor_errors": int(errors.is_not_null().sum()),
                    "parse_errors": int((errors == "parse").sum()),
                    "transport_errors": int((errors == "transport").sum())})
    return pl.DataFrame(out, schema=_ERROR_SCHEMA)


def disagreements(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """Every audit where auditor and baseline differ, with who flagged what against gold."""
    out = []
    for r in rows.sort("model", "condition", "case_id", "run").to_dicts():
        base, gold = set(r["baseline_fields"] or []), set(r["gold_fields"] or [])
        if r["auditor_error"] is not None:
            out.append({"model": r["model"], "trace": r["case_id"], "condition": r["condition"], "run": r["run"],
                        "auditor_error": r["auditor_error"], "detail": r["auditor_error_detail"],
                        "baseline": sorted(base), "gold": sorted(gold)})
            continue
        pred = set(r["pred_fields"] or [])
        if pred == base:
            continue
        out.append({"model": r["model"], "trace": r["case_id"], "condition": r["condition"], "run": r["run"],
                    "auditor_only": sorted(pred - base), "baseline_only": sorted(base - pred),
                    "auditor": sorted(pred), "baseline": sorted(base), "gold": sorted(gold)})
    return out


def _phantom_rows(frame: pl.LazyFrame | pl.DataFrame, probe_name: str) -> pl.DataFrame:
    lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    present = set(lazy.collect_schema().names())
    cols = list(_COLUMNS) + [c for c in _FIELD_UNIT_COLUMNS if c in present]
    return lazy.filter((pl.col("probe") == probe_name) & (pl.col("status") == "ok")).select(cols).collect()


_FIELD_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"), ViewColumn("scorer", "scorer"),
                 ViewColumn("trials", "trials", Format.COUNT),
                 ViewColumn("precision", "P", Format.SCORE, lo="precision_lo", hi="precision_hi"),
                 ViewColumn("recall", "R", Format.SCORE, lo="recall_lo", hi="recall_hi"),
                 ViewColumn("f1", "F1", Format.SCORE), ViewColumn("tp", "tp", Format.COUNT),
                 ViewColumn("fp", "fp", Format.COUNT), ViewColumn("fn", "fn", Format.COUNT))
_ERROR_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"),
                 ViewColumn("trials", "trials", Format.COUNT), ViewColumn("scored", "scored", Format.COUNT),
                 ViewColumn("auditor_errors", "auditor errors", Format.COUNT),
                 ViewColumn("parse_errors", "parse", Format.COUNT),
                 ViewColumn("transport_errors", "transport", Format.COUNT))
_LISTING_COLUMNS = tuple(ViewColumn(c, c.replace("_", " ")) for c in _LISTING_SCHEMA)


_FLAG_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"), ViewColumn("field", "field"),
                 ViewColumn("audits", "audits", Format.COUNT), ViewColumn("conversations", "conv.", Format.COUNT),
                 ViewColumn("baseline_rate", "baseline flags", Format.RATE, lo="baseline_lo", hi="baseline_hi"),
                 ViewColumn("auditor_rate", "auditor flags", Format.RATE, lo="auditor_lo", hi="auditor_hi"))
_AGREEMENT_COLUMNS = (ViewColumn("model", "model"), ViewColumn("condition", "condition"),
                      ViewColumn("units", "fields", Format.COUNT), ViewColumn("both", "both", Format.COUNT),
                      ViewColumn("auditor_only", "auditor only", Format.COUNT),
                      ViewColumn("baseline_only", "baseline only", Format.COUNT),
                      ViewColumn("neither", "neither", Format.COUNT),
                      ViewColumn("kappa", "kappa", Format.SCORE, lo="kappa_lo", hi="kappa_hi"))


def gold_free_views(probe_name: str, fields: pl.DataFrame, *, seed: int) -> list[ProbeView]:
    """The views an audit without gold still has: flag rates per tool argument, agreement, and the two
    directions of disagreement (``runner.probes.phantom.report``)."""
    from runner.probes.phantom import report as R

    if fields.height == 0:
        return []
    interval = f"[{CONFIDENCE:.0%} {stats.INTERVAL_NAMES[INTERVAL_METHOD]} over conversations.]"
    views = [ProbeView("flag_rates", f"{probe_name} · how often each scorer calls a tool argument a phantom",
                       "Share of audited (call, argument) units each scorer flags, per tool argument; needs no "
                       f"gold. The auditor's share is over the audits it replied to. {interval}",
                       R.flag_rates(fields, seed), _FLAG_COLUMNS)]
    if fields["auditor"].is_not_null().any():
        split = R.disagreement_split(fields)
        views.append(ProbeView("agreement", f"{probe_name} · auditor–baseline agreement",
                               "Cohen's kappa over (audit, argument) units where the auditor replied. "
                               f"[{CONFIDENCE:.0%} cluster bootstrap percentile interval over conversations.]",
                               R.agreement(fields, seed), _AGREEMENT_COLUMNS))
        for key, what in ((R.AUDITOR_PHANTOM, "the auditor says phantom, the baseline found the value"),
                          (R.BASELINE_PHANTOM, "the baseline says phantom, the auditor saw it grounded")):
            table = split[key]
            views.append(ProbeView(key, f"{probe_name} · {what}", f"argument(s) where {what}", table,
                                   tuple(ViewColumn(c, c.replace("_", " ")) for c in table.columns), listing=True))
    return views


def phantom_views(probe_name: str, frame: pl.LazyFrame | pl.DataFrame, *, seed: int) -> list[ProbeView]:
    """Field precision / recall of auditor and baseline (where gold exists), auditor errors, the disagreement
    listing, and the views that need no gold (flag rates, agreement, disagreements by direction)."""
    from runner.probes.phantom.report import fields_from_rows

    rows = _phantom_rows(frame, probe_name)
    if rows.height == 0:
        return []
    listing = pl.DataFrame(disagreements(rows), schema=_LISTING_SCHEMA)
    gold_free = gold_free_views(probe_name, fields_from_rows(rows), seed=seed)
    return [
        ProbeView(FIELDS, f"{probe_name} · field-level scores, auditor vs containment baseline (same trials)",
                  "Field-level scores pooled over (trace, run, field) units, on the trials every scorer scored (an "
                  f"auditor error is not an empty prediction). [{CONFIDENCE:.0%} "
                  f"{stats.INTERVAL_NAMES[INTERVAL_METHOD]} over traces.] "
                  "Nothing predicted counts as precision 1; nothing to find as recall 1.",
                  field_table(frame, probe_name, seed), _FIELD_COLUMNS),
        ProbeView("auditor_errors", f"{probe_name} · auditor errors",
                  "Trials whose auditor reply could not be scored (parse: broke the reply contract; transport: the "
                  "call failed twice). They are counted here and left out of both scorers' field scores.",
                  error_table(rows), _ERROR_COLUMNS),
        ProbeView("disagreements", f"{probe_name} · audits where auditor and baseline differ",
                  "audit(s) where auditor and baseline differ (or the auditor errored)", listing, _LISTING_COLUMNS,
                  listing=True),
        *gold_free,
    ]


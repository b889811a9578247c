"""What an audit of traces without gold can say: flag rates per tool argument, agreement, disagreements by direction.

Production traces carry no gold, so precision and recall cannot be computed; what can be is how often each
scorer — the containment baseline, the auditor model — calls each tool argument a phantom, and how far the
two agree. All of it is computed on the field table (``audit.SCHEMA``: one row per (audit, field)),
which ``trialgrid audit`` writes and a phantom run's rows expand into (``fields_from_rows``), so the audit
directory and the sweep's report show the same numbers.

- The unit of inference is the conversation (``source.conversation_id``, else the source's trace id, else
  the trace): calls of one conversation share a context, so their verdicts are not independent. Every
  interval here is the clustered rate interval the rest of the report uses (``stats.cluster_rate_ci`` with
  ``INTERVAL_METHOD``, Korn–Graubard tilted), over conversations.
- Agreement is Cohen's kappa over (audit, field) units where the auditor replied (``stats.cohen_kappa``,
  cluster bootstrap over conversations).
- The disagreements are split by direction: the auditor says phantom where the baseline found the value
  (usually a value the context has but does not support, or a check the baseline cannot make), and the
  baseline says phantom where the auditor saw it grounded (usually paraphrase or derivation, which
  containment cannot see).
- Where gold exists, precision and recall per scorer, as the phantom probe's field scores.

The rates, kappa and gold scores also take the field table aggregated (``COUNT``: how many units share the
row's model, condition, conversation, field and verdicts; ``audit.read_counts``), so a million calls'
audit is reported from per (field, conversation) counts instead of the table itself: the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, INTERVAL_METHOD

ALL_FIELDS = "(all fields)"
#: the column of an aggregated field table: the number of (audit, field) units a row stands for
COUNT = "units_n"
_KAPPA_RESAMPLES = 2000


def fields_from_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """A phantom run's ``ok`` rows as the field table: one row per (audit, field of the call), without values
    or source ids (those live in the trace file; ``trialgrid audit --run`` joins them)."""
    if rows.height == 0 or "call_fields" not in rows.columns:
        return pl.DataFrame()
    frame = rows.select(
        "model", "condition", pl.col("run").cast(pl.Int32), pl.col("case_id").alias("trace"),
        pl.col("conversation").fill_null(pl.concat_str(pl.lit("x:"), pl.col("case_id"))),
        pl.col("call_fields").alias("field"), "baseline_fields", "pred_fields", "gold_fields",
        pl.col("auditor_error").is_null().alias("_replied"),
    ).explode("field").filter(pl.col("field").is_not_null())
    return frame.with_columns(
        pl.col("field").str.split_exact(".", 1).struct.field("field_0").alias("tool"),
        pl.col("baseline_fields").list.contains(pl.col("field")).fill_null(False).alias("baseline"),
        pl.when(pl.col("_replied")).then(pl.col("pred_fields").list.contains(pl.col("field")).fill_null(False))
        .otherwise(None).alias("auditor"),
        pl.when(pl.col("gold_fields").is_not_null()).then(pl.col("gold_fields").list.contains(pl.col("field")))
        .otherwise(None).alias("gold"),
    ).drop("baseline_fields", "pred_fields", "gold_fields", "_replied")


def _units(fields: pl.DataFrame) -> pl.DataFrame:
    """One row per unit: an aggregated table's rows repeated ``COUNT`` times (a unit table as it is)."""
    if COUNT not in fields.columns:
        return fields
    return fields.with_columns(pl.int_ranges(0, pl.col(COUNT)).alias("_r")).explode("_r").drop("_r", COUNT)


def _rate(cluster: np.ndarray, hits: np.ndarray, n: np.ndarray, seed: int) -> tuple[float, float, float]:
    if n.sum() == 0:
        return float("nan"), float("nan"), float("nan")
    res = stats.cluster_rate_ci(cluster, hits, n, confidence_level=CONFIDENCE, seed=seed, method=INTERVAL_METHOD)
    return res.statistic, res.confidence_interval.low, res.confidence_interval.high


FLAG_SCHEMA = pl.Schema({
    "model": pl.String, "condition": pl.String, "field": pl.String, "audits": pl.Int64, "conversations": pl.Int64,
    "baseline_flagged": pl.Int64, "baseline_rate": pl.Float64, "baseline_lo": pl.Float64, "baseline_hi": pl.Float64,
    "auditor_scored": pl.Int64, "auditor_flagged": pl.Int64, "auditor_rate": pl.Float64, "auditor_lo": pl.Float64,
    "auditor_hi": pl.Float64})


def _physical(col: pl.Series) -> pl.Series:
    """A number per distinct value of the column (its categorical code; nulls as the empty string)."""
    if col.dtype != pl.Categorical:
        col = col.cast(pl.String).cast(pl.Categorical)
    return col.fill_null("").to_physical()


def _key(columns: list[pl.Series]) -> tuple[np.ndarray, list[int]]:
    """One number per distinct combination of the string columns, ordered by the first column's code, then the
    second's, and so on, and how many codes each column has (its largest + 1). The codes (polars series, four
    bytes a row) become numpy one column at a time, so a million rows hold one column's beside the key."""
    codes = [_physical(c) for c in columns]
    sizes = [int(top) + 1 if isinstance(top := c.max(), int) else 1 for c in codes]
    key = np.zeros(len(columns[0]), np.int32 if math.prod(sizes) < 1 << 31 else np.int64)
    for code, size in zip(codes, sizes, strict=True):
        np.multiply(key, size, out=key)
        np.add(key, code.to_numpy().view(np.int32), out=key)  # codes below 2³¹: read as they are
    return key, sizes


def _picked(fields: pl.DataFrame, conv: pl.Series,
            rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """The conversations, weights (``COUNT``; 1 a row without it) and flags (baseline, auditor replied, auditor)
    of ``rows``, one group's. Taken a group at a time: a table read back in row groups gives numpy only copies,
    and the whole columns' were 60 MiB beside a million calls' counts."""
    weight = fields[COUNT].gather(rows).to_numpy() if COUNT in fields.columns else np.ones(len(rows), np.int64)
    auditor = fields["auditor"].gather(rows)
    return (conv.gather(rows).to_numpy(), weight,
            (fields["baseline"].gather(rows).fill_null(False).to_numpy().astype(bool),
             auditor.is_not_null().to_numpy(), auditor.fill_null(False).to_numpy().astype(bool)))


#: up to this many distinct codes, ``_groups`` finds each one's rows by a scan instead of sorting them all
_SCANNED_GROUPS = 64


def _groups(codes: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(code, its rows in input order) of each distinct code, in ascending order of the codes. A few codes (the
    fields of an audit) are scanned for one at a time: a million calls' sort order was 36 MiB beside the table."""
    if codes.size and int(codes.max()) < 1 << 20:
        distinct = np.flatnonzero(np.bincount(codes))  # no copy of the codes, no sort
        if distinct.size <= _SCANNED_GROUPS:
            for code in distinct:
                yield int(code), np.flatnonzero(codes == code)
            return
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    bounds = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1], True])
    for lo, hi in pairwise(bounds):
        yield int(ordered[lo]), order[lo:hi]


def _per_cluster(conv: np.ndarray, weight: np.ndarray, flags: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Per distinct conversation of one group, sorted: the conversation, the summed weight, and for each boolean
    column the weight summed where it holds."""
    order = np.argsort(conv, kind="stable")
    conv, w = conv[order], weight[order]
    starts = np.flatnonzero(np.r_[True, conv[1:] != conv[:-1]])
    sums = [np.add.reduceat(w, starts, dtype=np.int64)]
    sums += [np.add.reduceat(np.where(f[order], w, 0), starts, dtype=np.int64) for f in flags]
    return (conv[starts], *sums)


def flag_rates(fields: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Per model × condition × ``tool.arg`` (and over all fields): how often the baseline and the auditor flag
    it, with intervals clustered by conversation. The auditor's rate is over the audits it replied to.

    Summed per (field, conversation) in numpy, on integer codes of the keys: a million calls' counts hold three
    million rows, and polars' group_by over their strings was most of the report's memory (1.3 GiB at 1M calls).
    The conversation's number is its rank in sorted order, so each interval sees its clusters in the order the
    strings would give."""
    if fields.height == 0:
        return pl.DataFrame(schema=FLAG_SCHEMA)
    conv = fields["conversation"]
    conv = conv if conv.dtype.is_integer() else conv.rank("dense")
    # in ascending order of the keys, the fields of one (model, condition) come together
    triple, (_, _, names) = _key([fields["model"], fields["condition"], fields["field"]])
    out: list[dict[str, Any]] = []
    # per conversation of the current (model, condition), its sums over every field: the all-fields row from the
    # fields' own sums, never from a second pass over the whole table
    every = np.zeros((4, int(conv.max()) + 1), np.int64)  # type: ignore[arg-type]  # an integer column's max
    labels: tuple[str, str] | None = None

    def row(label: tuple[str, str, str], cl: np.ndarray, n: np.ndarray, b: np.ndarray, an: np.ndarray,
            a: np.ndarray) -> dict[str, Any]:
        br, blo, bhi = _rate(cl, b, n, seed)
        ar, alo, ahi = _rate(cl, a, an, seed)
        return {"model": label[0], "condition": label[1], "field": label[2], "audits": int(n.sum()),
                "conversations": int((n > 0).sum()), "baseline_flagged": int(b.sum()), "baseline_rate": br,
                "baseline_lo": blo, "baseline_hi": bhi, "auditor_scored": int(an.sum()),
                "auditor_flagged": int(a.sum()), "auditor_rate": ar, "auditor_lo": alo, "auditor_hi": ahi}

    def all_fields() -> None:
        if labels is not None:
            cl = np.flatnonzero(every[0])  # every conversation present has a unit (its weight is at least 1)
            out.append(row((*labels, ALL_FIELDS), cl, *every[:, cl]))
            every[:] = 0

    pair = -1
    for code, rows in _groups(triple):
        first = int(rows[0])
        label = (fields["model"][first], fields["condition"][first], fields["field"][first])
        if code // names != pair:
            all_fields()
            pair, labels = code // names, label[:2]
        cl, *sums = _per_cluster(*_picked(fields, conv, rows))
        out.append(row(label, cl, *sums))
        every[:, cl] += sums  # each conversation once in ``cl``
    all_fields()
    table = pl.DataFrame(out, schema=FLAG_SCHEMA)
    # the all-fields row last in each model × condition
    return table.sort("model", "condition", pl.col("field") == ALL_FIELDS, "field")


AGREEMENT_SCHEMA = pl.Schema({
    "model": pl.String, "condition": pl.String, "units": pl.Int64, "conversations": pl.Int64, "both": pl.Int64,
    "auditor_only": pl.Int64, "baseline_only": pl.Int64, "neither": pl.Int64, "observed": pl.Float64,
    "kappa": pl.Float64, "kappa_lo": pl.Float64, "kappa_hi": pl.Float64})


def agreement(fields: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Auditor–baseline agreement per model × condition: the 2 × 2 counts over (audit, field) units where the
    auditor replied, and Cohen's kappa with a cluster bootstrap interval over conversations."""
    if fields.height == 0:
        return pl.DataFrame(schema=AGREEMENT_SCHEMA)
    scored = _units(fields.filter(pl.col("auditor").is_not_null()))
    scored = scored.sort([c for c in ("model", "condition", "conversation", "trace") if c in scored.columns])
    out: list[dict[str, Any]] = []
    for (model, condition), sub in scored.group_by("model", "condition", maintain_order=True):
        a, b = sub["auditor"].to_numpy().astype(bool), sub["baseline"].to_numpy().astype(bool)
        res = stats.cohen_kappa(a, b, cluster=sub["conversation"].to_numpy(), n_resamples=_KAPPA_RESAMPLES,
                                confidence_level=CONFIDENCE, seed=seed)
        out.append({"model": model, "condition": condition, "units": sub.height,
                    "conversations": sub["conversation"].n_unique(), "both": int((a & b).sum()),
                    "auditor_only": int((a & ~b).sum()), "baseline_only": int((~a & b).sum()),
                    "neither": int((~a & ~b).sum()), "observed": res.observed_agreement, "kappa": res.statistic,
                    "kappa_lo": res.confidence_interval.low, "kappa_hi": res.confidence_interval.high})
    return pl.DataFrame(out, schema=AGREEMENT_SCHEMA)


#: the two directions of a disagreement, as the listing files name them
AUDITOR_PHANTOM, BASELINE_PHANTOM = "auditor_phantom", "baseline_phantom"
_KEEP = ("model", "condition", "run", "trace", "conversation", "field", "value", "gold", "trace_id", "span_id",
         "call_id")


def disagreement_split(fields: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The (audit, field) units where auditor and baseline differ, by direction: ``auditor_phantom`` (the
    auditor says phantom, the baseline found the value) and ``baseline_phantom`` (the reverse)."""
    if fields.height == 0:
        return {AUDITOR_PHANTOM: pl.DataFrame(), BASELINE_PHANTOM: pl.DataFrame()}
    cols = [c for c in _KEEP if c in fields.columns]
    scored = fields.filter(pl.col("auditor").is_not_null()).sort("model", "condition", "trace", "run", "field")
    return {AUDITOR_PHANTOM: scored.filter(pl.col("auditor") & ~pl.col("baseline")).select(cols),
            BASELINE_PHANTOM: scored.filter(~pl.col("auditor") & pl.col("baseline")).select(cols)}


GOLD_SCHEMA = pl.Schema({
    "model": pl.String, "condition": pl.String, "scorer": pl.String, "units": pl.Int64, "tp": pl.Int64,
    "fp": pl.Int64, "fn": pl.Int64, "precision": pl.Float64, "precision_lo": pl.Float64,
    "precision_hi": pl.Float64, "recall": pl.Float64, "recall_lo": pl.Float64, "recall_hi": pl.Float64})


def scores_against(fields: pl.DataFrame, truth: str, seed: int, scorers: tuple[str, ...] = ("auditor", "baseline"),
                   cluster: str = "conversation") -> pl.DataFrame:
    """Precision and recall of each scorer against the boolean column ``truth`` (gold, or a person's label),
    pooled over the units where ``truth`` and every scorer that replied are known, clustered by ``cluster``.
    A scorer with no verdict on those units (no auditor ran) is left out."""
    if fields.height == 0 or truth not in fields.columns:
        return pl.DataFrame(schema=GOLD_SCHEMA)
    known = _units(fields.filter(pl.col(truth).is_not_null()))
    out: list[dict[str, Any]] = []
    for (model, condition), sub in known.sort("model", "condition", cluster).group_by(
            "model", "condition", maintain_order=True):
        present = [s for s in scorers if sub[s].is_not_null().any()]
        sub = sub.filter(pl.all_horizontal([pl.col(s).is_not_null() for s in present])) if present else sub
        t = sub[truth].to_numpy().astype(bool)
        cl = sub[cluster].to_numpy()
        for s in present:
            p = sub[s].to_numpy().astype(bool)
            tp, fp, fn = (p & t).astype(np.int64), (p & ~t).astype(np.int64), (~p & t).astype(np.int64)
            pr, plo, phi = _rate(cl, tp, tp + fp, seed)
            rr, rlo, rhi = _rate(cl, tp, tp + fn, seed)
            out.append({"model": model, "condition": condition, "scorer": s, "units": sub.height,
                        "tp": int(tp.sum()), "fp": int(fp.sum()), "fn": int(fn.sum()), "precision": pr,
                        "precision_lo": plo, "precision_hi": phi, "recall": rr, "recall_lo": rlo,
                        "recall_hi": rhi})
    return pl.DataFrame(out, schema=GOLD_SCHEMA)

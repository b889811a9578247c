"""The judge probe's views: agreement with people (Cohen's kappa) and calibrated correct-rates.

Raters per trace: ``heuristic`` (substring), each judge model (its majority verdict
over runs), and ``ensemble`` (2-of-3 majority of the three models the probe names,
or of the sweep's models when there are exactly three). References: each human
annotator, the annotators' ``consensus`` (traces where everyone who labelled it
agrees), their ``majority`` (strict majority; ties left out) and the judges'
``ensemble`` majority. Kappa comes with a bootstrap interval over traces
(``stats.cohen_kappa``).

Calibrated rate: a judge's verdicts over all traces, corrected by how often people
agree with each verdict on the labelled traces —
rate = P(verdict) · P(human correct | verdict correct) + P(not verdict) · P(human correct | verdict incorrect).
Its interval resamples the labelled traces and the judged traces independently
(percentile, 4,000 resamples). ``stats`` has no function for this composite, so it
is computed here, with numpy.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

import stats
from runner.core.constants import CONFIDENCE, N_RESAMPLES
from runner.core.constants import VIEW_SEED as SEED
from runner.core.errors import UserError
from runner.core.views import Format, ProbeView, ViewColumn

if TYPE_CHECKING:
    from runner.probes.base import ReadableOutput

_ID_COLUMNS = ("trace_id", "session_id", "case_id", "id")
_LABELS = {"yes": True, "no": False, "correct": True, "incorrect": False, "true": True, "false": False,
           "1": True, "0": False, "y": True, "n": False}


def read_human_labels(paths: Iterable[Path]) -> pl.DataFrame:
    """(trace_id, annotator, label) from CSV files; a bad file or value is a located ``UserError``."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        try:
            handle = path.open(newline="", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read human labels: {exc.strerror}", file=path) from None
        with handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            id_col = next((c for c in _ID_COLUMNS if c in header), None)
            label_col = next((c for c in ("label", "human_label", "verdict") if c in header), None)
            if id_col is None or label_col is None:
                raise UserError(f"human labels need a trace id column ({' or '.join(_ID_COLUMNS)}) and a 'label' "
                                f"column; found: {', '.join(header) or 'no header'}", file=path, line=1)
            for row in reader:
                value = (row.get(label_col) or "").strip().lower()
                if value not in _LABELS:
                    raise UserError(f"label {row.get(label_col)!r} is not one of YES/NO, CORRECT/INCORRECT, "
                                    "true/false, 1/0", file=path, line=reader.line_num, key_path=(label_col,))
                rows.append({"trace_id": row[id_col], "annotator": (row.get("annotator") or path.stem).strip(),
                             "label": _LABELS[value]})
    return pl.DataFrame(rows, schema={"trace_id": pl.String, "annotator": pl.String, "label": pl.Boolean})


def rater_table(frame: pl.LazyFrame | pl.DataFrame, probe: str, ensemble: list[str] | None) -> pl.DataFrame:
    """One row per trace: a column per rater (heuristic, each model, ensemble), null where undecided."""
    lazy = frame.lazy() if isinstance(frame, pl.DataFrame) else frame
    rows = (lazy.filter((pl.col("probe") == probe) & (pl.col("status") == "ok"))
            .select("model", "case_id", "verdict", "heuristic_verdict").collect())
    traces = rows.group_by("case_id", maintain_order=True).agg(pl.col("heuristic_verdict").first().alias("heuristic"))
    models = rows["model"].unique(maintain_order=True).to_list()
    for model in models:
        per = (rows.filter((pl.col("model") == model) & pl.col("verdict").is_not_null())
               .group_by("case_id").agg(pl.col("verdict").cast(pl.Int64).sum().alias("yes"), pl.len().alias("n"))
               .select("case_id", pl.when(2 * pl.col("yes") > pl.col("n")).then(True)
                       .when(2 * pl.col("yes") < pl.col("n")).then(False).otherwise(None).alias(model)))
        traces = traces.join(per, on="case_id", how="left", maintain_order="left")
    members = ensemble or (models if len(models) == 3 else None)
    if members and all(m in models for m in members):
        votes = pl.sum_horizontal([pl.col(m).cast(pl.Int64) for m in members])
        complete = pl.all_horizontal([pl.col(m).is_not_null() for m in members])
        traces = traces.with_columns(pl.when(complete).then(votes >= 2).otherwise(None).alias("ensemble"))
    return traces


def human_references(labels: pl.DataFrame) -> pl.DataFrame:
    """Per trace: one column per annotator, plus ``consensus`` and ``majority``."""
    if labels.height == 0:
        return pl.DataFrame(schema={"case_id": pl.String})
    wide = labels.unique(["trace_id", "annotator"], keep="last", maintain_order=True).pivot(
        on="annotator", index="trace_id", values="label").rename({"trace_id": "case_id"})
    names = [c for c in wide.columns if c != "case_id"]
    yes = pl.sum_horizontal([pl.col(c).cast(pl.Int64) for c in names])
    count = pl.sum_horizontal([pl.col(c).is_not_null().cast(pl.Int64) for c in names])
    return wide.with_columns(
        pl.when((count >= 2) & ((yes == count) | (yes == 0))).then(yes > 0).otherwise(None).alias("consensus"),
        pl.when(2 * yes > count).then(True).when(2 * yes < count).then(False).otherwise(None).alias("majority"),
    )


def kappas(raters: pl.DataFrame, humans: pl.DataFrame) -> pl.DataFrame:
    """Cohen's kappa of every rater against every reference, on the traces both decided."""
    table = raters.join(humans, on="case_id", how="left", maintain_order="left") if humans.height else raters
    rater_cols = [c for c in raters.columns if c != "case_id"]
    references = [c for c in humans.columns if c != "case_id"] + (["ensemble"] if "ensemble" in raters.columns else [])
    out = []
    for ref in references:
        for rater in rater_cols:
            if rater == ref:
                continue
            both = table.filter(pl.col(rater).is_not_null() & pl.col(ref).is_not_null())
            if both.height < 2:
                out.append({"rater": rater, "reference": ref, "n": both.height, "kappa": float("nan"),
                            "lo": float("nan"), "hi": float("nan")})
                continue
            k = stats.cohen_kappa(both[rater].to_list(), both[ref].to_list(), n_resamples=N_RESAMPLES, seed=SEED)
            out.append({"rater": rater, "reference": ref, "n": both.height, "kappa": k.statistic,
                        "lo": k.confidence_interval.low, "hi": k.confidence_interval.high})
    return pl.DataFrame(out, schema={"rater": pl.String, "reference": pl.String, "n": pl.Int64, "kappa": pl.Float64,
                                     "lo": pl.Float64, "hi": pl.Float64})


def calibrated_rate(verdicts: np.ndarray, labelled_verdicts: np.ndarray, labelled_human: np.ndarray,
                    *, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> dict[str, float]:
    """P(verdict)·P(h | v) + P(not verdict)·P(h | not v), with a percentile bootstrap interval."""
    def estimate(v: np.ndarray, lv: np.ndarray, lh: np.ndarray) -> float:
        pos, neg = lv == 1, lv == 0
        if v.size == 0 or not pos.any() or not neg.any():
            return float("nan")
        rate = v.mean()
        return float(rate * lh[pos].mean() + (1 - rate) * lh[neg].mean())

    v = np.asarray(verdicts, dtype=np.int64)
    lv = np.asarray(labelled_verdicts, dtype=np.int64)
    lh = np.asarray(labelled_human, dtype=np.int64)
    point = estimate(v, lv, lh)
    rng = np.random.default_rng(seed)
    draws = np.array([estimate(v[rng.integers(0, v.size, v.size)], *(a[idx] for a in (lv, lh)))
                      for idx in (rng.integers(0, lv.size, (n_resamples, lv.size)) if lv.size else np.zeros((0, 0), int))])
    finite = draws[np.isfinite(draws)] if draws.size else draws
    tail = 100 * (1 - CONFIDENCE) / 2
    lo, hi = (np.percentile(finite, [tail, 100 - tail]) if finite.size else (float("nan"), float("nan")))
    pos, neg = lv == 1, lv == 0
    return {"raw": float(v.mean()) if v.size else float("nan"), "point": point, "lo": float(lo), "hi": float(hi),
            "p_h_given_yes": float(lh[pos].mean()) if pos.any() else float("nan"),
            "p_h_given_no": float(lh[neg].mean()) if neg.any() else float("nan"), "n_labelled": int(lv.size)}


def _labels_of(output: ReadableOutput, probe: str) -> tuple[pl.DataFrame, list[str] | None]:
    info = output.manifest.probes.get(probe)
    if info is None:
        return read_human_labels([]), None
    paths = [Path(p) if Path(p).is_absolute() else output.path / p for p in info.human_labels or []]
    return read_human_labels(paths), info.ensemble


_KAPPA_COLUMNS = (ViewColumn("rater", "rater"), ViewColumn("reference", "reference"),
                 ViewColumn("kappa", "kappa", Format.SCORE, lo="lo", hi="hi"), ViewColumn("n", "n", Format.COUNT))
_CALIBRATION_COLUMNS = (
    ViewColumn("rater", "rater"), ViewColumn("raw", "judged correct", Format.RATE),
    ViewColumn("p_h_given_yes", "P(h|correct)", Format.RATE), ViewColumn("p_h_given_no", "P(h|incorrect)", Format.RATE),
    ViewColumn("point", "calibrated", Format.RATE, lo="lo", hi="hi"), ViewColumn("n_labelled", "labelled", Format.COUNT))
_CALIBRATION_SCHEMA = {"rater": pl.String, "reference": pl.String, "raw": pl.Float64, "p_h_given_yes": pl.Float64,
                       "p_h_given_no": pl.Float64, "point": pl.Float64, "lo": pl.Float64, "hi": pl.Float64,
                       "n_labelled": pl.Int64}


def _calibration_table(raters: pl.DataFrame, humans: pl.DataFrame, reference: str) -> pl.DataFrame:
    """Per rater: its calibrated correct-rate with ``reference`` (a human column) as truth."""
    joined = raters.join(humans.select("case_id", reference), on="case_id", how="left", maintain_order="left")
    rows = []
    for rater in [c for c in raters.columns if c != "case_id"]:
        v = joined.filter(pl.col(rater).is_not_null())
        lab = v.filter(pl.col(reference).is_not_null())
        res = calibrated_rate(v[rater].cast(pl.Int64).to_numpy(), lab[rater].cast(pl.Int64).to_numpy(),
                              lab[reference].cast(pl.Int64).to_numpy())
        rows.append({"rater": rater, "reference": reference, **res})
    return pl.DataFrame(rows, schema=_CALIBRATION_SCHEMA)


def judge_views(output: ReadableOutput, probe: str, *, seed: int = SEED) -> list[ProbeView]:
    """Kappas of every rater against every reference, and calibrated correct-rates (see the module docstring).

    ``seed`` (the run's) is not used: the intervals keep their fixed seed, so they match the paper anchors.
    """
    labels, ensemble = _labels_of(output, probe)
    raters = rater_table(output.scan(), probe, ensemble)
    if raters.height == 0:
        return []
    humans = human_references(labels)
    views = []
    k = kappas(raters, humans)
    if k.height:
        views.append(ProbeView(
            "kappas", f"{probe} · Cohen's kappa (rater vs reference)",
            f"kappa [{CONFIDENCE:.0%} bootstrap over traces] (n traces both decided). consensus: annotators unanimous "
            "(≥ 2 labels); majority: strict human majority; ensemble: the judges' 2-of-3 majority.",
            k, _KAPPA_COLUMNS))
    reference = "majority" if "majority" in humans.columns else None
    caption = (f"rate = P(v)·P(h|v) + P(¬v)·P(h|¬v) over the labelled traces; [{CONFIDENCE:.0%} percentile "
               "bootstrap, labelled and judged traces resampled independently; computed runner-side]. With few "
               "labels the interval is wide by construction.")
    if reference is None:
        views.append(ProbeView("calibration", f"{probe} · calibrated correct-rate", caption,
                               pl.DataFrame(schema=_CALIBRATION_SCHEMA), _CALIBRATION_COLUMNS,
                               notes=(f"{probe}: no human labels, so no calibrated rates "
                                      "(add `human_labels:` CSV files).",)))
        return views
    views.append(ProbeView("calibration", f"{probe} · calibrated correct-rate (human {reference} as truth)", caption,
                           _calibration_table(raters, humans, reference), _CALIBRATION_COLUMNS))
    return views
